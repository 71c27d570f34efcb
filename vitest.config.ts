import { defineConfig } from 'vitest/config';

// Unit tests live beside the code (src/**/*.test.ts); end-to-end tests drive real
// processes from test/e2e and need the build in dist/ (npm test builds first).
export default defineConfig({
  test: {
    // The JSON report is what .ci/run counts for its "N passed, N failed" line.
    reporters: ['default', ['json', { outputFile: '.vitest-report.json' }]],
    projects: [
      {
        test: {
          name: 'unit',
          include: [
            'src/**/*.test.ts',
            'web/src/**/*.test.ts',
            'bench/**/*.test.mjs',
            'test/docs/**/*.test.ts',
          ],
          // Bounds for a hang only: many unit tests start an in-process tower on PostgreSQL
          // (schema, migrations), which a loaded 2-core machine makes slow.
          testTimeout: 120_000,
          hookTimeout: 60_000,
        },
      },
      {
        test: {
          name: 'e2e',
          include: ['test/e2e/**/*.test.ts'],
          // Generous: these start real towers, daemons and CLIs, and a loaded 2-core CI machine
          // can take tens of seconds per process start. Tests never assert on time; these only
          // bound a hang.
          testTimeout: 300_000,
          hookTimeout: 180_000,
        },
      },
    ],
  },
});

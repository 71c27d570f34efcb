// npm's `prepare`, run by `npm install` in a clone: builds dist/ (tsc and the console with Vite,
// dev dependencies). After `npm install --omit=dev` they are not there: the build is skipped with
// one line instead of failing the install. The published package never runs this (npm runs
// `prepare` for the project itself and git dependencies, not for a tarball; it carries dist/).
const { execSync } = require('node:child_process');
const { existsSync } = require('node:fs');
const { join } = require('node:path');

function installed(name) {
  try {
    require.resolve(`${name}/package.json`, { paths: [join(__dirname, '..')] });
    return true;
  } catch {
    return false;
  }
}

if (!installed('typescript') || !installed('vite')) {
  const built = existsSync(join(__dirname, '..', 'dist', 'cli', 'svc.js'));
  console.error(
    built
      ? 'svcd: dev dependencies not installed (--omit=dev): not rebuilding; dist/ is used as it is.'
      : 'svcd: dev dependencies not installed (--omit=dev), so dist/ is not built: run `npm install` and `npm run build` where they can be, or install the package (`npm install -g svcd`).',
  );
  process.exit(0);
}
execSync('npm run build', { cwd: join(__dirname, '..'), stdio: 'inherit' });

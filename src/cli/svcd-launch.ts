// How svc starts svcd (svc daemon up, svc up, the systemd unit): the Node.js flags an idle
// daemon wants. bench/daemon measures their effect (BENCHMARKS.md, "daemon").

/**
 * - `--max-semi-space-size=1`: V8's young generation grows to 2 × 16 MiB semi-spaces on 64-bit;
 *   at start-up that is ≈30 MiB of svcd's peak RSS. svcd allocates little and steadily
 *   (control frames, mgmt calls, progress events), so 1 MiB semi-spaces cost a few more
 *   scavenges, never a pause that matters.
 * - `--single-threaded`: no V8 background tasks (concurrent TurboFan, concurrent marking and
 *   sweeping, parallel compilation). Each of those threads keeps its own malloc arena with
 *   the compiler's and GC's scratch memory, ≈6 MiB of private RSS that an idle daemon never
 *   gives back; svcd's heap is ≈15–20 MiB, so doing that work on the main thread costs a few
 *   milliseconds now and then. Node's own threads (libuv's pool for fs and dns) are unaffected.
 * - `--optimize-for-size`: V8 grows the heap less eagerly and keeps less slack, which flattens
 *   the RSS peaks after bursts of mgmt calls (idle CPU is the same).
 * They cannot be set from inside the process (V8 reads them when it starts), nor through
 * NODE_OPTIONS except the first.
 */
export const SVCD_NODE_FLAGS: readonly string[] = [
  '--max-semi-space-size=1',
  '--single-threaded',
  '--optimize-for-size',
];

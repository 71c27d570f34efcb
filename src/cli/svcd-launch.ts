// How svc starts svcd (svc daemon up, svc up, the systemd unit): the Node.js flags an idle
// daemon wants. bench/daemon measures their effect (BENCHMARKS.md, "daemon").

/**
 * V8's young generation grows to 2 × 16 MiB semi-spaces on 64-bit and stays committed, a third
 * of an idle svcd's RSS. svcd allocates little and steadily (control frames, mgmt calls,
 * progress events), so 1 MiB semi-spaces cost a few more scavenges, never a pause that matters.
 * This cannot be set from inside the process (V8 sizes the heap at start).
 */
export const SVCD_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1'];

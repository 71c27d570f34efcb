// How svc starts svcd (svc daemon up, svc up, the systemd unit): the Node.js flags an idle
// daemon wants. bench/daemon measures their effect (BENCHMARKS.md, "daemon").

/**
 * V8's young generation grows to 2 × 16 MiB semi-spaces on 64-bit; at start-up that is ≈30 MiB
 * of svcd's peak RSS (V8 shrinks it later when idle, so the 5-minute median barely moves).
 * svcd allocates little and steadily (control frames, mgmt calls, progress events), so 1 MiB
 * semi-spaces cost a few more scavenges, never a pause that matters. This cannot be set from
 * inside the process (V8 sizes the heap at start).
 */
export const SVCD_NODE_FLAGS: readonly string[] = ['--max-semi-space-size=1'];

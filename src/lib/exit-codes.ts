// sysexits(3) codes the CLIs use: scripts can tell usage, unavailable and config apart.
export const EXIT = {
  ok: 0,
  failed: 1,
  usage: 2,
  unavailable: 69,
  software: 70,
  config: 78,
} as const;

export type ExitCode = (typeof EXIT)[keyof typeof EXIT];

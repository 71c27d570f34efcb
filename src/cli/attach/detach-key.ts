// The detach key of `svc attach`: Ctrl-] then d (telnet's escape, which no shell binds).
// Ctrl-] twice sends one Ctrl-] to the agent; Ctrl-] then anything else sends both bytes.
// Pure: feed it stdin chunks, it says what to forward and whether to detach.

export const ESCAPE = 0x1d;
export const DETACH_HINT = 'Ctrl-] then d';

export class DetachKey {
  private armed = false;

  /** Splits a chunk of typed input into what goes to the agent and whether to detach. */
  feed(chunk: Buffer): { forward: Buffer; detach: boolean } {
    const out: number[] = [];
    for (const b of chunk) {
      if (this.armed) {
        this.armed = false;
        if (b === 0x64 /* d */ || b === 0x44 /* D */) return { forward: Buffer.from(out), detach: true };
        out.push(ESCAPE);
        if (b !== ESCAPE) out.push(b);
        continue;
      }
      if (b === ESCAPE) this.armed = true;
      else out.push(b);
    }
    return { forward: Buffer.from(out), detach: false };
  }
}

// Wasm booster modules for tests and benches, built from WAT with wabt at test time.
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import wabtInit from 'wabt';

let wabt: Awaited<ReturnType<typeof wabtInit>> | null = null;

export async function watToWasm(wat: string): Promise<Uint8Array> {
  wabt ??= await wabtInit();
  const m = wabt.parseWat('test.wat', wat);
  try {
    return m.toBinary({}).buffer;
  } finally {
    m.destroy();
  }
}

/** Builds `wat` and writes it to dir/name.wasm; returns the path. */
export async function writeWasm(dir: string, name: string, wat: string): Promise<string> {
  const file = join(dir, `${name}.wasm`);
  writeFileSync(file, await watToWasm(wat));
  return file;
}

/** A module whose validate() returns `body` (a WAT expression over $ptr and $len). */
const booster = (body: string) => `(module
  (memory (export "memory") 1)
  (func (export "alloc") (param $len i32) (result i32)
    (local $need i32)
    (local.set $need (i32.sub (i32.shr_u (i32.add (local.get $len) (i32.const 65535)) (i32.const 16))
                              (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0)) (then (drop (memory.grow (local.get $need)))))
    (i32.const 0))
  (func (export "validate") (param $ptr i32) (param $len i32) (result i32) ${body}))`;

export const WAT = {
  reject: booster('(i32.const 0)'),
  pass: booster('(i32.const 1)'),
  shortCircuit: booster('(i32.const 2)'),
  trap: booster('(unreachable)'),
  loop: booster('(loop $forever (br $forever)) (i32.const 1)'),
  badVerdict: booster('(i32.const 7)'),
  missingExports: '(module (memory (export "memory") 1) (func (export "check") (result i32) (i32.const 1)))',
  /**
   * Decides by a marker in the payload (the call's JSON): "#reject" → 0, "#answer" → 2,
   * "#trap" traps, "#loop" loops forever, anything else → 1. One module drives every case
   * through one svcd.
   */
  byMarker: booster(`
    (local $i i32) (local $end i32) (local $c i32)
    (local.set $end (i32.add (local.get $ptr) (local.get $len)))
    (local.set $i (local.get $ptr))
    (block $done
      (loop $scan
        (br_if $done (i32.ge_u (i32.add (local.get $i) (i32.const 1)) (local.get $end)))
        (if (i32.eq (i32.load8_u (local.get $i)) (i32.const 35)) ;; '#'
          (then
            (local.set $c (i32.load8_u (i32.add (local.get $i) (i32.const 1))))
            (if (i32.eq (local.get $c) (i32.const 114)) (then (return (i32.const 0)))) ;; 'r'
            (if (i32.eq (local.get $c) (i32.const 97)) (then (return (i32.const 2)))) ;; 'a'
            (if (i32.eq (local.get $c) (i32.const 116)) (then (unreachable))) ;; 't'
            (if (i32.eq (local.get $c) (i32.const 108)) (then (loop $forever (br $forever)))))) ;; 'l'
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const 1)`),
};

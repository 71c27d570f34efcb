// A benchmark's checks of its own counts (BENCHMARKING.md, "Honest figures"): every event
// delivered exactly once, every task completed once, every request answered. A figure is only
// as good as the count behind it, so a bench records each check as it goes and calls
// `orExit()` before it writes BENCHMARKS.md: one mismatch ends the run with exit code 1 and
// no figures written. Checks never throw, so a bench still stops what it started.

/** The count checks of one benchmark run; `bench` names it in the messages. */
export function countChecks(bench) {
  const failures = [];
  const fail = (message) => {
    failures.push(message);
    console.error(`bench ${bench}: count check failed: ${message}`);
    return false;
  };
  return {
    /** `got` must equal `expected` exactly: more is a counting bug, fewer a loss. */
    exact(what, got, expected) {
      if (got === expected) return true;
      return fail(
        `${what}: counted ${got} where exactly ${expected} were expected (${got > expected ? `${got - expected} too many` : `${expected - got} missing`})`,
      );
    },
    /** `ok` must hold; `message` says what did not. */
    that(ok, message) {
      return ok ? true : fail(message);
    },
    /** Every failure so far (empty when the run's counts hold). */
    get failures() {
      return [...failures];
    },
    /** Ends the process with exit code 1, before any figure is written, if a check failed. */
    orExit() {
      if (failures.length === 0) return;
      console.error(
        `bench ${bench}: ${failures.length} count check(s) failed, so its figures are not written:\n${failures.map((f) => `  - ${f}`).join('\n')}`,
      );
      process.exit(1);
    },
  };
}

/**
 * Checks that each id in `ids` (an iterable, one entry per delivery or completion) occurs
 * exactly once and that there are `expected` of them; `what` names the items in messages.
 */
export function exactlyOnce(checks, what, ids, expected) {
  const seen = new Set();
  let dupes = 0;
  let n = 0;
  for (const id of ids) {
    n++;
    if (seen.has(id)) dupes++;
    else seen.add(id);
  }
  const once = checks.that(dupes === 0, `${what}: ${dupes} counted more than once`);
  return checks.exact(`${what} (distinct)`, seen.size, expected) && once && n === expected;
}

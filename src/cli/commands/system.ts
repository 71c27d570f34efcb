// `svc system doctor [--fix]`: checks this machine as a node (tower reachability and auth,
// node identity, svcd and its sockets, tools, feed health, SVC_HOME, SVC_SKILLS_HOME) and
// prints one verdict per check with a repair hint; exit 1 when any check fails
// (docs/operator-guide.md, "Checking a node").
import type { Command } from 'commander';
import { systemClock } from '../../lib/clock.js';
import { EXIT } from '../../lib/exit-codes.js';
import { type CommandDeps, globals } from '../deps.js';
import { runChecks } from '../doctor/checks.js';
import { applyFixes } from '../doctor/homes.js';
import { gatherFacts } from '../doctor/probe.js';
import { makeReport, renderReport } from '../doctor/report.js';
import { print } from '../output.js';
import { ExitStatus } from '../run.js';

export function registerSystem(program: Command, deps: CommandDeps): void {
  const system = program.command('system').description('this machine: health checks and repairs');
  system
    .command('doctor')
    .description(
      'check the tower (reachability, node and operator auth), the node identity, svcd and its socket permissions, required tools, feed health, SVC_HOME and SVC_SKILLS_HOME; exit 1 when a check fails',
    )
    .option('--fix', 'first create SVC_HOME and SVC_SKILLS_HOME and seed a stable agent_id for local swarms')
    .action(async (o: { fix?: boolean }, cmd: Command) => {
      const g = globals(cmd);
      const fixes = o.fix ? await applyFixes(deps.io.env, deps.io.paths.home, systemClock) : [];
      const facts = await gatherFacts(deps.io, systemClock, {
        ...(g.url ? { url: g.url } : {}),
        ...(g.token ? { token: g.token } : {}),
      });
      const report = makeReport(runChecks(facts), fixes);
      print(deps.io, Boolean(g.json), report, () => renderReport(report));
      if (!report.ok) throw new ExitStatus(EXIT.failed);
    });
}

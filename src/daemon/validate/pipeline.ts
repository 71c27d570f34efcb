// The one place that decides whether an MCP tool call leaves the node: the schema pack first,
// then the Wasm booster; every call emits one telemetry `progress` event with the verdict and
// the microseconds spent. It never makes the HTTP call itself (mcp/bridge.ts does).
import { SvcError } from '../../protocol/errors.js';
import type { NewEvent } from '../../protocol/events.js';
import type { McpToolName } from '../../protocol/mcp-tools.js';
import type { CompiledSchemaPack } from '../../protocol/schema-pack.js';
import type { Booster, BoosterOutcome } from './booster.js';

/** forward: make the tower call; answer: the booster answered success, no HTTP call. */
export type Decision = 'forward' | 'answer';

export type ValidationVerdict = 'pass' | 'reject' | 'short_circuit' | 'error';

export interface ValidationTelemetry {
  kind: 'validation';
  tool: string;
  verdict: ValidationVerdict;
  /** Which check decided: the schema pack or the booster. */
  stage: 'schema' | 'booster';
  micros: number;
  booster: string;
  reason?: string;
}

export interface ToolCallValidation {
  /** Resolves to what to do with a valid call; throws validation_failed / validation_rejected. */
  check(tool: string, args: unknown): Promise<Decision>;
}

export interface ValidationDeps {
  pack: CompiledSchemaPack;
  booster: Booster;
  /** Telemetry sink; must not throw (the outbox's publish, with its errors logged). */
  emit(event: NewEvent): void;
  /** Monotonic microseconds (performance.now() * 1000 in svcd). */
  micros(): number;
}

export function createToolCallValidation(deps: ValidationDeps): ToolCallValidation {
  const emit = (t: ValidationTelemetry) =>
    deps.emit({ type: 'progress', status: t.verdict, payload: t as unknown as Record<string, unknown> });

  return {
    async check(tool, args) {
      const start = deps.micros();
      const base = { kind: 'validation', tool, booster: deps.booster.source } as const;
      try {
        deps.pack.check(tool, args);
      } catch (e) {
        const reason = (e as Error).message;
        emit({ ...base, verdict: 'reject', stage: 'schema', micros: elapsed(start, deps), reason });
        throw e;
      }
      const payload = Buffer.from(JSON.stringify({ tool, args }));
      const outcome: BoosterOutcome = await deps.booster.check(payload);
      const micros = elapsed(start, deps);
      const reason = outcome.verdict === 'error' ? outcome.reason : undefined;
      emit({ ...base, verdict: outcome.verdict, stage: 'booster', micros, ...(reason ? { reason } : {}) });
      return decide(tool as McpToolName, deps.booster.source, outcome);
    },
  };
}

/** A booster that errs (trap, time limit, missing exports) rejects: fail closed. */
export function decide(tool: McpToolName, booster: string, outcome: BoosterOutcome): Decision {
  switch (outcome.verdict) {
    case 'pass':
      return 'forward';
    case 'short_circuit':
      return 'answer';
    case 'reject':
      throw new SvcError('validation_rejected', `${tool}: rejected by the booster (${booster})`);
    case 'error':
      throw new SvcError(
        'validation_rejected',
        `${tool}: the booster failed, so the call is refused: ${outcome.reason}`,
      );
  }
}

function elapsed(start: number, deps: ValidationDeps): number {
  return Math.round((deps.micros() - start) * 10) / 10;
}

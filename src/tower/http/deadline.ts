// Every request is answered by its deadline (docs/operations.md: the store is never trusted to be up).
// A handler, or the auth lookup before it, still waiting then — on a store that hangs, a pool
// with no free connection — is answered 503 unavailable with Retry-After, and its late outcome
// is dropped; the store's own timeouts (store/pg-connection.ts) end the wait underneath soon
// after. Routes that hand the response over to a stream (hijacked SSE, WebSockets) are not
// bounded once they did.
import type { FastifyInstance, FastifyReply, FastifyRequest, RouteHandlerMethod } from 'fastify';
import type { Clock } from '../../lib/clock.js';
import { SvcError } from '../../protocol/errors.js';

export const DEFAULT_REQUEST_DEADLINE_MS = 15_000;
/** What a request past its deadline tells the client to wait before retrying (s). */
export const DEADLINE_RETRY_AFTER_S = 1;

declare module 'fastify' {
  interface FastifyRequest {
    /** When this request must have been answered (clock ms). */
    deadlineAt: number;
  }
}

export class RequestDeadline {
  constructor(
    private readonly clock: Clock,
    readonly ms: number = DEFAULT_REQUEST_DEADLINE_MS,
  ) {}

  /** Stamps every request and bounds every handler except WebSocket routes'. */
  install(app: FastifyInstance): void {
    app.decorateRequest('deadlineAt', 0);
    // A callback hook: cheaper than an async one on every request.
    app.addHook('onRequest', (req, _reply, done) => {
      req.deadlineAt = this.clock.now() + this.ms;
      done();
    });
    app.addHook('onRoute', (route) => {
      if ((route as { websocket?: boolean }).websocket) return;
      const handler = route.handler as RouteHandlerMethod;
      const deadline = this;
      route.handler = function bounded(this: FastifyInstance, req, reply) {
        return deadline.within(req, reply, handler.call(this, req, reply));
      } as RouteHandlerMethod;
    });
  }

  /**
   * `work`, or a 503 at the request's deadline if it is still running then (unless the
   * response was already handed over: a stream, a reply sent by hand).
   */
  within<T>(req: FastifyRequest, reply: FastifyReply, work: T | Promise<T>): T | Promise<T | undefined> {
    if (!(work instanceof Promise)) return work;
    return new Promise<T | undefined>((resolve, reject) => {
      const timer = this.clock.setTimeout(
        () => {
          if (reply.sent) resolve(undefined);
          else reject(this.expired());
        },
        Math.max(0, req.deadlineAt - this.clock.now()),
      );
      work.then(
        (v) => {
          timer.cancel();
          resolve(v);
        },
        (e: unknown) => {
          timer.cancel();
          reject(e);
        },
      );
    });
  }

  private expired(): SvcError {
    return new SvcError(
      'unavailable',
      `no answer within the request deadline of ${this.ms / 1000} s (the store is slow or unreachable); retry`,
      { retryAfter: DEADLINE_RETRY_AFTER_S },
    );
  }
}

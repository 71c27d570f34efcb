// Translates every error that reaches Fastify into RFC 9457 problem+json with a stable code.
// A fault of the store (store/faults.ts) is a 503 with its code and Retry-After; other unknown
// errors become `internal` and are logged; their messages never reach the client.
import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { problemOf, SvcError } from '../../protocol/errors.js';
import { FAULT_ANSWER, type StoreFault, storeFault } from '../store/faults.js';
import { fieldErrors } from './validation.js';

/** The 503 a client gets for a fault of the store. */
export function faultError(f: StoreFault, cause?: unknown): SvcError {
  const a = FAULT_ANSWER[f.kind];
  return new SvcError(a.code, `${a.what} (${f.cause}); retry in ${a.retryAfter} s`, {
    retryAfter: a.retryAfter,
    ...(cause === undefined ? {} : { cause }),
  });
}

export function toSvcError(err: FastifyError | Error): SvcError {
  if (err instanceof SvcError) return err;
  const fault = storeFault(err);
  if (fault) return faultError(fault, err);
  const fe = err as FastifyError & { validationContext?: string };
  if (Array.isArray(fe.validation)) {
    const errors = fieldErrors(fe.validationContext ?? 'body', fe.validation);
    const first = errors[0];
    return new SvcError('validation_failed', first ? `${first.field}: ${first.message}` : 'invalid request', {
      errors,
    });
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return new SvcError('invalid_json', `request body is not valid JSON: ${fe.message}`);
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new SvcError('payload_too_large', 'request body exceeds the size limit (1 MiB by default)');
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new SvcError('unsupported_media_type', 'send the body as application/json');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new SvcError('bad_request', 'Content-Length does not match the body');
  }
  if (err instanceof SyntaxError || fe.statusCode === 400) {
    return new SvcError('invalid_json', `request body is not valid JSON: ${err.message}`);
  }
  if (fe.statusCode === 413) return new SvcError('payload_too_large', 'request body exceeds the size limit');
  if (fe.statusCode === 415)
    return new SvcError('unsupported_media_type', 'send the body as application/json');
  return new SvcError('internal', 'internal error', { cause: err });
}

export function sendProblem(reply: FastifyReply, e: SvcError): FastifyReply {
  if (e.retryAfter !== undefined) reply.header('Retry-After', String(e.retryAfter));
  return reply.code(e.status).type('application/problem+json').send(problemOf(e));
}

export function installProblemHandlers(
  app: FastifyInstance,
  opts: { onStoreFault?: (f: StoreFault) => void } = {},
): void {
  app.setErrorHandler((err: FastifyError, req: FastifyRequest, reply: FastifyReply) => {
    const e = toSvcError(err);
    if (e.code === 'internal') req.log.error({ err }, 'unhandled error');
    else if (e.status === 503 && !(err instanceof SvcError)) {
      // The store's health logs write faults once; connection faults are logged by the pool.
      const f = storeFault(err);
      if (f) opts.onStoreFault?.(f);
      req.log.debug({ err, code: e.code }, 'store fault');
    }
    return sendProblem(reply, e);
  });
  app.setNotFoundHandler((req, reply) =>
    sendProblem(reply, new SvcError('not_found', `no route ${req.method} ${req.url.split('?')[0]}`)),
  );
}

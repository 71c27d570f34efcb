// `svcd get-secret NAME [--raw]`: what an agent runs to read a secret. It speaks the same
// one-request-per-connection protocol as any raw client of secrets.sock, with the socket and
// session svcd injected into the agent's environment (never taken from argv, where other
// users could read the session id).
import { createConnection } from 'node:net';
import type { Command } from 'commander';
import { systemClock } from '../../lib/clock.js';
import { isErrorCode, SvcError } from '../../protocol/errors.js';
import { type BrokerReply, isSecretName } from '../../protocol/secrets-socket.js';
import type { CliIO } from '../io.js';
import { UsageError } from '../run.js';

const ANSWER_TIMEOUT_MS = 30_000;
const MAX_REPLY_BYTES = 1024 * 1024;

/** Sends one request to secrets.sock and returns the value, or throws the broker's error. */
export function requestSecret(
  socketPath: string,
  session: string,
  name: string,
  timeoutMs = ANSWER_TIMEOUT_MS,
): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const finish = (fn: () => void) => {
      if (settled) return;
      settled = true;
      timer.cancel();
      socket.destroy();
      fn();
    };
    const socket = createConnection(socketPath);
    const timer = systemClock.setTimeout(
      () =>
        finish(() =>
          reject(
            new SvcError('unavailable', `svcd did not answer on ${socketPath} within ${timeoutMs / 1000} s`),
          ),
        ),
      timeoutMs,
    );
    socket.on('connect', () => {
      socket.end(`${JSON.stringify({ op: 'get', session, name })}\n`);
    });
    socket.on('data', (d: Buffer) => {
      size += d.length;
      if (size > MAX_REPLY_BYTES) {
        finish(() => reject(new SvcError('internal', 'the reply from secrets.sock is too long')));
        return;
      }
      chunks.push(d);
    });
    socket.on('error', (e: NodeJS.ErrnoException) =>
      finish(() =>
        reject(
          new SvcError(
            'unavailable',
            `cannot use ${socketPath} (${e.code ?? e.message}): is svcd running, and is this process an agent it started?`,
          ),
        ),
      ),
    );
    socket.on('close', () =>
      finish(() => {
        let reply: BrokerReply;
        try {
          reply = JSON.parse(Buffer.concat(chunks).toString('utf8')) as BrokerReply;
        } catch {
          reject(new SvcError('internal', `${socketPath} closed without a valid reply`));
          return;
        }
        if (reply.ok === true && typeof reply.value === 'string') resolve(reply.value);
        else if (reply.ok === false && isErrorCode(reply.error?.code)) {
          reject(new SvcError(reply.error.code, reply.error.message));
        } else reject(new SvcError('internal', `${socketPath} sent an unexpected reply`));
      }),
    );
  });
}

export function registerGetSecret(program: Command, io: CliIO): void {
  program
    .command('get-secret <name>')
    .description('print a secret granted to this agent (inside an agent started by svcd)')
    .option('--raw', 'print the value exactly, without a trailing newline')
    .addHelpText(
      'after',
      '\nReads SVC_SECRETS_SOCKET and SVC_SECRETS_SESSION, which svcd sets for every agent it starts.\nExample: GITHUB_TOKEN="$(svcd get-secret GITHUB_TOKEN --raw)"',
    )
    .action(async (name: string, o: { raw?: boolean }) => {
      if (!isSecretName(name)) {
        throw new UsageError(
          `invalid secret name "${name}": use letters, digits, _ . -, starting with a letter or _ (at most 128)`,
        );
      }
      const socketPath = io.env.SVC_SECRETS_SOCKET;
      const session = io.env.SVC_SECRETS_SESSION;
      if (!socketPath || !session) {
        throw new SvcError(
          'config_invalid',
          `${socketPath ? 'SVC_SECRETS_SESSION' : 'SVC_SECRETS_SOCKET'} is not set: svcd get-secret works inside an agent started by svcd`,
        );
      }
      const value = await requestSecret(socketPath, session, name);
      if (o.raw) (io.write ?? io.out)(value);
      else io.out(value);
    });
}

// Unix socket listeners for svcd. A socket file left by a crashed daemon is replaced; one a
// live daemon still answers on means another svcd runs, and this one refuses to start.
// Sockets are chmod 0600 before the first connection can matter (the directory is 0700).
import { chmod, unlink } from 'node:fs/promises';
import { createConnection, createServer, type Server, type Socket } from 'node:net';
import { SvcError } from '../protocol/errors.js';

/** True when something accepts connections on the socket path. */
export function socketIsLive(path: string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = createConnection(path);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

export interface UnixListener {
  server: Server;
  path: string;
  /** Stops accepting, destroys open connections, removes the socket file. */
  close(): Promise<void>;
}

export interface ListenOptions {
  /** Keep writing after the client half-closes (one-request-per-connection protocols). */
  allowHalfOpen?: boolean;
  /** Connections beyond this are closed at accept. */
  maxConnections?: number;
  /** Sockets start paused: nothing is read until the handler calls resume(). */
  pauseOnConnect?: boolean;
}

export async function listenUnix(
  path: string,
  onConnection: (socket: Socket) => void,
  opts: ListenOptions = {},
): Promise<UnixListener> {
  if (await socketIsLive(path)) {
    throw new SvcError(
      'conflict',
      `another svcd is already serving ${path}: stop it first ("svc daemon down")`,
    );
  }
  await unlink(path).catch((e: NodeJS.ErrnoException) => {
    if (e.code !== 'ENOENT') throw e;
  });
  const open = new Set<Socket>();
  const server = createServer(
    { allowHalfOpen: opts.allowHalfOpen ?? false, pauseOnConnect: opts.pauseOnConnect ?? false },
    (socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
      onConnection(socket);
    },
  );
  if (opts.maxConnections !== undefined) server.maxConnections = opts.maxConnections;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(path, () => {
      server.off('error', reject);
      resolve();
    });
  });
  await chmod(path, 0o600);
  let closing: Promise<void> | null = null;
  return {
    server,
    path,
    close() {
      closing ??= (async () => {
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          for (const s of open) s.destroy();
        });
        await unlink(path).catch(() => {});
      })();
      return closing;
    },
  };
}

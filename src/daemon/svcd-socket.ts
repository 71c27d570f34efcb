// svcd.sock: the local gateway socket (attach streams, DESIGN §4). This component owns the
// socket file: it is opened 0600 at start (a stale file from a crashed daemon is replaced, a
// live one refuses the start) and removed at stop. Until the attach gateway plugs its handler
// in with serve(), a connection gets one JSON-RPC error line and is closed.
import type { Socket } from 'node:net';
import type { Component, DaemonContext } from './context.js';
import { listenUnix, type UnixListener } from './sockets.js';

export interface SvcdSocket extends Component {
  /** Sets the handler for new connections (the attach gateway). */
  serve(handler: (socket: Socket) => void): void;
}

export function createSvcdSocket(ctx: DaemonContext): SvcdSocket {
  let handler: ((socket: Socket) => void) | null = null;
  let listener: UnixListener | null = null;
  let connections = 0;
  return {
    name: 'svcd_sock',
    serve(h) {
      handler = h;
    },
    async start() {
      if (listener) return;
      listener = await listenUnix(ctx.paths.svcdSock, (socket) => {
        connections++;
        if (handler) return handler(socket);
        socket.end(
          `${JSON.stringify({
            jsonrpc: '2.0',
            id: null,
            error: { code: -32601, message: 'svcd.sock has no gateway in this svcd version' },
          })}\n`,
        );
      });
    },
    async stop() {
      await listener?.close();
      listener = null;
    },
    status() {
      return { socket: ctx.paths.svcdSock, connections };
    },
  };
}

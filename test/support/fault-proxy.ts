// A TCP proxy that breaks the connection to a server the way production does, for tests of
// what a client of that server (the tower, in front of PostgreSQL) does then:
//   refuse()  the port stops listening: new connections get ECONNREFUSED (accept() undoes it);
//   reset()   every open connection is reset (RST), as when the server restarts or a NAT drops;
//   stall()   bytes stop moving both ways while connections stay open, as in a partition
//             (resume() delivers what was held, in order);
//   slow(ms)  every chunk is delayed by ms each way (0 undoes it).
import { createServer, type Server, type Socket, connect as tcpConnect } from 'node:net';

export interface FaultProxy {
  /** The port the proxy listens on (127.0.0.1). */
  readonly port: number;
  /** Connections open through the proxy now. */
  readonly open: number;
  refuse(): Promise<void>;
  accept(): Promise<void>;
  reset(): void;
  stall(): void;
  resume(): void;
  slow(ms: number): void;
  close(): Promise<void>;
}

interface Pipe {
  client: Socket;
  server: Socket;
}

/** One direction of a pipe: chunks in order, held while stalled, delayed while slow. */
class Lane {
  private held: Buffer[] = [];
  private chain: Promise<void> = Promise.resolve();

  constructor(
    private readonly to: Socket,
    private readonly proxy: { stalled: boolean; slowMs: number },
  ) {}

  push(chunk: Buffer): void {
    if (this.proxy.stalled) {
      this.held.push(chunk);
      return;
    }
    this.send(chunk);
  }

  flush(): void {
    const held = this.held;
    this.held = [];
    for (const c of held) this.send(c);
  }

  private send(chunk: Buffer): void {
    const delay = this.proxy.slowMs;
    if (delay <= 0 && this.idle) {
      if (!this.to.destroyed) this.to.write(chunk);
      return;
    }
    this.pending++;
    this.chain = this.chain.then(
      () =>
        new Promise<void>((resolve) => {
          setTimeout(() => {
            this.pending--;
            if (!this.to.destroyed) this.to.write(chunk);
            resolve();
          }, delay);
        }),
    );
  }

  private pending = 0;
  private get idle(): boolean {
    return this.pending === 0;
  }
}

export async function startFaultProxy(target: { host: string; port: number }): Promise<FaultProxy> {
  const pipes = new Set<Pipe>();
  const lanes = new Set<Lane>();
  const state = { stalled: false, slowMs: 0 };
  let port = 0;
  let server: Server | null = null;

  const onConnection = (client: Socket) => {
    const upstream = tcpConnect(target.port, target.host);
    const pipe: Pipe = { client, server: upstream };
    pipes.add(pipe);
    const up = new Lane(upstream, state);
    const down = new Lane(client, state);
    lanes.add(up);
    lanes.add(down);
    client.on('data', (c: Buffer) => up.push(c));
    upstream.on('data', (c: Buffer) => down.push(c));
    const end = () => {
      pipes.delete(pipe);
      lanes.delete(up);
      lanes.delete(down);
      if (!client.destroyed) client.destroy();
      if (!upstream.destroyed) upstream.destroy();
    };
    client.on('error', end);
    upstream.on('error', end);
    client.on('close', end);
    upstream.on('close', end);
  };

  const listen = (p: number) =>
    new Promise<Server>((resolve, reject) => {
      const s = createServer(onConnection);
      s.once('error', reject);
      s.listen(p, '127.0.0.1', () => {
        s.off('error', reject);
        resolve(s);
      });
    });

  server = await listen(0);
  port = (server.address() as { port: number }).port;

  const closeServer = async () => {
    const s = server;
    server = null;
    if (s) await new Promise<void>((r) => s.close(() => r()));
  };

  return {
    get port() {
      return port;
    },
    get open() {
      return pipes.size;
    },
    async refuse() {
      await closeServer();
    },
    async accept() {
      if (!server) server = await listen(port);
    },
    reset() {
      for (const p of [...pipes]) {
        p.client.resetAndDestroy();
        p.server.resetAndDestroy();
      }
    },
    stall() {
      state.stalled = true;
    },
    resume() {
      state.stalled = false;
      for (const l of lanes) l.flush();
    },
    slow(ms) {
      state.slowMs = ms;
    },
    async close() {
      state.stalled = false;
      for (const p of [...pipes]) {
        p.client.destroy();
        p.server.destroy();
      }
      await closeServer();
    },
  };
}

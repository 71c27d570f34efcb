// The peer of bench/feed: a socket.io 4 server configured as its docs recommend for
// throughput (websocket transport only, no per-message deflate) that broadcasts every event a
// publisher sends to every connected client with io.emit.
import { createServer } from 'node:http';
import { Server } from 'socket.io';

const http = createServer();
const io = new Server(http, { transports: ['websocket'], perMessageDeflate: false, serveClient: false });
io.on('connection', (socket) => {
  if (socket.handshake.auth?.role !== 'publisher') return;
  socket.on('publish', (batch) => {
    for (const ev of batch) io.emit('event', ev);
  });
});
http.listen(0, '127.0.0.1', () => {
  const { port } = http.address();
  process.stdout.write(`listening on http://127.0.0.1:${port}\n`);
});
process.on('SIGTERM', () => {
  io.close();
  http.close(() => process.exit(0));
});

import type { Server } from 'node:http';
import type { Socket } from 'node:net';
import type { Logger } from '../domain/context.js';

/**
 * The write deadline of every connection (WRITE_TIMEOUT_SECONDS, docs/operators/security.md
 * "Slow and silent clients"). Bytes written to a socket whose peer does not read stay in this
 * process once the kernel's send buffer is full, and an answer (a stream's place among its
 * limits included) is held for as long as its bytes wait. A connection whose unsent bytes make
 * no progress for `writeTimeoutMs` is destroyed: its answer is cut, its streams end, and what
 * they held is let go when the socket closes.
 *
 * Watched on the socket rather than by each writer, so no answer can forget it: plain JSON,
 * exports, owner event streams, MCP event-stream answers, subscriptions/listen streams and the
 * wake WebSocket alike. Progress is a write completing (`bytesWritten - writableLength`, the
 * bytes the kernel took), not a writer adding more; a connection with nothing waiting is never
 * touched, however long it is quiet (a call waiting for its device, an idle stream between
 * keepalives).
 */
export function enforceWriteDeadline(server: Server, options: { writeTimeoutMs: number; log: Logger }): void {
  const { writeTimeoutMs, log } = options;
  const watched = new Map<Socket, { taken: number; since: number }>();
  let timer: NodeJS.Timeout | undefined;
  const sweep = () => {
    const now = performance.now();
    for (const [socket, state] of watched) {
      const waiting = socket.writableLength;
      const taken = socket.bytesWritten - waiting;
      if (waiting === 0 || taken > state.taken) {
        state.taken = taken;
        state.since = now;
      } else if (now - state.since >= writeTimeoutMs && !socket.destroyed) {
        // A client that does not read is not a server fault: news, not an error.
        log.info({ msg: 'connection closed: its client took no bytes within the write timeout', waitingBytes: waiting, writeTimeoutMs });
        socket.destroy();
      }
    }
  };
  server.on('connection', (socket: Socket) => {
    watched.set(socket, { taken: 0, since: performance.now() });
    // A few sweeps per deadline: a connection is closed between one and 1.25 deadlines after
    // it stalled. Only while there are connections, and unreferenced: it keeps nothing alive.
    timer ??= setInterval(sweep, Math.max(50, Math.min(1_000, writeTimeoutMs / 4))).unref();
    socket.once('close', () => {
      watched.delete(socket);
      if (watched.size === 0 && timer) {
        clearInterval(timer);
        timer = undefined;
      }
    });
  });
}

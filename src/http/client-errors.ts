import { randomUUID } from 'node:crypto';
import type { Server } from 'node:http';
import type { Duplex } from 'node:stream';
import type { Logger } from '../domain/context.js';
import type { ErrorEnvelope } from './errors.js';
import { endWithEnvelope } from './raw-answer.js';

/**
 * Requests node's HTTP parser refuses before any handler runs — a request line or headers
 * over the 16 KiB header limit, a malformed request line or header, a bad chunk — are
 * answered by node with an empty body by default. The contract wants every non-2xx in the
 * error envelope (docs/reference/rules.md "Errors and limits"), so this answers them with it: 431 for headers
 * too large, 400 for anything else the parser rejects, and the connection is closed since
 * the rest of its bytes cannot be trusted.
 */
export function answerClientErrors(server: Server, log: Logger): void {
  server.on('clientError', (error: NodeJS.ErrnoException, socket: Duplex) => {
    // As node itself does: a peer that went away, or a response already under way, leaves
    // nothing to answer on.
    const pending = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
    if (error.code === 'ECONNRESET' || !socket.writable || pending?.headersSent) {
      socket.destroy();
      return;
    }
    const tooLarge = error.code === 'HPE_HEADER_OVERFLOW';
    const status = tooLarge ? 431 : 400;
    const requestId = randomUUID();
    const body: ErrorEnvelope = {
      error: {
        code: 'invalid_request',
        message: tooLarge ? 'The request line and headers exceed 16 KiB.' : 'The request is not valid HTTP.',
        requestId,
      },
    };
    endWithEnvelope(socket, status, body);
    // Not a 'request' line: the parser gave no method or route to record.
    log.info({ msg: 'client error', requestId, status, parseError: error.code ?? 'unknown' });
  });
}

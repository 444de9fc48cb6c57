import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import type { ErrorEnvelope } from './errors.js';

/**
 * Answers on a raw socket, for the requests no framework handler sees (a request node's parser
 * refused, a refused WebSocket upgrade): the error envelope as JSON with its request id, never
 * cached, and the connection closed, since the rest of its bytes cannot be trusted.
 */
export function endWithEnvelope(socket: Duplex, status: number, body: ErrorEnvelope, headers: Record<string, string> = {}): void {
  const json = JSON.stringify(body);
  const lines = [
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? ''}`,
    'Content-Type: application/json',
    // Never cached, like every error (and every answer of the OAuth token endpoint, which this may be).
    'Cache-Control: no-store',
    `Content-Length: ${Buffer.byteLength(json)}`,
    `X-Request-Id: ${body.error.requestId}`,
    ...Object.entries(headers).map(([name, value]) => `${name}: ${value}`),
    'Connection: close',
  ];
  socket.end(`${lines.join('\r\n')}\r\n\r\n${json}`);
}

import type { IncomingMessage } from 'node:http';
import net from 'node:net';

/** What came back on a raw connection: every byte as latin1 text, and whether the server hung up. */
export interface RawAnswer {
  text: string;
  /** The status of the first answer line, or undefined when none arrived. */
  status: number | undefined;
  /** The server closed (or reset) the connection before the wait was over. */
  closed: boolean;
}

/**
 * Writes `bytes` as they are on a fresh TCP connection to `port` on loopback and collects the
 * answer until the server hangs up or `waitMs` passes: for requests no HTTP client would send
 * (broken request lines, percent-encodings, headers), on plain and Upgrade requests alike.
 */
export function rawRequest(port: number, bytes: string | Buffer, waitMs = 1000): Promise<RawAnswer> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const chunks: Buffer[] = [];
    let closed = false;
    const done = () => {
      clearTimeout(timer);
      socket.destroy();
      const text = Buffer.concat(chunks).toString('latin1');
      const status = /^HTTP\/1\.[01] (\d{3})/.exec(text)?.[1];
      resolve({ text, status: status === undefined ? undefined : Number(status), closed });
    };
    const timer = setTimeout(done, waitMs);
    socket.on('data', (chunk) => chunks.push(chunk));
    // A reset is an answer too (the server may hang up on garbage); only a dead process is not.
    socket.on('error', () => undefined);
    socket.on('close', () => {
      closed = true;
      done();
    });
    // Half-closed after the request, so the server answers and hangs up instead of keeping it alive.
    socket.end(bytes);
  });
}

/** The headers a WebSocket client sends to ask for an upgrade (RFC 6455 §4.1). */
export const UPGRADE_HEADERS = ['Connection: Upgrade', 'Upgrade: websocket', 'Sec-WebSocket-Version: 13', 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ=='];

/** A request line and headers as raw text, the header block closed. */
export function rawHead(requestLine: string, headers: string[]): string {
  return `${[requestLine, ...headers].join('\r\n')}\r\n\r\n`;
}

/**
 * Collects a node:http answer: its status and its body, parsed as JSON when it is JSON and left
 * as text otherwise, for the assertion to show.
 */
// `any` body: tests read fields of whatever JSON came back, and assert on its shape themselves.
export function collectAnswer(res: IncomingMessage): Promise<{ status: number; body: any }> {
  return new Promise((resolve) => {
    let text = '';
    res.setEncoding('utf8');
    res.on('data', (chunk) => (text += chunk));
    res.on('end', () => {
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON: kept as text.
      }
      resolve({ status: res.statusCode!, body: parsed });
    });
  });
}

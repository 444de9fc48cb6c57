import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { collectAnswer } from '../helpers/raw-http.js';
import { useTestServer } from '../helpers/server.js';

// docs/reference/rules.md "Errors and limits": a body over 16 KiB is 413 payload_too_large on any method
// and path. fetch() refuses to send a GET body, so these go through node:http.

const LIMIT = 16 * 1024;
let owner: string;

const server = useTestServer();

beforeAll(async () => {
  owner = await server.ownerToken('alice');
});

/** Sends `body` with `method` on a fresh connection; `chunked` leaves out Content-Length. */
function send(
  method: string,
  path: string,
  body: string,
  options: { token?: string; chunked?: boolean; contentType?: string } = {},
): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': options.contentType ?? 'application/json' };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    // node sends a GET's body unframed unless told to chunk it.
    if (options.chunked) headers['transfer-encoding'] = 'chunked';
    else headers['content-length'] = String(Buffer.byteLength(body));
    let answered = false;
    const req = http.request(`${server.url}${path}`, { method, headers, agent: false }, (res) => {
      answered = true;
      void collectAnswer(res).then(resolve);
    });
    // The server may answer 413 and stop reading before the last byte.
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
    });
    req.on('close', () => {
      if (!answered) reject(new Error('connection closed without an answer'));
    });
    if (options.chunked) {
      // Two writes: a chunked body whose size only the bytes received tell.
      req.write(body.slice(0, body.length / 2));
      req.end(body.slice(body.length / 2));
    } else req.end(body);
  });
}

const over = JSON.stringify({ pad: 'x'.repeat(20 * 1024) });
const small = JSON.stringify({ pad: 'x'.repeat(100) });

describe('16 KiB on every method and path', () => {
  it.each([
    ['GET a REST route', 'GET', '/v1/account', false],
    ['GET a REST route, chunked', 'GET', '/v1/account', true],
    ['GET /healthz', 'GET', '/healthz', false],
    ['GET /openapi.json, chunked', 'GET', '/openapi.json', true],
    ['DELETE /mcp', 'DELETE', '/mcp', false],
    ['GET an unknown path', 'GET', '/v1/nowhere', true],
    ['POST an unknown path', 'POST', '/v1/nowhere', true],
    ['PUT a REST route', 'PUT', '/v1/account', false],
  ])('%s with a 20 KiB body is 413 payload_too_large in the envelope', async (_label, method, path, chunked) => {
    const res = await send(method, path, over, { token: owner, chunked });
    expect(res.status).toBe(413);
    expect(res.body.error.code).toBe('payload_too_large');
    expect(res.body.error.requestId).toBeTruthy();
  });

  it.each([
    ['GET a REST route', 'GET', '/v1/account', 200],
    ['GET /healthz, chunked', 'GET', '/healthz', 200],
    ['GET an unknown path', 'GET', '/v1/nowhere', 404],
    ['DELETE /mcp', 'DELETE', '/mcp', 405],
  ])('%s with a small body is answered as without one', async (_label, method, path, status) => {
    const res = await send(method, path, small, { token: owner, chunked: path === '/healthz' });
    expect(res.status).toBe(status);
  });

  it('keeps the exact boundary: 16 KiB on a GET is served', async () => {
    const exact = JSON.stringify({ pad: 'x'.repeat(LIMIT - 10) });
    expect(Buffer.byteLength(exact)).toBe(LIMIT);
    expect((await send('GET', '/v1/account', exact, { token: owner })).status).toBe(200);
    expect((await send('GET', '/v1/account', exact + ' ', { token: owner })).status).toBe(413);
  });

  it('leaves /oauth/* to its endpoints, in their own format (RFC 6749 JSON at the token endpoint)', async () => {
    const res = await send('POST', '/oauth/token', `grant_type=x&pad=${'x'.repeat(20 * 1024)}`, { contentType: 'application/x-www-form-urlencoded' });
    expect(res.status).toBe(413);
    expect(typeof res.body.error).toBe('string');
  });

  it('keeps serving afterwards', async () => {
    await send('GET', '/v1/account', over.repeat(4), { token: owner, chunked: true });
    expect((await send('GET', '/v1/account', '', { token: owner })).status).toBe(200);
  });
});

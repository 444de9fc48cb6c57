import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { ownerCookie, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * 16 KiB on every /oauth/* endpoint (docs/reference/rules.md "Errors and limits"):
 * one byte over is 413 in the endpoint's own format — RFC 6749 / RFC 7591 JSON on the token,
 * revocation and registration endpoints, the error envelope on /oauth/session, a page on the
 * browser's endpoints — declared or sent chunked; the limit itself is accepted.
 */

const LIMIT = 16 * 1024;
let cookie: string;

const server = useOAuthTestServer();

beforeAll(async () => {
  cookie = await ownerCookie(server.issuer, await server.ownerToken('body-limit-owner'));
});

/** A form body of exactly `size` bytes. */
const form = (size: number) => `client_id=x&pad=${'a'.repeat(size - 'client_id=x&pad='.length)}`;
/** The same bytes without Content-Length (chunked). */
const chunked = (text: string) =>
  new ReadableStream<Uint8Array>({
    start(controller) {
      controller.enqueue(new TextEncoder().encode(text));
      controller.close();
    },
  });

const post = (path: string, body: string, type: string, stream = false, headers: Record<string, string> = {}) =>
  fetch(`${server.issuer}${path}`, {
    method: 'POST',
    headers: { 'content-type': type, origin: server.issuer, ...headers },
    body: stream ? chunked(body) : body,
    redirect: 'manual',
    ...(stream ? { duplex: 'half' } : {}),
  } as RequestInit);

describe.each([false, true])('bodies over 16 KiB (chunked: %s)', (stream) => {
  it.each([
    ['/oauth/token', 'invalid_request'],
    ['/oauth/revoke', 'invalid_request'],
  ])('%s answers 413 in RFC 6749 JSON, whatever the content type', async (path, code) => {
    for (const type of ['application/x-www-form-urlencoded', 'text/plain']) {
      const res = await post(path, form(LIMIT + 1), type, stream);
      expect(res.status).toBe(413);
      expect(res.headers.get('cache-control')).toContain('no-store');
      expect(await res.json()).toEqual({ error: code, error_description: expect.stringContaining(String(LIMIT)) });
    }
  });

  it('/oauth/register answers 413 invalid_client_metadata (was 400)', async () => {
    const body = JSON.stringify({ redirect_uris: ['https://app.example/cb'], client_name: 'x'.repeat(LIMIT) });
    const res = await post('/oauth/register', body, 'application/json', stream);
    expect(res.status).toBe(413);
    expect(await res.json()).toEqual({ error: 'invalid_client_metadata', error_description: expect.stringContaining(String(LIMIT)) });
  });

  it.each(['/oauth/authorize', '/oauth/sign-in', '/oauth/sign-out'])('%s answers a 413 page', async (path) => {
    const res = await post(path, form(LIMIT + 1), 'application/x-www-form-urlencoded', stream, { cookie });
    expect(res.status).toBe(413);
    expect(res.headers.get('content-type')).toContain('text/html');
  });

  it('/oauth/session answers 413 payload_too_large in the error envelope, even with a valid owner token', async () => {
    const owner = await server.ownerToken('body-limit-owner');
    const res = await post('/oauth/session', 'x'.repeat(LIMIT + 1), 'text/plain', stream, { authorization: `Bearer ${owner}` });
    expect(res.status).toBe(413);
    expect(await res.json()).toMatchObject({ error: { code: 'payload_too_large' } });
  });
});

describe('bodies of exactly 16 KiB are read (the normal case)', () => {
  it('/oauth/token reads the form and answers in the protocol (here: an unknown client)', async () => {
    const res = await post('/oauth/token', form(LIMIT), 'application/x-www-form-urlencoded');
    expect(res.status).toBe(401);
    expect(((await res.json()) as { error: string }).error).toBe('invalid_client');
  });

  it('/oauth/register accepts a 16 KiB document', async () => {
    const doc = JSON.stringify({ redirect_uris: ['https://app.example/cb'] });
    const res = await post('/oauth/register', doc + ' '.repeat(LIMIT - doc.length), 'application/json');
    expect(res.status).toBe(201);
  });

  it('/oauth/session ignores a body within the limit', async () => {
    const owner = await server.ownerToken('body-limit-owner');
    const res = await post('/oauth/session', 'x'.repeat(LIMIT), 'text/plain', false, { authorization: `Bearer ${owner}` });
    expect(res.status).toBe(204);
  });
});

/** Sends `body` with any method through node:http (fetch refuses some), on a fresh connection; `chunked` leaves out Content-Length. */
function send(method: string, path: string, body: string, chunked: boolean): Promise<{ status: number; type: string; text: string }> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded', origin: server.issuer };
    if (chunked) headers['transfer-encoding'] = 'chunked';
    else headers['content-length'] = String(Buffer.byteLength(body));
    let answered = false;
    const req = http.request(`${server.issuer}${path}`, { method, headers, agent: false }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, type: String(res.headers['content-type'] ?? ''), text }));
    });
    // The server may answer 413 and stop reading before the last byte.
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
    });
    req.on('close', () => {
      if (!answered) reject(new Error('connection closed without an answer'));
    });
    if (chunked) {
      req.write(body.slice(0, body.length / 2));
      req.end(body.slice(body.length / 2));
    } else req.end(body);
  });
}

// A method or path no OAuth endpoint serves is no way around the limit (it answered 404 before).
describe.each([false, true])('a 20 KB body on a method or path no endpoint serves (chunked: %s)', (chunked) => {
  it.each([
    ['DELETE', '/oauth/token', 'invalid_request'],
    ['PUT', '/oauth/register', 'invalid_client_metadata'],
  ])('%s %s is 413 in the endpoint’s RFC JSON', async (method, path, code) => {
    const res = await send(method, path, form(20_000), chunked);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text)).toEqual({ error: code, error_description: expect.stringContaining(String(LIMIT)) });
  });

  it('OPTIONS /oauth/authorize is a 413 page', async () => {
    const res = await send('OPTIONS', '/oauth/authorize', form(20_000), chunked);
    expect(res.status).toBe(413);
    expect(res.type).toContain('text/html');
  });

  it.each([
    ['PATCH', '/oauth/session'],
    ['POST', '/oauth/nonexistent'],
  ])('%s %s is 413 payload_too_large in the error envelope', async (method, path) => {
    const res = await send(method, path, form(20_000), chunked);
    expect(res.status).toBe(413);
    expect(JSON.parse(res.text)).toMatchObject({ error: { code: 'payload_too_large', requestId: expect.any(String) } });
  });

  it.each([
    ['DELETE', '/oauth/token'],
    ['PUT', '/oauth/register'],
    ['OPTIONS', '/oauth/authorize'],
    ['PATCH', '/oauth/session'],
    ['POST', '/oauth/nonexistent'],
  ])('%s %s with a small body is still 404', async (method, path) => {
    const res = await send(method, path, form(100), chunked);
    expect(res.status).toBe(404);
    expect(JSON.parse(res.text)).toMatchObject({ error: { code: 'not_found' } });
  });
});

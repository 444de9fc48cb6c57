import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ownerCookie, startOAuthTestServer } from './helpers/oauth.js';
import type { TestServer } from './helpers/server.js';

/**
 * 16 KiB on every /oauth/* endpoint (issue 13, item 10; docs/rules.md "Errors and limits"):
 * one byte over is 413 in the endpoint's own format — RFC 6749 / RFC 7591 JSON on the token,
 * revocation and registration endpoints, the error envelope on /oauth/session, a page on the
 * browser's endpoints — declared or sent chunked; the limit itself is accepted.
 */

const LIMIT = 16 * 1024;
let server: TestServer & { issuer: string; resource: string };
let cookie: string;

beforeAll(async () => {
  server = await startOAuthTestServer();
  cookie = await ownerCookie(server.issuer, await server.ownerToken('body-limit-owner'));
});
afterAll(() => server.close());

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

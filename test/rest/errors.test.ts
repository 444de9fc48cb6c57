import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { useTestServer } from '../helpers/server.js';

const LIMIT = 16 * 1024;

let owner: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('errors-owner');
});

/** Checks the envelope of docs/reference/rules.md "Envelopes": only `error` at top level. */
function expectEnvelope(body: any, code: string) {
  expect(Object.keys(body)).toEqual(['error']);
  expect(body.error.code).toBe(code);
  expect(typeof body.error.message).toBe('string');
  for (const issue of body.error.issues ?? []) {
    expect(Object.keys(issue).sort()).toEqual(['message', 'path']);
    expect(typeof issue.path).toBe('string');
    expect(typeof issue.message).toBe('string');
  }
}

/** A JSON body of exactly `size` bytes: a valid setup-token request padded with whitespace. */
function paddedBody(size: number): string {
  const core = '{"name":"padded"';
  return `${core}${' '.repeat(size - core.length - 1)}}`;
}

/**
 * A node:http POST on a fresh connection (`agent: false`: a pooled keep-alive socket the
 * server already closed would fail before the request is even sent). `send` writes the body.
 */
function rawPost(
  path: string,
  headers: Record<string, string>,
  send: (req: http.ClientRequest) => void,
): Promise<{ status: number; body: any; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    let answered = false;
    const req = http.request(`${server.url}${path}`, { method: 'POST', agent: false, headers: { 'content-type': 'application/json', ...headers } }, (res) => {
      answered = true;
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text), headers: res.headers }));
    });
    // The server may answer 413 and stop reading before the last byte: that is the point, so
    // a write error is fine as long as the answer arrives.
    req.on('error', (error: NodeJS.ErrnoException) => {
      if (error.code !== 'EPIPE' && error.code !== 'ECONNRESET') reject(error);
    });
    req.on('close', () => {
      if (!answered) reject(new Error('connection closed without an answer'));
    });
    send(req);
  });
}

/**
 * Sends a body with Transfer-Encoding: chunked and no Content-Length, through node:http
 * with a streamed body, so the server has only the bytes it receives to count.
 */
function chunkedPost(path: string, token: string, chunks: Buffer[]) {
  return rawPost(path, { authorization: `Bearer ${token}` }, (req) => {
    expect(req.getHeader('content-length')).toBeUndefined();
    let index = 0;
    const writeNext = () => {
      if (index === chunks.length) {
        req.end();
        return;
      }
      req.write(chunks[index++], () => setImmediate(writeNext));
    };
    writeNext();
  });
}

function split(text: string, size: number): Buffer[] {
  const bytes = Buffer.from(text);
  const chunks: Buffer[] = [];
  for (let offset = 0; offset < bytes.length; offset += size) chunks.push(bytes.subarray(offset, offset + size));
  return chunks;
}

describe('error envelope', () => {
  it('carries only `error` at top level, with code, message and the request id', async () => {
    const res = await api.get('/v1/account');
    expect(res.status).toBe(401);
    expectEnvelope(res.body, 'unauthorized');
    expect(res.body.error.requestId).toBe(res.headers.get('x-request-id'));
  });

  it('lists validation issues with path and message', async () => {
    const res = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: '', ttlSeconds: 1, deviceLimit: 99 } });
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'validation_failed');
    expect(res.body.error.issues.map((i: { path: string }) => i.path).sort()).toEqual(['deviceLimit', 'name', 'ttlSeconds']);
  });
});

describe('unknown routes', () => {
  it.each([
    ['GET', '/v1/nothing-here'],
    ['POST', '/v1/accounts'],
    ['GET', '/v2'],
    ['DELETE', '/v1/account'],
  ])('%s %s answers 404 not_found in the envelope', async (method, path) => {
    const res = await api.request(method, path, { token: owner });
    expect(res.status).toBe(404);
    expectEnvelope(res.body, 'not_found');
  });
});

describe('malformed request bodies', () => {
  it.each([
    ['truncated JSON', '{"name": "x"'],
    ['not JSON at all', 'name=x'],
    ['a JSON array', '[{"name":"x"}]'],
    ['a JSON string', '"x"'],
    ['JSON null', 'null'],
  ])('answers 400 invalid_request to %s', async (_label, raw) => {
    const res = await api.post('/v1/device-setup-tokens', { token: owner, raw });
    expect(res.status).toBe(400);
    expectEnvelope(res.body, 'invalid_request');
  });

  it('answers 400 invalid_request to a body that is not valid UTF-8', async () => {
    const res = await fetch(`${server.url}/v1/device-setup-tokens`, {
      method: 'POST',
      headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
      body: Buffer.from([0x7b, 0x22, 0x6e, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]),
    });
    expect(res.status).toBe(400);
    expectEnvelope(await res.json(), 'invalid_request');
  });

  it('treats an empty body as {} (so required fields are reported)', async () => {
    const res = await api.post('/v1/device-setup-tokens', { token: owner, raw: '' });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain('name');
  });
});

describe('request body limit (16 KiB)', () => {
  it('accepts a body of exactly 16 KiB', async () => {
    const raw = paddedBody(LIMIT);
    expect(Buffer.byteLength(raw)).toBe(LIMIT);
    const res = await api.post('/v1/device-setup-tokens', { token: owner, raw });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  });

  it('answers 413 payload_too_large to a body of 16 KiB + 1 byte', async () => {
    const res = await api.post('/v1/device-setup-tokens', { token: owner, raw: paddedBody(LIMIT + 1) });
    expect(res.status).toBe(413);
    expectEnvelope(res.body, 'payload_too_large');
  });

  it('accepts a chunked body of exactly 16 KiB with no Content-Length', async () => {
    const res = await chunkedPost('/v1/device-setup-tokens', owner, split(paddedBody(LIMIT), 1000));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
  });

  it('answers 413 to a chunked body of 16 KiB + 1 byte with no Content-Length', async () => {
    const res = await chunkedPost('/v1/device-setup-tokens', owner, split(paddedBody(LIMIT + 1), 1000));
    expect(res.status).toBe(413);
    expectEnvelope(res.body, 'payload_too_large');
  });

  it('answers 413 to a chunked body four times the limit', async () => {
    const res = await chunkedPost('/v1/device-setup-tokens', owner, split(paddedBody(4 * LIMIT), 4 * 1024));
    expect(res.status).toBe(413);
  });

  it('answers 413 when Content-Length declares more than 16 KiB', async () => {
    const res = await rawPost('/v1/device-setup-tokens', { authorization: `Bearer ${owner}`, 'content-length': String(LIMIT + 1) }, (req) =>
      req.end(paddedBody(LIMIT + 1)),
    );
    expect(res.status).toBe(413);
    expectEnvelope(res.body, 'payload_too_large');
  });

  it('keeps serving after rejecting an oversized body', async () => {
    await api.post('/v1/device-setup-tokens', { token: owner, raw: paddedBody(LIMIT * 4) });
    expect((await api.get('/v1/account', { token: owner })).status).toBe(200);
  });
});

describe('request id header', () => {
  it.each([
    ['200', 'GET', '/v1/account', true, undefined, 200],
    ['201', 'POST', '/v1/device-setup-tokens', true, '{"name":"x"}', 201],
    ['400', 'POST', '/v1/device-setup-tokens', true, '{', 400],
    ['401', 'GET', '/v1/account', false, undefined, 401],
    ['403', 'POST', '/v1/sdk/devices', true, '{"name":"x"}', 403],
    ['404', 'GET', '/v1/missing', true, undefined, 404],
    ['413', 'POST', '/v1/device-setup-tokens', true, paddedBody(LIMIT + 1), 413],
    ['health', 'GET', '/healthz', false, undefined, 200],
  ])('is on a %s response', async (_label, method, path, withToken, raw, status) => {
    const res = await api.request(method, path, { token: withToken ? owner : undefined, ...(raw !== undefined ? { raw } : {}) });
    expect(res.status).toBe(status);
    expect(res.headers.get('x-request-id')).toMatch(/^[\w-]{8,}$/);
  });

  it('differs between requests', async () => {
    const a = await api.get('/healthz');
    const b = await api.get('/healthz');
    expect(a.headers.get('x-request-id')).not.toBe(b.headers.get('x-request-id'));
  });
});

describe('precedence on REST', () => {
  // A bad token is refused before anything else; the credential's kind is judged with the
  // input, after the body has been read, so 413 and 400 come before a 401 for a missing
  // credential or a 403 for one of another kind (MCP decides all of it before the body).
  it('answers 401 to an unknown token before reading an oversized body', async () => {
    const res = await api.request('POST', '/v1/device-setup-tokens', { token: 'dfc_agent_unknown', raw: paddedBody(LIMIT + 1) });
    expect(res.status).toBe(401);
  });

  it.each([
    ['no credential and an oversized body', undefined, paddedBody(LIMIT + 1), 413],
    ['no credential and a body that is not JSON', undefined, '{', 400],
  ])('answers %s with %i', async (_label, token, raw, status) => {
    const res = await api.request('POST', '/v1/device-setup-tokens', { token, raw });
    expect(res.status).toBe(status);
  });

  it('judges a credential of another kind after the body: 400 for a body that is not JSON, 403 otherwise', async () => {
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'kind probe' } });
    const setupToken = setup.body.data.token as string;
    expect((await api.request('POST', '/v1/grants', { token: setupToken, raw: '{' })).status).toBe(400);
    expect((await api.request('POST', '/v1/grants', { token: setupToken, raw: '{}' })).status).toBe(403);
  });
});

describe('internal errors', () => {
  const broken = useTestServer();

  beforeAll(async () => {
    // An honest fault: the enrollments table disappears under the running service, so the
    // driver throws an error whose message names SQL objects.
    await broken.service.db.run('DROP TABLE enrollments');
  });

  it('answers a generic 500 with the request id and nothing internal; the detail goes to the log only', async () => {
    const token = await broken.ownerToken('broken-owner');
    const res = await client(broken.url).post('/v1/enrollments', { token });
    expect(res.status).toBe(500);
    expectEnvelope(res.body, 'internal');
    const requestId = res.headers.get('x-request-id');
    expect(res.body.error.requestId).toBe(requestId);
    const text = JSON.stringify(res.body);
    for (const leak of ['enrollments', 'SQL', 'sqlite', 'table', 'stack', '.ts:', 'at ']) expect(text).not.toContain(leak);

    const logged = broken.logs.map((line) => JSON.parse(line)).find((entry) => entry.level === 'error' && entry.requestId === requestId);
    expect(logged.error).toContain('enrollments');
  });

  it('keeps serving other requests after an internal error', async () => {
    const token = await broken.ownerToken('broken-owner');
    expect((await client(broken.url).get('/v1/account', { token })).status).toBe(200);
  });
});

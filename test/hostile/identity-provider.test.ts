import { createHash } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { startTestServer, TEST_AUDIENCE, TEST_ISSUER, type TestServer } from '../helpers/server.js';

/**
 * docs/operators/identity-provider.md "Identity provider health": with OWNER_JWKS_URL, the key set is fetched from a real
 * HTTP server here, which the test breaks and mends. While the key set cannot be fetched,
 * owner requests answer 503 `unavailable` (not 401) without drawing from the
 * failed-authentication budget; each failed fetch is counted, and each failure streak is
 * logged once. jose keeps a fetched key set for 10 minutes, so the test moves the clock
 * (`Date` only) past that to make the service fetch again.
 */

const METRICS_TOKEN = 'metrics-secret-for-tests-0123456789';
const CACHE_AGE_MS = 11 * 60_000;
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-idp-'));
let mode: 'serve' | 'fail' | 'garbage' = 'serve';
let fetches = 0;
let idp: http.Server;
let server: TestServer;
let api: Client;

// The identity provider: serves the JWKS file the test server's helper writes into `dir`.
beforeAll(async () => {
  idp = http.createServer((_req, res) => {
    fetches++;
    if (mode === 'fail') res.writeHead(503).end('maintenance');
    else if (mode === 'garbage') res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys": "none"}');
    else res.writeHead(200, { 'content-type': 'application/json' }).end(fs.readFileSync(path.join(dir, 'jwks.json')));
  });
  await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve));
  const jwksUrl = `http://127.0.0.1:${(idp.address() as AddressInfo).port}/.well-known/jwks.json`;
  vi.useFakeTimers({ toFake: ['Date'], now: Date.now() });
  server = await startTestServer({ dir, env: { OWNER_JWKS_FILE: '', OWNER_JWKS_URL: jwksUrl, METRICS_TOKEN, AUTH_FAILURES_PER_MINUTE: '2' } });
  api = client(server.url);
});
afterAll(async () => {
  vi.useRealTimers();
  await server.close();
  await new Promise((resolve) => idp.close(resolve));
});

const warnings = () => server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'identity provider key set unavailable');
const recoveries = () => server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'identity provider key set fetched again');
async function metric(name: string): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name} `));
  return Number(line?.split(' ')[1]);
}
/** Ages jose's cached key set past its 10 minutes, so the next owner request fetches it. */
const ageKeySet = () => vi.setSystemTime(Date.now() + CACHE_AGE_MS);

describe('OWNER_JWKS_URL reachable', () => {
  it('fetched the key set at start and verifies owner sessions with it', async () => {
    expect(fetches).toBe(1);
    expect((await api.get('/v1/account', { token: await server.ownerToken('idp-owner') })).status).toBe(200);
    expect(server.service.identityProvider()).toEqual({ provider: 'jwks-url', ok: true });
    expect(await metric('dfc_identity_provider_up')).toBe(1);
    expect(await metric('dfc_owner_jwks_fetch_failures_total')).toBe(0);
  });
});

/** Moves the clock past the 5 s a failed fetch holds the next one back (the 503's Retry-After). */
const passHold = () => vi.setSystemTime(Date.now() + 5_000);

describe('OWNER_JWKS_URL failing', () => {
  let fetchesBefore = 0;
  it('answers 503 unavailable to valid owner sessions, with Retry-After, not 401', async () => {
    mode = 'fail';
    ageKeySet();
    fetchesBefore = fetches;
    const owner = await server.ownerToken('idp-owner');
    // More requests than the failed-authentication budget (2 a minute) allows failures.
    for (let i = 0; i < 5; i++) {
      const res = await api.get('/v1/devices', { token: owner });
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('unavailable');
      expect(res.headers.get('retry-after')).toBe('5');
    }
  });

  it('logs the failure streak once, at warn, naming the variable and not the token', () => {
    expect(warnings()).toHaveLength(1);
    expect(warnings()[0]).toMatchObject({ level: 'warn', variable: 'OWNER_JWKS_URL', url: expect.stringContaining('/.well-known/jwks.json') });
    expect(warnings()[0].error).toContain('200 OK');
  });

  it('puts the request error code on the request lines', () => {
    const lines = server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request' && line.status === 503);
    expect(lines.length).toBeGreaterThanOrEqual(5);
    for (const line of lines) expect(line).toMatchObject({ errorCode: 'unavailable', principalKind: null });
  });

  it('asks the failing provider once for five requests within the Retry-After, counts that failure and reports the provider down', async () => {
    expect(fetches - fetchesBefore).toBe(1);
    expect(await metric('dfc_owner_jwks_fetch_failures_total')).toBe(1);
    expect(await metric('dfc_identity_provider_up')).toBe(0);
    expect(server.service.identityProvider()).toMatchObject({ provider: 'jwks-url', ok: false, failures: 1, failingSince: expect.any(Number) });
  });

  it('asks it again once the Retry-After has passed', async () => {
    passHold();
    const owner = await server.ownerToken('idp-owner');
    const before = fetches;
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(503);
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(503);
    expect(fetches - before).toBe(1);
    expect(server.service.identityProvider()).toMatchObject({ ok: false, failures: 2 });
    expect(warnings()).toHaveLength(1);
  });

  it('treats a key set that is not a JWKS as unavailable too', async () => {
    mode = 'garbage';
    passHold();
    const res = await api.get('/v1/devices', { token: await server.ownerToken('idp-owner') });
    expect(res.status).toBe(503);
    expect(warnings()).toHaveLength(1);
  });
});

describe('OWNER_JWKS_URL mended', () => {
  it('verifies owner sessions again, logs the recovery once, and took nothing from the failure budget', async () => {
    mode = 'serve';
    passHold();
    const owner = await server.ownerToken('idp-owner');
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(200);
    expect(recoveries()).toHaveLength(1);
    expect(recoveries()[0]).toMatchObject({ level: 'info', failures: 3 });
    expect(server.service.identityProvider()).toEqual({ provider: 'jwks-url', ok: true });
    expect(await metric('dfc_identity_provider_up')).toBe(1);
    // The budget is whole: a bad token is 401, not 429, twice.
    expect((await api.get('/v1/devices', { token: await server.foreignToken('idp-owner') })).status).toBe(401);
    expect((await api.get('/v1/devices', { token: await server.foreignToken('idp-owner') })).status).toBe(401);
  });

  it('logs a new streak once more when the key set fails again', async () => {
    mode = 'fail';
    ageKeySet();
    const owner = await server.ownerToken('idp-owner');
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(503);
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(503);
    expect(warnings()).toHaveLength(2);
  });

  it('answers 503 unavailable to an owner trading the session for the OAuth sign-in cookie', async () => {
    const res = await api.post('/oauth/session', { token: await server.ownerToken('idp-owner') });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('unavailable');
  });

  it('never logs an owner token, nor the subject itself', () => {
    const text = server.logs.join('\n');
    expect(text).not.toContain('eyJ');
    expect(text).not.toContain('"idp-owner"');
    const ownerLine = server.logs.map((line) => JSON.parse(line)).find((line) => line.msg === 'request' && line.principalKind === 'owner');
    expect(ownerLine.principalId).toBe(createHash('sha256').update('idp-owner').digest('hex').slice(0, 16));
  });
});

describe('OWNER_JWKS_URL failing while its cached key set is still fresh', () => {
  it('logs one streak for tokens naming an unknown key, and no recovery for sessions the cache verifies', async () => {
    mode = 'serve';
    ageKeySet();
    const owner = await server.ownerToken('idp-owner');
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(200);
    const [streaks, mended] = [warnings().length, recoveries().length];
    // Past jose's 30 s cooldown, within its 10-minute cache: a token whose `kid` the set lacks
    // makes jose fetch again, and that fetch fails; sessions signed with a cached key still verify.
    vi.setSystemTime(Date.now() + 60_000);
    mode = 'fail';
    const { privateKey } = await generateKeyPair('ES256');
    const stranger = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: 'not-in-the-key-set' })
      .setSubject('stranger')
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setExpirationTime('1h')
      .sign(privateKey);
    const before = fetches;
    for (let i = 0; i < 3; i++) {
      expect((await api.get('/v1/devices', { token: stranger })).status).toBe(503);
      expect((await api.get('/v1/devices', { token: owner })).status).toBe(200);
    }
    // The first stranger's fetch failed; within the Retry-After the others were answered from the cache alone.
    expect(fetches - before).toBe(1);
    expect(warnings()).toHaveLength(streaks + 1);
    expect(recoveries()).toHaveLength(mended);
    expect(server.service.identityProvider()).toMatchObject({ ok: false, failures: 1 });
  });
});

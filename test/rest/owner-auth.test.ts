import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWTPayload } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Owner sessions are verified against a JWKS (docs/reference/rules.md "Credentials"). This file publishes its own
 * JWKS so it can sign every kind of bad token: wrong issuer or audience, expired, not yet
 * valid, symmetric, unsigned, or signed by a key the server does not trust.
 */
const ISSUER = 'https://idp.owner-auth.test.invalid';
const AUDIENCE = 'dfc-owner-auth';
const KID = 'owner-auth-key';

let server: TestServer;
let api: Client;
let trusted: CryptoKey;
let untrusted: CryptoKey;

beforeAll(async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-owner-auth-'));
  const pair = await generateKeyPair('ES256');
  trusted = pair.privateKey;
  untrusted = (await generateKeyPair('ES256')).privateKey;
  const jwksFile = path.join(dir, 'owner-jwks.json');
  fs.writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), kid: KID, alg: 'ES256', use: 'sig' }] }));
  server = await startTestServer({
    dir,
    env: { OWNER_JWKS_FILE: jwksFile, OWNER_ISSUER: ISSUER, OWNER_AUDIENCE: AUDIENCE, OWNER_WORKSPACE_CLAIM: 'org' },
  });
  api = client(server.url);
});
afterAll(() => server.close());

interface SignOptions {
  key?: CryptoKey | Uint8Array;
  alg?: string;
  issuer?: string | null;
  audience?: string | null;
  /** Seconds since the epoch; null leaves the claim out. */
  exp?: number | null;
  nbf?: number;
  sub?: string | null;
  claims?: JWTPayload;
}

const nowSeconds = () => Math.floor(Date.now() / 1000);

function sign(options: SignOptions = {}): Promise<string> {
  const jwt = new SignJWT({ org: 'acme', ...options.claims }).setProtectedHeader({ alg: options.alg ?? 'ES256', kid: KID }).setIssuedAt();
  if (options.sub !== null) jwt.setSubject(options.sub ?? 'alice');
  if (options.issuer !== null) jwt.setIssuer(options.issuer ?? ISSUER);
  if (options.audience !== null) jwt.setAudience(options.audience ?? AUDIENCE);
  if (options.exp !== null) jwt.setExpirationTime(options.exp ?? nowSeconds() + 3600);
  if (options.nbf !== undefined) jwt.setNotBefore(options.nbf);
  return jwt.sign(options.key ?? trusted);
}

const b64 = (value: unknown) => Buffer.from(JSON.stringify(value)).toString('base64url');

async function expect401(token: string) {
  const res = await api.get('/v1/account', { token });
  expect(res.status).toBe(401);
  expect(res.body.error.code).toBe('unauthorized');
  expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
}

describe('owner session verification', () => {
  it('accepts a valid ES256 session and creates the workspace on first use', async () => {
    const res = await api.get('/v1/account', { token: await sign({ claims: { org: 'first-use' } }) });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ workspaceKey: 'first-use', subject: 'alice' });
  });

  it('puts two owners with the same workspace claim in one workspace, and another claim in another', async () => {
    const alice = await api.get('/v1/account', { token: await sign({ sub: 'alice', claims: { org: 'shared' } }) });
    const bob = await api.get('/v1/account', { token: await sign({ sub: 'bob', claims: { org: 'shared' } }) });
    const carol = await api.get('/v1/account', { token: await sign({ sub: 'carol', claims: { org: 'elsewhere' } }) });
    expect(bob.body.data.workspaceId).toBe(alice.body.data.workspaceId);
    expect(bob.body.data.subject).toBe('bob');
    expect(carol.body.data.workspaceId).not.toBe(alice.body.data.workspaceId);
    expect(carol.body.data.routingId).not.toBe(alice.body.data.routingId);
  });

  it('creates one workspace when its first requests arrive together', async () => {
    const token = await sign({ claims: { org: 'stampede' } });
    const results = await Promise.all(Array.from({ length: 8 }, () => api.get('/v1/account', { token })));
    expect(results.every((r) => r.status === 200)).toBe(true);
    expect(new Set(results.map((r) => r.body.data.workspaceId)).size).toBe(1);
  });

  it('answers 401 with WWW-Authenticate when there is no Authorization header', async () => {
    const res = await api.get('/v1/account');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer/);
  });

  it('answers 401 to a non-Bearer Authorization scheme', async () => {
    const res = await api.get('/v1/account', { headers: { authorization: `Basic ${Buffer.from('alice:pw').toString('base64')}` } });
    expect(res.status).toBe(401);
  });

  it('answers 401 to an empty bearer and to a bearer that is not a token', async () => {
    expect((await api.get('/v1/account', { headers: { authorization: 'Bearer' } })).status).toBe(401);
    await expect401('not-a-token');
    await expect401('a.b.c');
  });

  it('answers 401 to a session from the wrong issuer', async () => {
    await expect401(await sign({ issuer: 'https://evil.test.invalid' }));
  });

  it('answers 401 to a session for the wrong audience', async () => {
    await expect401(await sign({ audience: 'some-other-api' }));
  });

  it('answers 401 to an expired session', async () => {
    await expect401(await sign({ exp: nowSeconds() - 60 }));
  });

  it('answers 401 to a session without exp', async () => {
    await expect401(await sign({ exp: null }));
  });

  it('answers 401 to a session whose nbf is in the future', async () => {
    await expect401(await sign({ nbf: nowSeconds() + 600 }));
  });

  it('accepts a session whose nbf has passed', async () => {
    const res = await api.get('/v1/account', { token: await sign({ nbf: nowSeconds() - 10 }) });
    expect(res.status).toBe(200);
  });

  it('answers 401 to a session signed by a key the JWKS does not hold (forged, same kid)', async () => {
    await expect401(await sign({ key: untrusted }));
  });

  it('answers 401 to an HS256 session (symmetric algorithms are not accepted)', async () => {
    await expect401(await sign({ alg: 'HS256', key: new TextEncoder().encode('x'.repeat(32)) }));
  });

  it('answers 401 to an unsigned (alg "none") session', async () => {
    const unsigned = `${b64({ alg: 'none', kid: KID })}.${b64({ sub: 'alice', org: 'acme', iss: ISSUER, aud: AUDIENCE, exp: nowSeconds() + 3600 })}.`;
    await expect401(unsigned);
  });

  it('answers 401 to a valid session whose payload was altered', async () => {
    const [header, , signature] = (await sign()).split('.');
    const altered = b64({ sub: 'mallory', org: 'acme', iss: ISSUER, aud: AUDIENCE, exp: nowSeconds() + 3600 });
    await expect401(`${header}.${altered}.${signature}`);
  });

  it('answers 401 to a session without sub', async () => {
    await expect401(await sign({ sub: null }));
  });

  it('answers 401 to a session without the workspace claim', async () => {
    await expect401(await sign({ claims: { org: undefined } }));
  });

  it('answers 401 to a session whose workspace claim is not a string', async () => {
    await expect401(await sign({ claims: { org: 42 } }));
  });
});

describe('development identity provider is off when a JWKS is configured', () => {
  it('reports authConfigured true in health', async () => {
    const res = await api.get('/healthz');
    expect(res.body.authConfigured).toBe(true);
  });

  it('creates no development key in the data folder', () => {
    expect(fs.readdirSync(server.dir).filter((f) => f.startsWith('development-identity-provider'))).toEqual([]);
  });
});

import { randomBytes } from 'node:crypto';
import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../helpers/clock.js';
import { pkce, registerClient, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The rate limits (docs/reference/rules.md "Errors and limits") on the OAuth endpoints: failed client authentication and invalid grants at
 * /oauth/token, failed client authentication at /oauth/revoke and failed sign-ins draw from
 * the per-address failure bucket the bearer-token endpoints use — the same limiter instance —
 * and dynamic registrations from a per-address registration bucket. Over the limit: HTTP 429
 * with Retry-After, in RFC 6749 JSON (`temporarily_unavailable`) on the protocol endpoints.
 *
 * Every case sends from its own loopback address (127.0.0.0/8 is all loopback on Linux; the
 * client binds the source address), so the server really sees different client addresses.
 */

const FAILURES_PER_MINUTE = 3;
const REGISTRATIONS_PER_HOUR = 2;
const CALLBACK = 'http://127.0.0.1:9/callback';
const clock = manualClock();
let owner: string;
let publicClient: string;
let confidential: { id: string; secret: string };
const agents: Agent[] = [];
let nextAddress = 10;

const server = useOAuthTestServer({
  clock,
  env: { AUTH_FAILURES_PER_MINUTE: String(FAILURES_PER_MINUTE), OAUTH_REGISTRATIONS_PER_HOUR: String(REGISTRATIONS_PER_HOUR) },
});

beforeAll(async () => {
  owner = await server.ownerToken('oauth-limits-owner', { expiresIn: '10h' });
  publicClient = (await registerClient(server.issuer, owner, { name: 'Public', redirectUris: [CALLBACK], public: true })).oauth.clientId;
  const secret = await registerClient(server.issuer, owner, { name: 'Confidential', redirectUris: [CALLBACK], public: false });
  confidential = { id: secret.oauth.clientId, secret: secret.token! };
});
afterAll(async () => {
  await Promise.all(agents.map((agent) => agent.close()));
});

interface Answer {
  status: number;
  headers: Headers;
  body: any; // OAuth JSON, the error envelope or HTML: each test asserts the shape it expects
}

/** A client at a loopback address of its own, e.g. 127.0.0.10. */
function clientAt(): {
  address: string;
  post(path: string, init: { form?: Record<string, string>; json?: unknown; headers?: Record<string, string> }): Promise<Answer>;
} {
  const address = `127.0.0.${nextAddress++}`;
  const agent = new Agent({ localAddress: address });
  agents.push(agent);
  return {
    address,
    async post(path, init) {
      const headers: Record<string, string> = { ...init.headers };
      let body: string | undefined;
      if (init.form) {
        headers['content-type'] = 'application/x-www-form-urlencoded';
        body = new URLSearchParams(init.form).toString();
      } else if (init.json !== undefined) {
        headers['content-type'] = 'application/json';
        body = JSON.stringify(init.json);
      }
      const res = await undiciFetch(`${server.url}${path}`, { method: 'POST', headers, body, dispatcher: agent, redirect: 'manual' });
      const text = await res.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // HTML or empty: left as text.
      }
      return { status: res.status, headers: res.headers as unknown as Headers, body: parsed };
    },
  };
}

const basic = (id: string, secret: string) => `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}`;
const wrongSecret = { grant_type: 'refresh_token', refresh_token: 'dfc_refresh_x' };
const randomCode = () => ({
  grant_type: 'authorization_code',
  code: `dfc_code_${randomBytes(32).toString('base64url')}`,
  redirect_uri: CALLBACK,
  code_verifier: pkce().verifier,
});

function expectLimited(res: Answer): void {
  expect(res.status).toBe(429);
  expect(res.body).toEqual({ error: 'temporarily_unavailable', error_description: expect.stringContaining('retry after') });
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(res.headers.get('cache-control')).toContain('no-store');
}

describe('POST /oauth/token failure limit (docs/reference/rules.md "Errors and limits")', () => {
  it(`answers 429 temporarily_unavailable with Retry-After after ${FAILURES_PER_MINUTE} failed client authentications from one address, and only then`, async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      const res = await a.post('/oauth/token', { form: wrongSecret, headers: { authorization: basic(confidential.id, 'wrong') } });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
    }
    expectLimited(await a.post('/oauth/token', { form: wrongSecret, headers: { authorization: basic(confidential.id, 'wrong') } }));
    // The right secret with a grant that is still a guess (an unknown code) fails, so it is refused too.
    expectLimited(await a.post('/oauth/token', { form: wrongSecret, headers: { authorization: basic(confidential.id, confidential.secret) } }));
  });

  it('serves a client that authenticates and asks for something it may, even from an address over its budget', async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE; i++)
      await a.post('/oauth/token', { form: wrongSecret, headers: { authorization: basic(confidential.id, 'wrong') } });
    expectLimited(await a.post('/oauth/token', { form: wrongSecret, headers: { authorization: basic(confidential.id, 'wrong') } }));
    // Revoking is what an authenticated client may always do: 200, not 429.
    const revoked = await a.post('/oauth/revoke', {
      form: { token: 'dfc_refresh_unknown' },
      headers: { authorization: basic(confidential.id, confidential.secret) },
    });
    expect(revoked.status).toBe(200);
  });

  it('counts wrong secrets on the client_credentials grant, and still serves the right secret from that address', async () => {
    const a = clientAt();
    const form = { grant_type: 'client_credentials', client_id: confidential.id, client_secret: 'wrong' };
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      const res = await a.post('/oauth/token', { form });
      expect(res.status).toBe(401);
      expect(res.body.error).toBe('invalid_client');
    }
    expectLimited(await a.post('/oauth/token', { form }));
    const served = await a.post('/oauth/token', { form: { ...form, client_secret: confidential.secret } });
    expect(served.status).toBe(200);
    expect(served.body.access_token).toMatch(/^dfc_oauth_/);
  });

  it('keeps the bucket per address: another address is unaffected while the first is refused', async () => {
    const a = clientAt();
    const b = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } });
    expectLimited(await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } }));
    const other = await b.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } });
    expect(other.status).toBe(400);
    expect(other.body.error).toBe('invalid_grant');
  });

  it('counts invalid_grant (unknown codes and refresh tokens) as failures, and refills with time (one per 60/N s)', async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      const res = await a.post('/oauth/token', { form: { grant_type: 'refresh_token', refresh_token: `dfc_refresh_${i}`, client_id: publicClient } });
      expect(res.body.error).toBe('invalid_grant');
    }
    const limited = await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } });
    expectLimited(limited);
    clock.advance(Number(limited.headers.get('retry-after')) * 1000);
    expect((await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } })).body.error).toBe('invalid_grant');
    expectLimited(await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } }));
  });

  it('does not count requests that fail for other reasons (a bad grant_type or scope is not a guess)', async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE + 2; i++) {
      const res = await a.post('/oauth/token', { form: { grant_type: 'password', client_id: publicClient } });
      expect(res.body.error).toBe('unsupported_grant_type');
    }
  });
});

describe('POST /oauth/revoke failure limit (docs/reference/rules.md "Errors and limits")', () => {
  it('counts failed client authentication, not the 200 answered for unknown tokens', async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE + 2; i++) {
      expect((await a.post('/oauth/revoke', { form: { token: `dfc_refresh_${i}`, client_id: publicClient } })).status).toBe(200);
    }
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      expect((await a.post('/oauth/revoke', { form: { token: 'x' }, headers: { authorization: basic(confidential.id, 'wrong') } })).status).toBe(401);
    }
    expectLimited(await a.post('/oauth/revoke', { form: { token: 'x' }, headers: { authorization: basic(confidential.id, 'wrong') } }));
    // Failures are throttled, not clients: a public client's revocation, which cannot fail, is still served.
    expect((await a.post('/oauth/revoke', { form: { token: 'x', client_id: publicClient } })).status).toBe(200);
  });
});

describe('one failure bucket per address across the service (docs/reference/rules.md "Errors and limits")', () => {
  it('failures at /oauth/token and with bearer tokens on /v1 drain the same bucket (one limiter instance)', async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE - 1; i++) await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } });
    const rest = await a.post('/v1/agent-connections', { json: {}, headers: { authorization: 'Bearer dfc_agent_unknown' } });
    expect(rest.status).toBe(401);
    // The bucket is empty now, whichever endpoint spent it.
    expectLimited(await a.post('/oauth/token', { form: { ...randomCode(), client_id: publicClient } }));
    const restLimited = await a.post('/v1/agent-connections', { json: {}, headers: { authorization: 'Bearer dfc_agent_unknown' } });
    expect(restLimited.status).toBe(429);
    expect(restLimited.body.error.code).toBe('rate_limited');
  });

  it('failed sign-ins at /oauth/session count too: further failures are 429 rate_limited in the envelope and on the sign-in form, a valid owner still signs in', async () => {
    const a = clientAt();
    for (let i = 0; i < FAILURES_PER_MINUTE; i++) {
      expect((await a.post('/oauth/session', { headers: { authorization: `Bearer ${await server.foreignToken('mallory')}` } })).status).toBe(401);
    }
    const limited = await a.post('/oauth/session', { headers: { authorization: `Bearer ${await server.foreignToken('mallory')}` } });
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    const form = await a.post('/oauth/sign-in', { form: { token: await server.foreignToken('mallory') }, headers: { origin: server.issuer } });
    expect(form.status).toBe(429);
    expect(form.headers.get('retry-after')).toBeTruthy();
    expect(form.body).toContain('Too many failed sign-ins');
    // A valid owner from the same address signs in all the same: the bucket throttles failures.
    expect((await a.post('/oauth/session', { headers: { authorization: `Bearer ${owner}` } })).status).toBe(204);
    expect((await a.post('/oauth/sign-in', { form: { token: owner }, headers: { origin: server.issuer } })).status).toBe(200);
    // Another address signs in.
    expect((await clientAt().post('/oauth/session', { headers: { authorization: `Bearer ${owner}` } })).status).toBe(204);
  });
});

describe('POST /oauth/register limit (docs/reference/rules.md "Errors and limits")', () => {
  const registration = { redirect_uris: [CALLBACK], client_name: 'Flood', token_endpoint_auth_method: 'none' };

  it(`answers 429 temporarily_unavailable after ${REGISTRATIONS_PER_HOUR} registrations from one address, refilling at that rate per hour`, async () => {
    const a = clientAt();
    for (let i = 0; i < REGISTRATIONS_PER_HOUR; i++) expect((await a.post('/oauth/register', { json: registration })).status).toBe(201);
    const clients = await server.service.db.get<{ n: number }>("SELECT count(*) AS n FROM oauth_clients WHERE source = 'dynamic'");
    const limited = await a.post('/oauth/register', { json: registration });
    expectLimited(limited);
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(60);
    // Refused: nothing stored.
    expect(await server.service.db.get<{ n: number }>("SELECT count(*) AS n FROM oauth_clients WHERE source = 'dynamic'")).toEqual(clients);
    // Another address registers.
    expect((await clientAt().post('/oauth/register', { json: registration })).status).toBe(201);
    clock.advance(Number(limited.headers.get('retry-after')) * 1000);
    expect((await a.post('/oauth/register', { json: registration })).status).toBe(201);
    expectLimited(await a.post('/oauth/register', { json: registration }));
  });
});

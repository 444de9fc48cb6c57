import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isFetchableAddress } from '../../src/http/ssrf.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, type AttachedDevice } from '../helpers/fixtures.js';
import { authorizationUrl, decide, ownerCookie, pkce, registerClient, tokenRequest, useOAuthTestServer } from '../helpers/oauth.js';

const clock = manualClock();
let owner: string;
let cookie: string;
let lamp: AttachedDevice;
const CALLBACK = 'http://127.0.0.1:9/callback';
// OAuth answers are plain JSON objects; the tests, not the types, check their shape.
const json = async (res: Response): Promise<any> => res.json();

// Failed authentications are expected here (revoked tokens must answer 401): keep the
// per-address limit of docs/reference/rules.md "Errors and limits" out of the way.
const server = useOAuthTestServer({ clock, env: { AUTH_FAILURES_PER_MINUTE: '1000' } });
const api = server.api;

beforeAll(async () => {
  // Sessions never outlive the owner JWT; the manual clock runs ahead of real time below.
  owner = await server.ownerToken('oauth-owner', { expiresIn: '10h' });
  cookie = await ownerCookie(server.issuer, owner);
  lamp = await attachDevice(api, owner, { name: 'Desk lamp' });
});

/** A public pre-registered client, its principal granted the lamp's functions. */
async function grantedClient(options: { access?: 'read' | 'act'; public?: boolean } = {}) {
  const registered = await registerClient(server.issuer, owner, {
    name: 'Test MCP client',
    redirectUris: [CALLBACK],
    public: options.public ?? true,
    access: options.access ?? 'act',
  });
  const granted = await api.post('/v1/grants', {
    token: owner,
    body: { principal: registered.principal, deviceId: lamp.id, capabilities: ['get_state', 'set_power'] },
  });
  expect(granted.status).toBe(201);
  return registered;
}

/** Runs authorize + consent + token for a client; returns the token answer and the code. */
async function fullFlow(clientId: string, options: { scope?: string; secret?: string; decision?: 'approve' | 'approve-read' } = {}) {
  const { verifier, challenge } = pkce();
  const back = await decide(
    authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: challenge, scope: options.scope ?? 'read act' }),
    cookie,
    options.decision,
  );
  const code = back.searchParams.get('code')!;
  const form: Record<string, string> = { grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: verifier, resource: server.resource };
  const answer = options.secret
    ? await tokenRequest(server.issuer, form, { id: clientId, secret: options.secret })
    : await tokenRequest(server.issuer, { ...form, client_id: clientId });
  return { answer, code, verifier };
}

describe('GET /.well-known/oauth-authorization-server', () => {
  it('serves RFC 8414 metadata whose issuer is the URL it is served under', async () => {
    const res = await fetch(`${server.issuer}/.well-known/oauth-authorization-server`);
    expect(res.status).toBe(200);
    const metadata = await json(res);
    expect(metadata).toMatchObject({
      issuer: server.issuer,
      authorization_endpoint: `${server.issuer}/oauth/authorize`,
      token_endpoint: `${server.issuer}/oauth/token`,
      revocation_endpoint: `${server.issuer}/oauth/revoke`,
      registration_endpoint: `${server.issuer}/oauth/register`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
      code_challenge_methods_supported: ['S256'],
      scopes_supported: ['read', 'act'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
    });
    expect(metadata.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(['none', 'client_secret_basic', 'client_secret_post']));
  });
});

describe('POST /v1/oauth-clients', () => {
  it('registers a confidential client: an agent connection with an oauth object, principal oauth:<client id>, the secret once as token', async () => {
    const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: 'Server app', redirectUris: ['https://app.example/cb'] } });
    expect(res.status).toBe(201);
    const data = res.body.data;
    expect(data).toMatchObject({
      purpose: 'agent',
      access: 'read',
      revoked: false,
      principal: `oauth:${data.oauth.clientId}`,
      oauth: { applicationId: expect.any(String), clientId: expect.any(String), redirectUris: ['https://app.example/cb'], public: false },
      token: expect.stringMatching(/^dfc_secret_[A-Za-z0-9_-]{43}$/),
    });
    const listed = await api.get('/v1/oauth-clients', { token: owner });
    const entry = listed.body.data.find((c: { id: string }) => c.id === data.id);
    expect(entry.oauth).toEqual(data.oauth);
    expect(entry.token).toBeUndefined();
  });

  it('registers a public client without a secret, with an owner-chosen principal and ceiling', async () => {
    const res = await api.post('/v1/oauth-clients', {
      token: owner,
      body: { name: 'CLI', redirectUris: [CALLBACK], public: true, principal: 'oauth:cli', access: 'act' },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ principal: 'oauth:cli', access: 'act', oauth: { public: true } });
    expect(res.body.data.token).toBeNull();
  });

  it.each([
    ['plain http on a public host', 'http://app.example/cb'],
    ['a fragment', 'https://app.example/cb#x'],
    ['a relative URI', '/cb'],
  ])('rejects a redirect URI with %s (400 validation_failed)', async (_label, uri) => {
    const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: 'bad', redirectUris: [uri] } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
  });

  it('refuses an agent token (403) and no credential (401)', async () => {
    const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'a' } });
    expect((await api.get('/v1/oauth-clients', { token: agent.body.data.token })).status).toBe(403);
    expect((await api.get('/v1/oauth-clients')).status).toBe(401);
  });
});

describe('GET /oauth/authorize', () => {
  it('sends an owner without a session to the sign-in page, keeping the request', async () => {
    const registered = await grantedClient();
    const url = authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge });
    const res = await fetch(url, { redirect: 'manual' });
    expect(res.status).toBe(302);
    const location = new URL(res.headers.get('location')!, server.issuer);
    expect(location.pathname).toBe('/oauth/sign-in');
    expect(location.searchParams.get('next')).toBe(new URL(url).pathname + new URL(url).search);
  });

  it('shows the signed-in owner a consent page naming client, redirect host, principal, scopes and granted devices; never framed', async () => {
    const registered = await grantedClient();
    const url = authorizationUrl(server.issuer, {
      client_id: registered.oauth.clientId,
      redirect_uri: CALLBACK,
      code_challenge: pkce().challenge,
      scope: 'read act',
    });
    const res = await fetch(url, { headers: { cookie } });
    expect(res.status).toBe(200);
    const html = await res.text();
    expect(html).toContain('Test MCP client');
    expect(html).toContain('127.0.0.1:9');
    expect(html).toContain(registered.principal);
    expect(html).toContain('act: also call control functions');
    expect(html).toContain('Desk lamp');
    expect(html).toContain('set_power');
    expect(html).toContain('id="loopback-warning"');
    expect(res.headers.get('content-security-policy')).toContain("frame-ancestors 'none'");
    expect(res.headers.get('x-frame-options')).toBe('DENY');
    expect(res.headers.get('cache-control')).toBe('no-store');
  });

  it('answers an unknown client or an unregistered redirect URI with a page, never a redirect', async () => {
    const registered = await grantedClient();
    const unknown = await fetch(authorizationUrl(server.issuer, { client_id: 'nope', redirect_uri: CALLBACK, code_challenge: pkce().challenge }), {
      headers: { cookie },
      redirect: 'manual',
    });
    expect(unknown.status).toBe(400);
    expect(unknown.headers.get('location')).toBeNull();
    const wrongRedirect = await fetch(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: 'http://127.0.0.1:9/other', code_challenge: pkce().challenge }),
      {
        headers: { cookie },
        redirect: 'manual',
      },
    );
    expect(wrongRedirect.status).toBe(400);
    expect(wrongRedirect.headers.get('location')).toBeNull();
    expect(await wrongRedirect.text()).toContain('redirect_uri');
  });

  it.each([
    ['no code_challenge', { code_challenge: undefined }, 'invalid_request'],
    ['code_challenge_method plain', { code_challenge_method: 'plain' }, 'invalid_request'],
    ['no resource', { resource: undefined }, 'invalid_target'],
    ['another resource', { resource: 'https://elsewhere.example/mcp' }, 'invalid_target'],
    ['an unknown scope', { scope: 'admin' }, 'invalid_scope'],
    ['response_type token', { response_type: 'token' }, 'unsupported_response_type'],
  ])('redirects %s back as error=%s with state and iss', async (_label, params, error) => {
    const registered = await grantedClient();
    const url = authorizationUrl(server.issuer, {
      client_id: registered.oauth.clientId,
      redirect_uri: CALLBACK,
      code_challenge: pkce().challenge,
      state: 's-1',
      ...params,
    });
    const res = await fetch(url, { headers: { cookie }, redirect: 'manual' });
    expect(res.status).toBe(302);
    const back = new URL(res.headers.get('location')!);
    expect(back.origin + back.pathname).toBe(CALLBACK);
    expect(back.searchParams.get('error')).toBe(error);
    expect(back.searchParams.get('state')).toBe('s-1');
    expect(back.searchParams.get('iss')).toBe(server.issuer);
  });

  it('does not show a client registered in another workspace', async () => {
    const registered = await grantedClient();
    const otherCookie = await ownerCookie(server.issuer, await server.ownerToken('someone-else', { expiresIn: '10h' }));
    const res = await fetch(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge }),
      { headers: { cookie: otherCookie } },
    );
    expect(res.status).toBe(400);
  });
});

describe('POST /oauth/authorize (the consent decision)', () => {
  it('approve: back to the redirect URI with code, state and iss', async () => {
    const registered = await grantedClient();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge, state: 'xyz' }),
      cookie,
    );
    expect(back.origin + back.pathname).toBe(CALLBACK);
    expect(back.searchParams.get('code')).toMatch(/^dfc_code_/);
    expect(back.searchParams.get('state')).toBe('xyz');
    expect(back.searchParams.get('iss')).toBe(server.issuer);
  });

  it('deny: back with error=access_denied, state and iss', async () => {
    const registered = await grantedClient();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge, state: 'no' }),
      cookie,
      'deny',
    );
    expect(back.searchParams.get('error')).toBe('access_denied');
    expect(back.searchParams.get('state')).toBe('no');
    expect(back.searchParams.get('iss')).toBe(server.issuer);
    expect(back.searchParams.get('code')).toBeNull();
  });

  it('refuses a decision without the session-bound CSRF token, or from another origin (403)', async () => {
    const registered = await grantedClient();
    const url = authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge });
    const fields = Object.fromEntries(new URL(url).searchParams);
    const post = (headers: Record<string, string>, extra: Record<string, string>) =>
      fetch(`${server.issuer}/oauth/authorize`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers },
        body: new URLSearchParams({ ...fields, decision: 'approve', ...extra }).toString(),
        redirect: 'manual',
      });
    expect((await post({ cookie }, { csrf: 'forged' })).status).toBe(403);
    const otherCookie = await ownerCookie(server.issuer, owner);
    const page = await (await fetch(url, { headers: { cookie: otherCookie } })).text();
    const csrfOfOtherSession = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
    expect((await post({ cookie }, { csrf: csrfOfOtherSession })).status).toBe(403);
    expect((await post({ cookie: otherCookie, origin: 'https://evil.example' }, { csrf: csrfOfOtherSession })).status).toBe(403);
    expect((await post({}, { csrf: csrfOfOtherSession })).status).toBe(403);
  });
});

describe('POST /oauth/token (authorization_code)', () => {
  it('exchanges a code for a Bearer access token (1 h), a refresh token and the scope, with Cache-Control: no-store', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    expect(answer.status).toBe(200);
    expect(answer.headers.get('cache-control')).toBe('no-store');
    expect(answer.body).toEqual({
      access_token: expect.stringMatching(/^dfc_oauth_[A-Za-z0-9_-]{43}$/),
      token_type: 'Bearer',
      expires_in: 3600,
      refresh_token: expect.stringMatching(/^dfc_refresh_/),
      scope: 'read act',
    });
  });

  it('gives a token that acts as the client principal on shared endpoints: the granted lamp and its functions', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const devices = await api.get('/v1/devices', { token: answer.body.access_token });
    expect(devices.status).toBe(200);
    expect(devices.body.data.map((d: { id: string }) => d.id)).toEqual([lamp.id]);
    const functions = await api.get('/v1/functions', { token: answer.body.access_token });
    expect(functions.body.data.map((f: { capability: string }) => f.capability)).toEqual(['get_state', 'set_power']);
  });

  it('authenticates a confidential client by its secret (Basic), and refuses a wrong or missing one (401 invalid_client)', async () => {
    const registered = await grantedClient({ public: false });
    const ok = await fullFlow(registered.oauth.clientId, { secret: registered.token! });
    expect(ok.answer.status).toBe(200);
    const wrong = await fullFlow(registered.oauth.clientId, { secret: 'dfc_secret_wrong' });
    expect(wrong.answer.status).toBe(401);
    expect(wrong.answer.body.error).toBe('invalid_client');
    const missing = await fullFlow(registered.oauth.clientId);
    expect(missing.answer.status).toBe(401);
  });

  it('refuses a wrong code_verifier (invalid_grant)', async () => {
    const registered = await grantedClient();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge }),
      cookie,
    );
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: registered.oauth.clientId,
      code: back.searchParams.get('code')!,
      redirect_uri: CALLBACK,
      code_verifier: pkce().verifier,
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('invalid_grant');
  });

  it('refuses a redirect_uri other than the authorization request had (invalid_grant)', async () => {
    const registered = await registerClient(server.issuer, owner, { name: 'two', redirectUris: [CALLBACK, 'http://127.0.0.1:9/other'], public: true });
    const { verifier, challenge } = pkce();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: challenge }),
      cookie,
    );
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: registered.oauth.clientId,
      code: back.searchParams.get('code')!,
      redirect_uri: 'http://127.0.0.1:9/other',
      code_verifier: verifier,
    });
    expect(answer.body.error).toBe('invalid_grant');
  });

  it('refuses a replayed code and revokes the tokens it issued', async () => {
    const registered = await grantedClient();
    const { answer, code, verifier } = await fullFlow(registered.oauth.clientId);
    expect((await api.get('/v1/devices', { token: answer.body.access_token })).status).toBe(200);
    const replay = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: registered.oauth.clientId,
      code,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
    });
    expect(replay.status).toBe(400);
    expect(replay.body.error).toBe('invalid_grant');
    expect((await api.get('/v1/devices', { token: answer.body.access_token })).status).toBe(401);
    const refresh = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: answer.body.refresh_token,
    });
    expect(refresh.body.error).toBe('invalid_grant');
  });

  it('refuses a code older than 60 seconds', async () => {
    const registered = await grantedClient();
    const { verifier, challenge } = pkce();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: challenge }),
      cookie,
    );
    clock.advance(60_001);
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: registered.oauth.clientId,
      code: back.searchParams.get('code')!,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
    });
    expect(answer.body.error).toBe('invalid_grant');
    expect(answer.body.error_description).toContain('expired');
  });

  it('refuses a resource other than the code was issued for (invalid_target)', async () => {
    const registered = await grantedClient();
    const { verifier, challenge } = pkce();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: challenge }),
      cookie,
    );
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: registered.oauth.clientId,
      code: back.searchParams.get('code')!,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
      resource: 'https://elsewhere.example/mcp',
    });
    expect(answer.body.error).toBe('invalid_target');
  });

  it('refuses another client presenting the code, an unknown grant type and a repeated parameter', async () => {
    const registered = await grantedClient();
    const other = await grantedClient();
    const { verifier, challenge } = pkce();
    const back = await decide(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: challenge }),
      cookie,
    );
    const code = back.searchParams.get('code')!;
    const stolen = await tokenRequest(server.issuer, {
      grant_type: 'authorization_code',
      client_id: other.oauth.clientId,
      code,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
    });
    expect(stolen.body.error).toBe('invalid_grant');
    const password = await tokenRequest(server.issuer, { grant_type: 'password', client_id: registered.oauth.clientId });
    expect(password.body.error).toBe('unsupported_grant_type');
    const repeated = await fetch(`${server.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: `grant_type=authorization_code&client_id=${registered.oauth.clientId}&code=${code}&code=${code}`,
    });
    expect(repeated.status).toBe(400);
    expect((await json(repeated)).error).toBe('invalid_request');
  });
});

describe('scopes are a ceiling only', () => {
  it('a read token lists read functions only and is refused control (403 insufficient_access)', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId, { scope: 'read' });
    expect(answer.body.scope).toBe('read');
    const functions = await api.get('/v1/functions', { token: answer.body.access_token });
    expect(functions.body.data.map((f: { capability: string }) => f.capability)).toEqual(['get_state']);
  });

  it('the owner may approve read only when act is asked', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId, { scope: 'read act', decision: 'approve-read' });
    expect(answer.body.scope).toBe('read');
  });

  it("a client's read ceiling caps a token that asked for act", async () => {
    const registered = await grantedClient({ access: 'read' });
    const { answer } = await fullFlow(registered.oauth.clientId, { scope: 'read act' });
    expect(answer.body.scope).toBe('read');
  });

  it('act implies read; a token never reaches a device its principal is not granted', async () => {
    const registered = await grantedClient();
    const other = await attachDevice(api, owner, { name: 'Heater' });
    const { answer } = await fullFlow(registered.oauth.clientId, { scope: 'act' });
    expect(answer.body.scope).toBe('read act');
    const devices = await api.get('/v1/devices', { token: answer.body.access_token });
    expect(devices.body.data.map((d: { id: string }) => d.id)).not.toContain(other.id);
    const grants = await api.get(`/v1/grants?principal=${encodeURIComponent(registered.principal)}`, { token: owner });
    expect(grants.body.data.map((g: { capability: string }) => g.capability).sort()).toEqual(['get_state', 'set_power']);
  });

  it('accepts an OAuth token on POST /v1/devices/{deviceId}/actions as its device tool does: one operation, one credential rule', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const res = await api.post(`/v1/devices/${lamp.id}/actions`, {
      token: answer.body.access_token,
      body: { capability: 'set_power', arguments: { on: true } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ capability: 'set_power', status: 'queued', principal: registered.principal });
    const unreadable = await api.request('POST', `/v1/devices/${lamp.id}/actions`, { token: answer.body.access_token, raw: '{' });
    expect(unreadable.status).toBe(400);
  });
});

describe('POST /oauth/token (refresh_token)', () => {
  it('rotates: a new pair each time, the old access token keeps working until it expires', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const refreshed = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: answer.body.refresh_token,
    });
    expect(refreshed.status).toBe(200);
    expect(refreshed.headers.get('cache-control')).toBe('no-store');
    expect(refreshed.body.refresh_token).not.toBe(answer.body.refresh_token);
    expect(refreshed.body.scope).toBe('read act');
    expect((await api.get('/v1/devices', { token: refreshed.body.access_token })).status).toBe(200);
  });

  it('may narrow the scope, never widen it', async () => {
    const registered = await grantedClient();
    const wide = await fullFlow(registered.oauth.clientId);
    const narrowed = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: wide.answer.body.refresh_token,
      scope: 'read',
    });
    expect(narrowed.body.scope).toBe('read');
    const widened = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: narrowed.body.refresh_token,
      scope: 'read act',
    });
    expect(widened.body.error).toBe('invalid_scope');
  });

  it('detects reuse of a rotated refresh token and revokes the whole family', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const first = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: answer.body.refresh_token,
    });
    expect(first.status).toBe(200);
    const reuse = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: answer.body.refresh_token,
    });
    expect(reuse.status).toBe(400);
    expect(reuse.body.error).toBe('invalid_grant');
    expect((await api.get('/v1/devices', { token: first.body.access_token })).status).toBe(401);
    const next = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: first.body.refresh_token,
    });
    expect(next.body.error).toBe('invalid_grant');
  });

  it('expires access tokens after one hour', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    clock.advance(3_600_000);
    expect((await api.get('/v1/devices', { token: answer.body.access_token })).status).toBe(401);
    const refreshed = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: answer.body.refresh_token,
    });
    expect(refreshed.status).toBe(200);
  });
});

describe('revocation', () => {
  it('POST /oauth/revoke (RFC 7009): an access token answers 401 from the next request; unknown tokens answer 200', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const revoke = (token: string) =>
      fetch(`${server.issuer}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token, client_id: registered.oauth.clientId }).toString(),
      });
    expect((await revoke(answer.body.access_token)).status).toBe(200);
    expect((await api.get('/v1/devices', { token: answer.body.access_token })).status).toBe(401);
    expect((await revoke('dfc_oauth_unknown')).status).toBe(200);
  });

  it('revoking a refresh token revokes its access tokens too', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    await fetch(`${server.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: answer.body.refresh_token, token_type_hint: 'refresh_token', client_id: registered.oauth.clientId }).toString(),
    });
    expect((await api.get('/v1/devices', { token: answer.body.access_token })).status).toBe(401);
  });

  it('POST /v1/oauth-clients/{clientId}/revoke revokes the client and every token it holds; grants stay', async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const res = await api.post(`/v1/oauth-clients/${registered.oauth.clientId}/revoke`, { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ revoked: true, oauth: { clientId: registered.oauth.clientId } });
    expect((await api.get('/v1/devices', { token: answer.body.access_token })).status).toBe(401);
    const refresh = await tokenRequest(server.issuer, {
      grant_type: 'refresh_token',
      client_id: registered.oauth.clientId,
      refresh_token: answer.body.refresh_token,
    });
    expect(refresh.body.error).toBe('invalid_grant');
    const page = await fetch(
      authorizationUrl(server.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge }),
      { headers: { cookie } },
    );
    expect(page.status).toBe(400);
    const grants = await api.get(`/v1/grants?principal=${encodeURIComponent(registered.principal)}`, { token: owner });
    expect(grants.body.data.length).toBe(2);
    expect((await api.post('/v1/oauth-clients/not-a-client/revoke', { token: owner })).status).toBe(404);
  });
});

describe('workspace isolation', () => {
  it("a token of one workspace sees nothing of another's devices or actions", async () => {
    const registered = await grantedClient();
    const { answer } = await fullFlow(registered.oauth.clientId);
    const otherOwner = await server.ownerToken('oauth-other-owner', { expiresIn: '10h' });
    const otherLamp = await attachDevice(api, otherOwner, { name: 'Other lamp' });
    const agent = await api.post('/v1/agent-connections', { token: otherOwner, body: { name: 'a', access: 'act', principal: registered.principal } });
    await api.post('/v1/grants', { token: otherOwner, body: { principal: registered.principal, deviceId: otherLamp.id, capabilities: ['get_state'] } });
    const action = await api.post(`/v1/devices/${otherLamp.id}/actions`, { token: agent.body.data.token, body: { capability: 'get_state', arguments: {} } });
    expect(action.status).toBe(201);
    const devices = await api.get('/v1/devices', { token: answer.body.access_token });
    expect(devices.body.data.map((d: { id: string }) => d.id)).toEqual([lamp.id]);
    expect((await api.get(`/v1/actions/${action.body.data.id}`, { token: answer.body.access_token })).status).toBe(404);
    const listed = await api.get('/v1/oauth-clients', { token: otherOwner });
    expect(listed.body.data).toEqual([]);
  });
});

describe('POST /oauth/register (dynamic client registration, deprecated)', () => {
  it('registers a public client; its first approval creates its connection (principal oauth:<client id>) in the workspace', async () => {
    const res = await fetch(`${server.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({
        client_name: 'Old client',
        redirect_uris: [CALLBACK],
        token_endpoint_auth_method: 'none',
        grant_types: ['authorization_code', 'refresh_token'],
      }),
    });
    expect(res.status).toBe(201);
    const registered = await json(res);
    expect(registered).toMatchObject({ client_id: expect.any(String), redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' });
    expect(registered.client_secret).toBeUndefined();
    const { answer } = await fullFlow(registered.client_id, { scope: 'read' });
    expect(answer.status).toBe(200);
    const listed = await api.get('/v1/oauth-clients', { token: owner });
    const entry = listed.body.data.find((c: { oauth: { clientId: string } }) => c.oauth.clientId === registered.client_id);
    expect(entry).toMatchObject({ principal: `oauth:${registered.client_id}`, access: 'read', oauth: { public: true } });
  });

  it('gives a confidential client its secret; refuses bad redirect URIs (invalid_redirect_uri)', async () => {
    const res = await fetch(`${server.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: ['https://app.example/cb'] }),
    });
    expect(res.status).toBe(201);
    expect((await json(res)).client_secret).toMatch(/^dfc_secret_/);
    const bad = await fetch(`${server.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ redirect_uris: ['http://evil.example/cb'] }),
    });
    expect(bad.status).toBe(400);
    expect((await json(bad)).error).toBe('invalid_redirect_uri');
  });
});

describe('Client ID Metadata Documents', () => {
  it('refuses non-public addresses (SSRF guard), IPv4-mapped included', () => {
    for (const address of [
      '127.0.0.1',
      '10.1.2.3',
      '172.16.0.1',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
      '::ffff:10.0.0.1',
    ]) {
      expect(isFetchableAddress(address), address).toBe(false);
    }
    for (const address of ['93.184.216.34', '2606:2800:220:1:248:1893:25c8:1946', '8.8.8.8']) expect(isFetchableAddress(address), address).toBe(true);
    expect(isFetchableAddress('127.0.0.1', true)).toBe(true);
  });

  it('refuses an https client_id whose host resolves to loopback (without the test-only flag)', async () => {
    const res = await fetch(
      authorizationUrl(server.issuer, { client_id: 'https://localhost:1/client.json', redirect_uri: CALLBACK, code_challenge: pkce().challenge }),
      { headers: { cookie } },
    );
    expect(res.status).toBe(400);
    // One message for every failed fetch (docs/reference/rules.md "Errors and limits"): the reason is in the log only.
    expect(await res.text()).toContain('metadata document could not be fetched.');
  });

  it('treats an http client_id as unknown when OAUTH_CIMD_ALLOW_LOOPBACK is off', async () => {
    const res = await fetch(
      authorizationUrl(server.issuer, { client_id: 'http://127.0.0.1:9/client.json', redirect_uri: CALLBACK, code_challenge: pkce().challenge }),
      { headers: { cookie } },
    );
    expect(res.status).toBe(400);
  });
});

describe('Client ID Metadata Documents (OAUTH_CIMD_ALLOW_LOOPBACK=true, test only)', () => {
  let documents: http.Server;
  let docBase: string;
  let cimdCookie: string;
  const served: Record<string, { body: string; type?: string }> = {};
  let fetches = 0;

  const cimdServer = useOAuthTestServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: 'true' } });

  beforeAll(async () => {
    cimdCookie = await ownerCookie(cimdServer.issuer, await cimdServer.ownerToken('cimd-owner'));
    documents = http.createServer((req, res) => {
      fetches += 1;
      const doc = served[req.url ?? ''];
      if (!doc) return res.writeHead(404).end();
      res.writeHead(200, { 'content-type': doc.type ?? 'application/json' }).end(doc.body);
    });
    await new Promise<void>((resolve) => documents.listen(0, '127.0.0.1', resolve));
    docBase = `http://127.0.0.1:${(documents.address() as { port: number }).port}`;
  });
  afterAll(async () => {
    await new Promise((resolve) => documents.close(resolve));
  });

  const serve = (path: string, doc: Record<string, unknown> | string, type?: string) => {
    served[path] = { body: typeof doc === 'string' ? doc : JSON.stringify(doc), ...(type ? { type } : {}) };
    return `${docBase}${path}`;
  };

  it('fetches the document, shows its client_name, issues a code and tokens, and caches it', async () => {
    const clientId = serve('/good.json', {
      client_id: `${docBase}/good.json`,
      client_name: 'Metadata Client',
      redirect_uris: [CALLBACK],
      token_endpoint_auth_method: 'none',
    });
    const { verifier, challenge } = pkce();
    const url = authorizationUrl(cimdServer.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: challenge, scope: 'read' });
    const page = await fetch(url, { headers: { cookie: cimdCookie } });
    expect(page.status).toBe(200);
    expect(await page.text()).toContain('Metadata Client');
    const before = fetches;
    const back = await decide(url, cimdCookie);
    expect(fetches).toBe(before);
    const answer = await tokenRequest(cimdServer.issuer, {
      grant_type: 'authorization_code',
      client_id: clientId,
      code: back.searchParams.get('code')!,
      redirect_uri: CALLBACK,
      code_verifier: verifier,
    });
    expect(answer.status).toBe(200);
  });

  it.each([
    ['names another client_id', { client_id: 'https://other.example/c.json', redirect_uris: [CALLBACK] }, undefined, 'another client_id'],
    ['holds a client_secret', { client_id: 'SELF', redirect_uris: [CALLBACK], client_secret: 'x' }, undefined, 'client_secret'],
    // Failed fetches all answer one message (the log has the reason); invalid documents say what is wrong.
    ['is larger than 5 KiB', { client_id: 'SELF', redirect_uris: [CALLBACK], client_name: 'x'.repeat(6000) }, undefined, 'could not be fetched.'],
    ['is not JSON', 'not json', 'text/html', 'could not be fetched.'],
  ])('refuses a document that %s', async (_label, doc, type, message) => {
    const path = `/bad-${Math.random().toString(36).slice(2)}.json`;
    const body = typeof doc === 'string' ? doc : JSON.stringify(doc).replace('"SELF"', JSON.stringify(`${docBase}${path}`));
    const clientId = serve(path, body, type);
    const res = await fetch(authorizationUrl(cimdServer.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge }), {
      headers: { cookie: cimdCookie },
      redirect: 'manual',
    });
    expect(res.status).toBe(400);
    expect(await res.text()).toContain(message);
  });
});

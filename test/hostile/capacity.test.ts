import { describe, expect, it } from 'vitest';
import { client, type ApiResponse } from '../helpers/api.js';
import { attachDevice } from '../helpers/fixtures.js';
import { authorizationUrl, decide, ownerCookie, pkce, useOAuthTestServer } from '../helpers/oauth.js';
import { useTestServer } from '../helpers/server.js';

// docs/reference/rules.md "Errors and limits": owners are bounded too. Each cap is 3 here.
const CAP = 3;

const server = useTestServer({
  env: {
    WORKSPACE_MAX_AGENT_CONNECTIONS: String(CAP),
    WORKSPACE_MAX_SETUP_TOKENS: String(CAP),
    WORKSPACE_MAX_GRANTS: String(CAP),
    WORKSPACE_MAX_OAUTH_CLIENTS: String(CAP),
    WORKSPACE_MAX_ENROLLMENT_CODES: String(CAP),
  },
});
const http = server.api;

function expectCapacityExceeded(res: ApiResponse) {
  expect(res.status, JSON.stringify(res.body)).toBe(429);
  expect(res.body.error.code).toBe('capacity_exceeded');
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
}

const creates: Record<string, (owner: string, i: number) => Promise<ApiResponse>> = {
  'agent connections': (owner, i) => http.post('/v1/agent-connections', { token: owner, body: { name: `a${i}`, access: 'read' } }),
  'setup tokens': (owner, i) => http.post('/v1/device-setup-tokens', { token: owner, body: { name: `s${i}` } }),
  'enrollment codes': (owner) => http.post('/v1/enrollments', { token: owner }),
  'OAuth clients': (owner, i) =>
    http.post('/v1/oauth-clients', { token: owner, body: { name: `c${i}`, redirectUris: ['http://127.0.0.1:9/callback'], public: true } }),
};

describe('per-workspace caps', () => {
  it.each(Object.keys(creates))('%s: the cap is 429 capacity_exceeded with Retry-After; another workspace is unaffected', async (kind) => {
    const create = creates[kind]!;
    const owner = await server.ownerToken(`cap-${kind}`);
    for (let i = 0; i < CAP; i++) expect((await create(owner, i)).status).toBe(201);
    expectCapacityExceeded(await create(owner, CAP));
    expect((await create(await server.ownerToken(`other-${kind}`), 0)).status).toBe(201);
  });

  it.each(Object.keys(creates))('%s: concurrent creates at the cap never overshoot', async (kind) => {
    const create = creates[kind]!;
    const owner = await server.ownerToken(`race-${kind}`);
    const answers = await Promise.all(Array.from({ length: 12 }, (_, i) => create(owner, i)));
    expect(answers.filter((res) => res.status === 201)).toHaveLength(CAP);
    for (const res of answers.filter((r) => r.status !== 201)) expectCapacityExceeded(res);
  });

  it('revoking an agent connection frees its place', async () => {
    const owner = await server.ownerToken('cap-revoke');
    const made = [];
    for (let i = 0; i < CAP; i++) made.push((await creates['agent connections']!(owner, i)).body.data.id as string);
    expectCapacityExceeded(await creates['agent connections']!(owner, CAP));
    expect((await http.post(`/v1/agent-connections/${made[0]}/revoke`, { token: owner })).status).toBe(200);
    expect((await creates['agent connections']!(owner, CAP)).status).toBe(201);
  });

  it('grants: counts live grants, a replaced grant takes no new place, and nothing is written past the cap', async () => {
    // Setup tokens are capped at 3 too: attaching three devices uses them all.
    const owner = await server.ownerToken('cap-grants');
    const lamp = await attachDevice(http, owner);
    const grant = (principal: string, capabilities: string[]) =>
      http.post('/v1/grants', { token: owner, body: { principal, deviceId: lamp.id, capabilities } });
    expect((await grant('p1', ['get_state', 'set_power'])).status).toBe(201);
    expect((await grant('p1', ['get_state'])).status).toBe(201); // replaces, takes no place
    expect((await grant('p2', ['get_state'])).status).toBe(201);
    expectCapacityExceeded(await grant('p3', ['get_state']));
    expectCapacityExceeded(await grant('p2', ['set_power']));
    const listed = await http.get('/v1/grants', { token: owner });
    expect(listed.body.data).toHaveLength(CAP);
  });
});

describe('a client approved on the consent page counts against the caps', () => {
  const CALLBACK = 'http://127.0.0.1:9/callback';

  const oauthServer = useOAuthTestServer({ env: { WORKSPACE_MAX_AGENT_CONNECTIONS: '1' } });

  it('refuses the approval that would pass the agent-connection cap with a 429 page, creating nothing', async () => {
    const api = client(oauthServer.url);
    const owner = await oauthServer.ownerToken('full-consent-owner');
    expect((await api.post('/v1/agent-connections', { token: owner, body: { name: 'the one', access: 'read' } })).status).toBe(201);
    const registered = await fetch(`${oauthServer.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'One too many', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' }),
    });
    const clientId = ((await registered.json()) as { client_id: string }).client_id;
    const { challenge } = pkce();
    const url = authorizationUrl(oauthServer.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: challenge, scope: 'read' });
    await expect(decide(url, await ownerCookie(oauthServer.issuer, owner))).rejects.toThrow(/decision answered 429/);
    expect((await api.get('/v1/oauth-clients', { token: owner })).body.data).toEqual([]);
    expect((await api.get('/v1/agent-connections', { token: owner })).body.data).toHaveLength(1);
  });
});

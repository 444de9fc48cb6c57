import { beforeAll, describe, expect, it } from 'vitest';
import { allOperations, operations } from '../../src/domain/registry.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp } from '../helpers/mcp-client.js';
import { accessTokenFor, registerClient, useOAuthTestServer } from '../helpers/oauth.js';
import { rawHead, rawRequest, UPGRADE_HEADERS } from '../helpers/raw-http.js';
import { issueTicket, openSocket, wsUrl } from '../helpers/ws.js';

/**
 * Rules of the API contract, each pinned in the contract's own words where the service once
 * answered otherwise; where the service keeps a different answer on purpose, the test names the
 * decision record in docs/decisions/ that says why.
 */

const CALLBACK = 'http://127.0.0.1:9/callback';
let owner: string;
let lamp: AttachedDevice;

const server = useOAuthTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('contract-owner');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
}, 60_000);

/** An OAuth access token (scope `read act`) of a public client granted the lamp's functions. */
async function grantedOAuthToken(): Promise<{ token: string; principal: string }> {
  const registered = await registerClient(server.issuer, owner, { name: 'contract client', redirectUris: [CALLBACK], public: true, access: 'act' });
  await grant(api, owner, registered.principal, lamp.id, ['get_state', 'set_power']);
  return { token: await accessTokenFor(server, owner, registered.oauth.clientId, CALLBACK), principal: registered.principal };
}

describe('REST and MCP share one set of domain operations: a REST route and its MCP tool cannot drift apart', () => {
  it('an OAuth access token requests an action on POST /v1/devices/{deviceId}/actions, as it does through the device tool', async () => {
    const oauth = await grantedOAuthToken();
    const res = await api.post(`/v1/devices/${lamp.id}/actions`, { token: oauth.token, body: { capability: 'set_power', arguments: { on: true } } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ deviceId: lamp.id, capability: 'set_power', status: 'queued', principal: oauth.principal });
  });

  it('an OAuth access token requests one action on several devices on POST /v1/broadcasts, as it does through the broadcast tool', async () => {
    const oauth = await grantedOAuthToken();
    const body = { deviceIds: [lamp.id], capability: 'set_power', arguments: { on: false } };
    const rest = await api.post('/v1/broadcasts', { token: oauth.token, body: { ...body, idempotencyKey: crypto.randomUUID() } });
    const mcp = await rawMcp(server.url, {
      token: oauth.token,
      method: 'tools/call',
      name: 'broadcast',
      params: { name: 'broadcast', arguments: { ...body, idempotencyKey: crypto.randomUUID() } },
    });
    expect(rest.status, JSON.stringify(rest.body)).toBe(200);
    expect(mcp.status, mcp.text).toBe(200);
    const outcome = (data: { results: { deviceId: string; ok: boolean }[] }) => data.results.map(({ deviceId, ok }) => ({ deviceId, ok }));
    expect(outcome(rest.body.data)).toEqual([{ deviceId: lamp.id, ok: true }]);
    expect(outcome(mcp.json.result.structuredContent)).toEqual(outcome(rest.body.data));
  });

  it('declares one OAuth rule for both surfaces of every operation served on both', () => {
    // Device tools run actions.request; every other tool is an operation's fixed `mcp` tool.
    const onBoth = allOperations.filter((op) => op.rest.length > 0 && (op.mcp !== undefined || op === operations.requestAction));
    expect(onBoth.length).toBeGreaterThan(5);
    const drifting = onBoth.filter((op) => (op.oauth?.includes('rest') ?? false) !== (op.oauth?.includes('mcp') ?? false)).map((op) => op.name);
    expect(drifting).toEqual([]);
  });
});

describe('NewConnection: the token is returned once only, and is required', () => {
  it('gives a public OAuth client, which has no secret, a token of null (docs/decisions/0001-public-oauth-client-token.md)', async () => {
    const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: 'pub', redirectUris: ['https://example.com/cb'], public: true } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toHaveProperty('token', null);
    expect(res.body.data.tokenPrefix).toBe('');
  });

  it('gives a confidential OAuth client its client secret as the token', async () => {
    const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: 'conf', redirectUris: ['https://example.com/cb'] } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.token).toMatch(/^dfc_secret_/);
    expect(res.body.data.token.startsWith(res.body.data.tokenPrefix)).toBe(true);
  });
});

describe('Error envelope: all non-2xx HTTP responses except MCP 400/406/415', () => {
  it('answers an unknown MCP method with the protocol’s own 404 JSON-RPC error, -32601 (docs/decisions/0002-mcp-method-not-found.md)', async () => {
    const agent = await createAgent(api, owner);
    const res = await rawMcp(server.url, { token: agent.token, method: 'no/such' });
    expect(res.status).toBe(404);
    expect(res.json).toMatchObject({ jsonrpc: '2.0', id: 1, error: { code: -32601 } });
  });

  it('answers any other unknown path with the envelope', async () => {
    const res = await api.get('/no/such');
    expect(res.status).toBe(404);
    expect(res.body).toEqual({ error: expect.objectContaining({ code: 'not_found', message: expect.any(String) }) });
  });

  it.each(['/oauth/sign-in', '/oauth/authorize', '/oauth/sign-out'])(
    'answers a body over 16 KiB on the browser page %s with a page a person can read (docs/decisions/0004-oauth-answers-in-their-own-formats.md)',
    async (path) => {
      const res = await fetch(`${server.url}${path}`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: `a=${'x'.repeat(20_000)}`,
      });
      expect(res.status).toBe(413);
      expect(res.headers.get('content-type')).toMatch(/^text\/html/);
    },
  );

  it('answers /oauth/token in the RFC 6749 error shape (docs/decisions/0004-oauth-answers-in-their-own-formats.md)', async () => {
    const res = await fetch(`${server.url}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'grant_type=authorization_code&code=nope',
    });
    expect(res.status).toBe(401);
    const body = (await res.json()) as Record<string, unknown>;
    expect(body.error).toBe('invalid_client');
    expect(Object.keys(body).filter((key) => key !== 'error' && key !== 'error_description')).toEqual([]);
  });
});

describe('OAuth: 401 answers carry WWW-Authenticate: Bearer resource_metadata="…"', () => {
  const metadata = () => `${server.issuer}/.well-known/oauth-protected-resource`;

  it('on REST, for an unknown bearer token', async () => {
    const res = await api.get('/v1/devices', { token: 'dfc_agent_unknown' });
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Bearer error="invalid_token", resource_metadata="${metadata()}"`);
  });

  it('on REST, for a request with no credential', async () => {
    const res = await api.get('/v1/devices');
    expect(res.status).toBe(401);
    expect(res.headers.get('www-authenticate')).toBe(`Bearer resource_metadata="${metadata()}"`);
  });

  it('on REST, a 403 for a control function over a read ceiling names the scope that allows it (insufficient_scope)', async () => {
    const reader = await createAgent(api, owner, { access: 'read' });
    await grant(api, owner, reader.principal, lamp.id, ['set_power']);
    const res = await api.post(`/v1/devices/${lamp.id}/actions`, { token: reader.token, body: { capability: 'set_power', arguments: { on: true } } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_access');
    expect(res.headers.get('www-authenticate')).toBe(`Bearer error="insufficient_scope", scope="act", resource_metadata="${metadata()}"`);
  });
});

describe('POST /v1/devices/{deviceId}/actions: body { capability, arguments, ttlSeconds?, idempotencyKey? }', () => {
  it('refuses a request without arguments with 400 and an issue at arguments', async () => {
    const agent = await createAgent(api, owner);
    await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    const res = await api.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'get_state' } });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([expect.objectContaining({ path: 'arguments' })]);
  });
});

describe('request body size: 16 KiB on all HTTP requests (413), a device manifest 64 KiB (docs/decisions/0003-manifest-body-limit.md)', () => {
  /** A gateway manifest of `children` children with two small functions each. */
  function gatewayManifest(children: number) {
    const fn = (name: string, kind: 'read' | 'control') => ({
      name,
      kind,
      description: `${name} of this child`,
      arguments: { type: 'object', properties: { on: { type: 'boolean' } }, additionalProperties: false },
    });
    return {
      capabilities: [],
      children: Array.from({ length: children }, (_, i) => ({
        key: `child-${i}`,
        name: `Child ${i}`,
        kind: 'device',
        capabilities: [fn('get_state', 'read'), fn('set_power', 'control')],
      })),
    };
  }

  it('accepts a manifest at its documented limits: 64 children with two functions each, over 16 KiB', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: null });
    const manifest = gatewayManifest(64);
    expect(Buffer.byteLength(JSON.stringify(manifest))).toBeGreaterThan(16 * 1024);
    const res = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: manifest });
    expect(res.status, JSON.stringify(res.body).slice(0, 500)).toBe(200);
    expect(res.body.data.children).toHaveLength(64);
  });

  it('refuses a manifest of more than 256 functions in all with 400 and an issue at children', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: null });
    const small = (name: string) => ({ name, kind: 'read', arguments: { type: 'object' } });
    const manifest = {
      capabilities: [small('hub_state')],
      children: Array.from({ length: 64 }, (_, i) => ({
        key: `c${i}`,
        name: `C${i}`,
        kind: 'device',
        capabilities: ['a', 'b', 'c', 'd'].map(small),
      })),
    };
    const res = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: manifest });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([expect.objectContaining({ path: 'children', message: expect.stringContaining('at most 256 functions') })]);
    manifest.capabilities = [];
    expect((await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: manifest })).status).toBe(200);
  });

  it('answers 413 payload_too_large to a manifest of 64 KiB + 1', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: null });
    const base = JSON.stringify(gatewayManifest(1));
    const body = `${base.slice(0, -1)}${' '.repeat(64 * 1024 + 1 - base.length)}}`;
    const res = await fetch(`${server.url}/v1/device/${hub.id}/manifest`, {
      method: 'POST',
      headers: { authorization: `Bearer ${hub.token}`, 'content-type': 'application/json' },
      body,
    });
    expect(res.status).toBe(413);
    expect(((await res.json()) as { error: { code: string } }).error.code).toBe('payload_too_large');
  });

  it('keeps 16 KiB on every other request: an action of 16 KiB + 1 is 413', async () => {
    const agent = await createAgent(api, owner);
    const res = await api.post(`/v1/devices/${lamp.id}/actions`, {
      token: agent.token,
      body: { capability: 'get_state', arguments: { pad: 'x'.repeat(16 * 1024) } },
    });
    expect(res.status).toBe(413);
  });
});

describe('request body size: 16 KiB, all HTTP requests (413) — the WebSocket upgrade too', () => {
  const port = () => Number(new URL(server.url).port);
  const upgrade = (deviceId: string, ticket: string, headers: string[], body = '') =>
    rawRequest(
      port(),
      rawHead(`GET /v1/device/${deviceId}/events?ticket=${ticket} HTTP/1.1`, [`Host: 127.0.0.1:${port()}`, ...UPGRADE_HEADERS, ...headers]) + body,
    );

  it('answers 413 to an upgrade carrying a 20,000-byte body, and the ticket stays unspent', async () => {
    const ticket = await issueTicket(api, lamp);
    const answer = await upgrade(lamp.id, ticket, ['Content-Length: 20000'], 'x'.repeat(20_000));
    expect(answer.status).toBe(413);
    expect(answer.text).toContain('"payload_too_large"');
    const opened = await openSocket(wsUrl(server.url, lamp.id, ticket));
    expect(opened.ok).toBe(true);
    if (opened.ok) opened.socket.ws.close();
  });

  it('answers 400 to an upgrade carrying a small body: an upgrade has none', async () => {
    const ticket = await issueTicket(api, lamp);
    const answer = await upgrade(lamp.id, ticket, ['Content-Length: 5'], 'hello');
    expect(answer.status).toBe(400);
    expect(answer.text).toContain('"invalid_request"');
  });
});

describe('GET /healthz: no credential; the Health object, unwrapped', () => {
  it('serves the one hosted shape, never the local handler’s { data } variant (docs/decisions/0005-one-health-object.md)', async () => {
    const res = await api.get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).not.toHaveProperty('data');
    expect(res.body).toMatchObject({ service: expect.any(String), protocolVersion: 1 });
    expect(typeof res.body.authConfigured).toBe('boolean');
    expect(typeof res.body.deviceControlsEnabled).toBe('boolean');
  });
});

describe('A credential used on an endpoint of the wrong kind: 403 when it is a valid credential of another kind', () => {
  it('tells an owner session on /mcp what it is and what /mcp wants', async () => {
    const res = await rawMcp(server.url, { token: owner, method: 'tools/list' });
    expect(res.status).toBe(403);
    expect(res.json.error.message).toBe('/mcp does not accept an owner session: it wants an agent token or an OAuth access token.');
  });

  it('tells an OAuth access token on an owner endpoint that the endpoint wants an owner session', async () => {
    const oauth = await grantedOAuthToken();
    const res = await api.get('/v1/grants', { token: oauth.token });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toBe('This endpoint does not accept an OAuth access token: it wants an owner session.');
  });

  it('tells an agent token on an owner endpoint that the endpoint wants an owner session', async () => {
    const agent = await createAgent(api, owner);
    const res = await api.get('/v1/grants', { token: agent.token });
    expect(res.status).toBe(403);
    expect(res.body.error.message).toBe('This endpoint does not accept an agent token: it wants an owner session.');
  });
});

describe('POST /v1/grants/revoke body { grantId } or { principal, deviceId, capability? }', () => {
  it('points the issues of a body holding both forms at its fields, never at the body', async () => {
    const [given] = await grant(api, owner, 'agent:both-forms', lamp.id, ['get_state']);
    const res = await api.post('/v1/grants/revoke', { token: owner, body: { grantId: given!.id, principal: 'agent:both-forms', deviceId: lamp.id } });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ path: 'grantId', message: 'unknown field' }]);
  });

  it('points the issue of an empty body at the missing field', async () => {
    const res = await api.post('/v1/grants/revoke', { token: owner, body: {} });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.length).toBeGreaterThan(0);
    for (const issue of res.body.error.issues) expect(issue.path).not.toBe('');
  });
});

describe('A principal is an owner-chosen string of 1 to 128 characters naming one agent identity', () => {
  it('is one principal whether its name arrives composed (NFC) or decomposed (NFD)', async () => {
    const composed = 'agent:caf\u00e9';
    const decomposed = 'agent:cafe\u0301';
    const agent = await createAgent(api, owner, { principal: decomposed });
    expect(agent.principal).toBe(composed);
    await grant(api, owner, composed, lamp.id, ['get_state']);
    const functions = await api.get('/v1/functions', { token: agent.token });
    expect(functions.body.data.map((f: { capability: string }) => f.capability)).toEqual(['get_state']);
    const listed = await api.get(`/v1/grants?principal=${encodeURIComponent(decomposed)}`, { token: owner });
    expect(listed.body.data).toHaveLength(1);
  });
});

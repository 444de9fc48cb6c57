import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client as Api } from '../helpers/api.js';
import { attachDevice, type AttachedDevice } from '../helpers/fixtures.js';
import { MODERN, simulateDevice, toolName, type SimulatedDevice } from '../helpers/mcp-client.js';
import { decide, MemoryOAuthProvider, ownerCookie, registerClient, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * End to end with the official MCP client SDK's OAuth provider (docs/agents/oauth.md): the
 * client meets a 401 on /mcp, discovers the protected resource and this authorization
 * server, registers (dynamically, or pre-registered), sends the owner to the consent page
 * (approved programmatically with an owner session cookie), trades the code with PKCE,
 * then calls tools; a control function steps the scope up from read to read act.
 */

const CALLBACK = 'http://127.0.0.1:9/callback';

let api: Api;
let owner: string;
let cookie: string;
let lamp: AttachedDevice;
let device: SimulatedDevice;

const server = useOAuthTestServer({ env: { AUTH_FAILURES_PER_MINUTE: '1000' } });

beforeAll(async () => {
  api = client(server.url);
  owner = await server.ownerToken('mcp-oauth-owner');
  cookie = await ownerCookie(server.issuer, owner);
  lamp = await attachDevice(api, owner, { name: 'Desk lamp' });
  device = simulateDevice(api, lamp, ({ capability, args }) => ({ ok: true, result: { capability, args } }));
});
afterAll(async () => {
  await device.stop();
});

async function connected(provider: MemoryOAuthProvider): Promise<{ mcp: Client; transport: StreamableHTTPClientTransport }> {
  const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
  const mcp = new Client({ name: 'e2e', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  await mcp.connect(transport);
  return { mcp, transport };
}

/** connect() until the SDK asks for a browser; the owner decides; finishAuth with the callback's parameters (iss checked). */
async function authorize(provider: MemoryOAuthProvider, decision: 'approve' | 'approve-read'): Promise<void> {
  const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
  const mcp = new Client({ name: 'e2e', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  await expect(mcp.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  const back = await decide(provider.authorizationUrls[0]!.toString(), cookie, decision);
  expect(back.searchParams.get('iss')).toBe(server.issuer);
  await transport.finishAuth(back.searchParams);
}

describe('MCP client OAuth flow end to end (dynamic registration)', () => {
  const provider = new MemoryOAuthProvider('E2E MCP client', CALLBACK);
  let principal: string;

  it('401 → discovery → registration → consent → token → tools/list and tools/call', async () => {
    await authorize(provider, 'approve-read');
    const authUrl = provider.authorizationUrls[0]!;
    expect(authUrl.origin + authUrl.pathname).toBe(`${server.issuer}/oauth/authorize`);
    expect(authUrl.searchParams.get('resource')).toBe(server.resource);
    expect(authUrl.searchParams.get('code_challenge_method')).toBe('S256');
    expect(provider.stored?.scope).toBe('read');
    expect(provider.stored?.access_token).toMatch(/^dfc_oauth_/);

    // The owner grants the client's principal the lamp (scopes never create grants).
    const listed = await api.get('/v1/oauth-clients', { token: owner });
    principal = listed.body.data.find((c: { oauth: { clientId: string } }) => c.oauth.clientId === provider.client!.client_id).principal;
    expect(principal).toBe(`oauth:${provider.client!.client_id}`);
    expect((await api.post('/v1/grants', { token: owner, body: { principal, deviceId: lamp.id, capabilities: ['get_state', 'set_power'] } })).status).toBe(201);

    const { mcp } = await connected(provider);
    const tools = (await mcp.listTools()).tools.map((t) => t.name);
    expect(tools).toContain(toolName('get_state', lamp));
    expect(tools).not.toContain(toolName('set_power', lamp));
    const result = await mcp.callTool({ name: toolName('get_state', lamp), arguments: {} });
    expect(result.isError).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ capability: 'get_state', status: 'succeeded', principal });
    await mcp.close();
  });

  it('steps up from read to read act on a control function (403 insufficient_scope → re-authorization)', async () => {
    const { mcp } = await connected(provider);
    // The SDK answers the 403 by re-authorizing with the union of scopes: a browser trip.
    await expect(mcp.callTool({ name: toolName('set_power', lamp), arguments: { on: true } })).rejects.toBeInstanceOf(UnauthorizedError);
    const stepUp = provider.authorizationUrls[0]!;
    expect(stepUp.searchParams.get('scope')?.split(' ').sort()).toEqual(['act', 'read']);
    const back = await decide(stepUp.toString(), cookie, 'approve');
    const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
    await transport.finishAuth(back.searchParams);
    expect(provider.stored?.scope).toBe('read act');

    const again = await connected(provider);
    expect((await again.mcp.listTools()).tools.map((t) => t.name)).toContain(toolName('set_power', lamp));
    const result = await again.mcp.callTool({ name: toolName('set_power', lamp), arguments: { on: true } });
    expect(result.structuredContent).toMatchObject({ capability: 'set_power', status: 'succeeded', arguments: { on: true } });
    await again.mcp.close();
  });

  it('refreshes: an expired or rejected access token is replaced through the refresh token, rotating it', async () => {
    const before = provider.stored!;
    // Make the stored access token useless; the SDK's 401 handling must refresh, not ask the owner.
    provider.stored = { ...before, access_token: 'dfc_oauth_expired' };
    const urls = provider.authorizationUrls.length;
    const { mcp } = await connected(provider);
    expect((await mcp.listTools()).tools.length).toBeGreaterThan(0);
    expect(provider.authorizationUrls.length).toBe(urls);
    expect(provider.stored!.access_token).not.toBe(before.access_token);
    expect(provider.stored!.refresh_token).not.toBe(before.refresh_token);
    await mcp.close();
  });

  it('revocation: after POST /oauth/revoke the token answers 401 on /mcp', async () => {
    const token = provider.stored!.access_token;
    const res = await fetch(`${server.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: provider.stored!.refresh_token!, client_id: provider.client!.client_id }).toString(),
    });
    expect(res.status).toBe(200);
    const mcpRes = await fetch(`${server.issuer}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    expect(mcpRes.status).toBe(401);
    expect(mcpRes.headers.get('www-authenticate')).toContain('resource_metadata=');
    // The client, refused, falls back to the browser: no silent way back in.
    const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
    const mcp = new Client({ name: 'e2e', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
    await expect(mcp.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  });
});

describe('MCP client OAuth flow end to end (pre-registered client, revoked by the owner)', () => {
  it('connects with the client from /v1/oauth-clients, then answers 401 once the owner revokes the client', async () => {
    const registered = await registerClient(server.issuer, owner, { name: 'Pre-registered', redirectUris: [CALLBACK], public: true, access: 'read' });
    await api.post('/v1/grants', { token: owner, body: { principal: registered.principal, deviceId: lamp.id, capabilities: ['get_state'] } });
    const provider = new MemoryOAuthProvider('E2E MCP client', CALLBACK, { client_id: registered.oauth.clientId, issuer: server.issuer });
    await authorize(provider, 'approve');
    // The read ceiling of the connection caps what the SDK asked for.
    expect(provider.stored?.scope).toBe('read');
    const { mcp } = await connected(provider);
    expect((await mcp.listTools()).tools.map((t) => t.name)).toContain(toolName('get_state', lamp));
    await mcp.close();

    expect((await api.post(`/v1/oauth-clients/${registered.oauth.clientId}/revoke`, { token: owner })).status).toBe(200);
    const res = await fetch(`${server.issuer}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${provider.stored!.access_token}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    });
    expect(res.status).toBe(401);
  });
});

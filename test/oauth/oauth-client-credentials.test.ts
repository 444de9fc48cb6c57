import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { Client, ClientCredentialsProvider, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client as Api } from '../helpers/api.js';
import { attachDevice, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, MODERN, simulateDevice, toolName, type SimulatedDevice } from '../helpers/mcp-client.js';
import { registerClient, tokenRequest, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The `client_credentials` grant (RFC 6749 §4.4; the MCP extension
 * io.modelcontextprotocol/oauth-client-credentials): a confidential client the owner registered
 * gets an access token with its own secret, no browser involved, and acts as its principal
 * under the ceiling and grants any OAuth client has.
 */

const CALLBACK = 'http://127.0.0.1:9/callback';
let api: Api;
let owner: string;
let lamp: AttachedDevice;
let device: SimulatedDevice;

// Wrong secrets are expected here; the failure limit has its own file (oauth-rate-limits).
const server = useOAuthTestServer({ env: { AUTH_FAILURES_PER_MINUTE: '1000' } });

beforeAll(async () => {
  api = client(server.url);
  owner = await server.ownerToken('client-credentials-owner', { expiresIn: '10h' });
  lamp = await attachDevice(api, owner, { name: 'Desk lamp' });
  device = simulateDevice(api, lamp, ({ capability, args }) => ({ ok: true, result: { capability, args } }));
});
afterAll(async () => {
  await device.stop();
});

/** A confidential server-to-server client (no redirect URI), its principal granted the lamp's functions. */
async function headlessClient(options: { access?: 'read' | 'act'; principal?: string } = {}) {
  const registered = await registerClient(server.issuer, owner, {
    name: 'Nightly job',
    public: false,
    access: options.access ?? 'act',
    ...(options.principal ? { principal: options.principal } : {}),
  });
  const granted = await api.post('/v1/grants', {
    token: owner,
    body: { principal: registered.principal, deviceId: lamp.id, capabilities: ['get_state', 'set_power'] },
  });
  expect(granted.status).toBe(201);
  return { ...registered, secret: registered.token! };
}

/** The status /mcp answers a bearer with, before any MCP is spoken: 401 for a dead token. */
const mcpStatus = async (accessToken: string) =>
  (
    await fetch(`${server.issuer}/mcp`, {
      method: 'POST',
      headers: { authorization: `Bearer ${accessToken}`, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: '{}',
    })
  ).status;

/** The tool names the official client lists with this bearer. */
async function listedTools(accessToken: string): Promise<string[]> {
  const mcp = await connect(server.issuer, accessToken, 'modern');
  try {
    return (await mcp.listTools()).tools.map((t) => t.name);
  } finally {
    await mcp.close();
  }
}

describe('POST /v1/oauth-clients for a confidential server-to-server client', () => {
  it('registers a confidential client without redirect URIs and shows its secret once', async () => {
    const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: 'Cron agent', public: false } });
    expect(res.status).toBe(201);
    expect(res.body.data.token).toMatch(/^dfc_/);
    expect(res.body.data.oauth).toMatchObject({ public: false, redirectUris: [] });
    const listed = await api.get('/v1/oauth-clients', { token: owner });
    const row = listed.body.data.find((c: { id: string }) => c.id === res.body.data.id);
    expect(row).toBeDefined();
    expect(JSON.stringify(row)).not.toContain(res.body.data.token);
  });

  it('still refuses a public client without redirect URIs, pointing at redirectUris', async () => {
    const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: 'CLI', public: true } });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual(expect.arrayContaining([expect.objectContaining({ path: 'redirectUris' })]));
  });
});

describe('GET /.well-known/oauth-authorization-server for client_credentials', () => {
  it('lists the grant and the secret-based client authentication methods', async () => {
    const metadata = (await (await fetch(`${server.issuer}/.well-known/oauth-authorization-server`)).json()) as Record<string, string[]>;
    expect(metadata.grant_types_supported).toContain('client_credentials');
    expect(metadata.token_endpoint_auth_methods_supported).toEqual(expect.arrayContaining(['client_secret_basic', 'client_secret_post']));
  });
});

describe('POST /oauth/token grant_type=client_credentials', () => {
  it('issues an access token, no refresh token, to client_secret_basic; the token is no-store and bound to /mcp', async () => {
    const headless = await headlessClient();
    const answer = await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, { id: headless.oauth.clientId, secret: headless.secret });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body).toEqual({ access_token: expect.stringMatching(/^dfc_oauth_/), token_type: 'Bearer', expires_in: 3600, scope: 'read act' });
    expect(answer.headers.get('cache-control')).toContain('no-store');
    expect(await listedTools(answer.body.access_token)).toContain(toolName('get_state', lamp));
  });

  it('issues an access token to client_secret_post, for the MCP resource named explicitly', async () => {
    const headless = await headlessClient();
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'client_credentials',
      client_id: headless.oauth.clientId,
      client_secret: headless.secret,
      resource: server.resource,
    });
    expect(answer.status, JSON.stringify(answer.body)).toBe(200);
    expect(answer.body.refresh_token).toBeUndefined();
  });

  it("defaults the scope to the client's ceiling and narrows it on request", async () => {
    const readOnly = await headlessClient({ access: 'read' });
    const asRead = await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, { id: readOnly.oauth.clientId, secret: readOnly.secret });
    expect(asRead.body.scope).toBe('read');
    const acting = await headlessClient({ access: 'act' });
    const narrowed = await tokenRequest(
      server.issuer,
      { grant_type: 'client_credentials', scope: 'read' },
      { id: acting.oauth.clientId, secret: acting.secret },
    );
    expect(narrowed.body.scope).toBe('read');
  });

  it('refuses a scope above the ceiling with invalid_scope, and an unknown scope too', async () => {
    const readOnly = await headlessClient({ access: 'read' });
    const basic = { id: readOnly.oauth.clientId, secret: readOnly.secret };
    const above = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'read act' }, basic);
    expect(above.status).toBe(400);
    expect(above.body.error).toBe('invalid_scope');
    const unknown = await tokenRequest(server.issuer, { grant_type: 'client_credentials', scope: 'admin' }, basic);
    expect(unknown.body.error).toBe('invalid_scope');
  });

  it('refuses any resource but the MCP endpoint with invalid_target', async () => {
    const headless = await headlessClient();
    const answer = await tokenRequest(
      server.issuer,
      { grant_type: 'client_credentials', resource: 'https://elsewhere.example/mcp' },
      { id: headless.oauth.clientId, secret: headless.secret },
    );
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('invalid_target');
  });

  it('answers a wrong secret over Basic with 401 invalid_client and WWW-Authenticate: Basic', async () => {
    const headless = await headlessClient();
    const answer = await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, { id: headless.oauth.clientId, secret: 'dfc_client_wrong' });
    expect(answer.status).toBe(401);
    expect(answer.body.error).toBe('invalid_client');
    expect(answer.headers.get('www-authenticate')).toMatch(/^Basic /);
  });

  it('answers a wrong or missing secret in the body with 401 invalid_client', async () => {
    const headless = await headlessClient();
    const wrong = await tokenRequest(server.issuer, { grant_type: 'client_credentials', client_id: headless.oauth.clientId, client_secret: 'nope' });
    expect(wrong.status).toBe(401);
    expect(wrong.body.error).toBe('invalid_client');
    const missing = await tokenRequest(server.issuer, { grant_type: 'client_credentials', client_id: headless.oauth.clientId });
    expect(missing.status).toBe(401);
    expect(missing.body.error).toBe('invalid_client');
    const unknown = await tokenRequest(server.issuer, { grant_type: 'client_credentials', client_id: 'no-such-client', client_secret: 'nope' });
    expect(unknown.body.error).toBe('invalid_client');
  });

  it('answers a public client with unauthorized_client', async () => {
    const cli = await registerClient(server.issuer, owner, { name: 'CLI', redirectUris: [CALLBACK], public: true });
    const answer = await tokenRequest(server.issuer, { grant_type: 'client_credentials', client_id: cli.oauth.clientId });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('unauthorized_client');
  });

  it('answers a dynamically registered confidential client with unauthorized_client: no owner vouched for it', async () => {
    const res = await fetch(`${server.issuer}/oauth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ client_name: 'Self-registered', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'client_secret_post' }),
    });
    const registered = (await res.json()) as { client_id: string; client_secret?: string };
    expect(res.status, JSON.stringify(registered)).toBe(201);
    expect(registered.client_secret).toBeDefined();
    const answer = await tokenRequest(server.issuer, {
      grant_type: 'client_credentials',
      client_id: registered.client_id,
      client_secret: registered.client_secret!,
    });
    expect(answer.status).toBe(400);
    expect(answer.body.error).toBe('unauthorized_client');
  });

  it("acts as the client's chosen principal: its grants decide which device tools it lists and calls", async () => {
    const headless = await headlessClient({ principal: 'nightly-backup' });
    expect(headless.principal).toBe('nightly-backup');
    const answer = await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, { id: headless.oauth.clientId, secret: headless.secret });
    const mcp = await connect(server.issuer, answer.body.access_token, 'modern');
    try {
      const result = await mcp.callTool({ name: toolName('get_state', lamp), arguments: {} });
      expect(result.structuredContent).toMatchObject({ capability: 'get_state', status: 'succeeded', principal: 'nightly-backup' });
    } finally {
      await mcp.close();
    }
    // A principal nobody granted lists no tool of the lamp.
    const ungranted = await registerClient(server.issuer, owner, { name: 'Ungranted', public: false, access: 'act' });
    const other = await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, { id: ungranted.oauth.clientId, secret: ungranted.token! });
    expect(await listedTools(other.body.access_token)).not.toContain(toolName('get_state', lamp));
  });

  it('is revoked at /oauth/revoke like any access token, and with its client', async () => {
    const headless = await headlessClient();
    const basic = { id: headless.oauth.clientId, secret: headless.secret };
    const first = (await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, basic)).body.access_token as string;
    const second = (await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, basic)).body.access_token as string;
    const revoke = await fetch(`${server.issuer}/oauth/revoke`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: first, client_id: basic.id, client_secret: basic.secret }).toString(),
    });
    expect(revoke.status).toBe(200);
    expect(await mcpStatus(first)).toBe(401);
    expect(await listedTools(second)).toContain(toolName('get_state', lamp));

    expect((await api.post(`/v1/oauth-clients/${basic.id}/revoke`, { token: owner })).status).toBe(200);
    expect(await mcpStatus(second)).toBe(401);
    const after = await tokenRequest(server.issuer, { grant_type: 'client_credentials' }, basic);
    expect(after.status).toBe(401);
    expect(after.body.error).toBe('invalid_client');
  });
});

describe('MCP client SDK ClientCredentialsProvider end to end', () => {
  it('gets a token with no browser, lists the granted device tools and calls one', async () => {
    const headless = await headlessClient({ access: 'act' });
    const provider = new ClientCredentialsProvider({ clientId: headless.oauth.clientId, clientSecret: headless.secret, expectedIssuer: server.issuer });
    const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
    const mcp = new Client({ name: 'headless-e2e', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
    await mcp.connect(transport);
    try {
      expect(provider.tokens()?.access_token).toMatch(/^dfc_oauth_/);
      expect(provider.tokens()?.refresh_token).toBeUndefined();
      const tools = (await mcp.listTools()).tools.map((t) => t.name);
      expect(tools).toEqual(expect.arrayContaining([toolName('get_state', lamp), toolName('set_power', lamp)]));
      const result = await mcp.callTool({ name: toolName('set_power', lamp), arguments: { on: true } });
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ capability: 'set_power', status: 'succeeded', principal: headless.principal, arguments: { on: true } });
    } finally {
      await mcp.close();
    }
  });
});

describe('docs/agents/oauth.md, the client-credentials snippet', () => {
  const root = path.resolve(import.meta.dirname, '../..');
  const page = fs.readFileSync(path.join(root, 'docs/agents/oauth.md'), 'utf8');
  const snippet = /<!-- tested: client-credentials -->\n+```js\n([\s\S]*?)\n```\n/.exec(page)?.[1];

  it('runs as it is on the page and prints the granted device tools', { timeout: 60_000 }, async () => {
    expect(snippet).toBeDefined();
    const headless = await headlessClient({ access: 'act' });
    // The snippet runs from a folder of its own that sees the project's packages, as a reader's would.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-cc-snippet-'));
    try {
      fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
      const file = path.join(dir, 'agent.mjs');
      fs.writeFileSync(file, snippet!);
      const { stdout } = await promisify(execFile)(process.execPath, [file], {
        cwd: dir,
        env: { ...process.env, DFC_URL: server.issuer, DFC_CLIENT_ID: headless.oauth.clientId, DFC_CLIENT_SECRET: headless.secret },
      });
      expect(stdout).toContain(toolName('get_state', lamp));
      expect(stdout).toContain(toolName('set_power', lamp));
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

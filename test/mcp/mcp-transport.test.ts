import http from 'node:http';
import { beforeAll, describe, expect, it } from 'vitest';
import { connect, envelope, MODERN, rawMcp } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { createHostPolicy } from '../../src/mcp/hosts.js';
import { grantedDevice } from '../helpers/world.js';

let agent: { token: string; principal: string };
let port: string;

const b64 = (value: string) => `=?base64?${Buffer.from(value, 'utf8').toString('base64')}?=`;

const server = useTestServer({ env: { MCP_ALLOWED_HOSTS: 'mcp.example.test, proxy.internal:8443' } });
const api = server.api;

beforeAll(async () => {
  port = new URL(server.url).port;
  const owner = await server.ownerToken('owner-transport');
  ({ agent } = await grantedDevice(api, owner, { capabilities: ['get_state'] }));
});

describe('media types (before the SDK)', () => {
  it('answers 415 to a Content-Type other than application/json', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'content-type': 'text/plain' } });
    expect(res.status).toBe(415);
    expect(res.json).toMatchObject({ jsonrpc: '2.0', error: { code: -32000 }, id: null });
  });

  it('accepts application/json with a charset parameter', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'content-type': 'application/json; charset=utf-8' } });
    expect(res.status).toBe(200);
  });

  it.each([
    ['missing', undefined],
    ['json only', 'application/json'],
    ['event-stream only', 'text/event-stream'],
  ])('answers 406 to a modern request whose Accept is %s', async (_label, accept) => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { accept } });
    expect(res.status).toBe(406);
    expect(res.json.error.message).toContain('text/event-stream');
  });

  it('answers 413 with the error envelope past 16 KiB', async () => {
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/list',
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope(), pad: 'x'.repeat(17 * 1024) } }),
    });
    expect(res.status).toBe(413);
    expect(res.json).toMatchObject({ error: { code: 'payload_too_large' } });
  });

  it('leaves malformed JSON to the SDK: 400 -32700', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', body: '{not json' });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32700);
  });
});

describe('GET and DELETE', () => {
  it.each(['GET', 'DELETE'])('answers %s /mcp without a session id with 405 and Allow: GET, POST', async (method) => {
    const res = await api.request(method, '/mcp', { token: agent.token });
    expect(res.status).toBe(405);
    expect(res.headers.get('allow')).toBe('GET, POST');
    expect(res.body).toMatchObject({ error: { code: 'method_not_allowed' } });
  });

  it('says in the 405 what the GET stream is for, and that a session needs no DELETE', async () => {
    const res = await api.request('DELETE', '/mcp', { token: agent.token, headers: { 'mcp-session-id': 's1.1.AAAAAAAAAAAAAAAA.x' } });
    expect(res.status).toBe(405);
    const { message } = res.body.error as { message: string };
    expect(message).toContain('subscriptions/listen');
    expect(message).toContain('resources/subscribe');
    expect(message).toContain('Mcp-Session-Id holds no server state');
  });

  it('answers 404 to a GET with a session id this server did not issue, so the client initializes again', async () => {
    const res = await api.request('GET', '/mcp', { token: agent.token, headers: { 'mcp-session-id': 's1.1.AAAAAAAAAAAAAAAA.x', accept: 'text/event-stream' } });
    expect(res.status).toBe(404);
  });

  it('authenticates a GET stream before it looks at the session', async () => {
    const res = await api.request('GET', '/mcp', { headers: { 'mcp-session-id': 's1.1.AAAAAAAAAAAAAAAA.x', accept: 'text/event-stream' } });
    expect(res.status).toBe(401);
  });
});

describe('routing headers (-32020, answered by the SDK)', () => {
  it('rejects an Mcp-Method that differs from the body', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'mcp-method': 'resources/list' } });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32020);
  });

  it('rejects a missing Mcp-Method', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'mcp-method': undefined } });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32020);
  });

  it('rejects an MCP-Protocol-Version header that differs from _meta', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'mcp-protocol-version': '2025-11-25' } });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32020);
    expect(res.json.error.data.mismatch.header).toBe('2025-11-25');
  });

  it('rejects an Mcp-Name that differs from the tool named in the body, and a missing one', async () => {
    const mismatch = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/call',
      name: 'get_action',
      params: { name: 'list_devices', arguments: {} },
    });
    expect(mismatch.status).toBe(400);
    expect(mismatch.json.error.code).toBe(-32020);
    const missing = await rawMcp(server.url, { token: agent.token, method: 'tools/call', params: { name: 'list_devices', arguments: {} } });
    expect(missing.status).toBe(400);
    expect(missing.json.error.code).toBe(-32020);
  });

  it('accepts a base64-encoded Mcp-Name for a tool', async () => {
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/call',
      name: b64('list_devices'),
      params: { name: 'list_devices', arguments: {} },
    });
    expect(res.status).toBe(200);
    expect(res.json.result.structuredContent.devices).toHaveLength(1);
  });

  it('carries a Unicode resource URI in Mcp-Name with the base64 form', async () => {
    const uri = 'device://lámpara-ß-灯';
    const ok = await rawMcp(server.url, { token: agent.token, method: 'resources/read', name: b64(uri), params: { uri } });
    // The header matched; the resource does not exist: SEP-2164 not found, in-band.
    expect(ok.status).toBe(200);
    expect(ok.json.error).toMatchObject({ code: -32602, data: { uri: new URL(uri).href } });
    const wrong = await rawMcp(server.url, { token: agent.token, method: 'resources/read', name: b64('device://other'), params: { uri } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.error.code).toBe(-32020);
  });

  it('answers an unsupported protocol version with 400 -32022', async () => {
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/list',
      headers: { 'mcp-protocol-version': '2099-01-01' },
      params: { _meta: { 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } },
    });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32022);
  });
});

describe('server/discover', () => {
  it('identifies the service and its capabilities to a modern client', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'server/discover' });
    expect(res.status).toBe(200);
    expect(res.json.result.supportedVersions).toContain(MODERN);
    expect(res.json.result.capabilities).toMatchObject({ tools: { listChanged: true }, resources: {}, prompts: {} });
    expect(res.json.result._meta['io.modelcontextprotocol/serverInfo'].name).toBe('dfc');
  });

  it('promises a 2025-era client only what its era delivers: no tool-list notifications, no MCP Tasks', async () => {
    const legacy = await connect(server.url, agent.token, 'legacy');
    const declared = legacy.getServerCapabilities();
    expect(declared?.tools).toEqual({ listChanged: false });
    // MCP Apps only: its views are resources and tool _meta, which the 2025 era carries too.
    expect(declared?.extensions).toEqual({ 'io.modelcontextprotocol/ui': {} });
    await legacy.close();
    // The 2026-07-28 era delivers both, on subscriptions/listen and as tasks.
    const modern = await connect(server.url, agent.token, 'modern');
    expect(modern.getServerCapabilities()?.tools).toEqual({ listChanged: true });
    expect(modern.getServerCapabilities()?.extensions).toHaveProperty(['io.modelcontextprotocol/tasks']);
    await modern.close();
  });

  it('lets the official client discover and connect in both eras', async () => {
    for (const era of ['modern', 'legacy'] as const) {
      const mcp = await connect(server.url, agent.token, era);
      expect(mcp.getProtocolEra()).toBe(era);
      expect(mcp.getServerVersion()?.name).toBe('dfc');
      expect(mcp.getInstructions()).toContain('list_functions');
      await mcp.close();
    }
  });
});

describe('Host and Origin (DNS rebinding)', () => {
  // node:http, because fetch does not let a caller set Host.
  const call = (headers: Record<string, string>) =>
    new Promise<{ status: number; body: any }>((resolve, reject) => {
      const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'server/discover', params: { _meta: envelope() } });
      const req = http.request(
        `${server.url}/mcp`,
        {
          method: 'POST',
          headers: {
            'content-type': 'application/json',
            accept: 'application/json, text/event-stream',
            'mcp-protocol-version': MODERN,
            'mcp-method': 'server/discover',
            authorization: `Bearer ${agent.token}`,
            'content-length': Buffer.byteLength(body),
            ...headers,
          },
        },
        (res) => {
          let text = '';
          res.on('data', (chunk) => (text += chunk));
          res.on('end', () => resolve({ status: res.statusCode!, body: text ? JSON.parse(text) : null }));
        },
      );
      req.on('error', reject);
      req.end(body);
    });

  it.each([
    [{ host: 'evil.example.com' }],
    [{ host: `evil.example.com:${'$PORT'}` }],
    [{ host: 'localhost:1' }],
    [{ origin: 'http://evil.example.com' }],
    [{ origin: 'null' }],
    [{ host: 'mcp.example.test:9999' }],
  ])('refuses %j with 403', async (headers) => {
    const h = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.replace('$PORT', port)]));
    const res = await call(h);
    expect(res.status).toBe(403);
    expect(res.body).toMatchObject({ error: { code: 'forbidden' } });
  });

  it.each([
    [{ host: `localhost:${'$PORT'}` }],
    [{ host: `127.0.0.1:${'$PORT'}`, origin: `http://localhost:${'$PORT'}` }],
    [{ host: `[::1]:${'$PORT'}` }],
    [{ host: 'mcp.example.test' }],
    [{ host: 'proxy.internal:8443', origin: 'https://mcp.example.test' }],
    [{ host: `localhost:${'$PORT'}`, origin: `https://localhost:${'$PORT'}` }],
  ])('accepts %j', async (headers) => {
    const h = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k, v.replace('$PORT', port)]));
    const res = await call(h);
    expect(res.status, JSON.stringify(h)).toBe(200);
  });
  it('gives a name the same answer every time, also after hundreds of other names were asked about', () => {
    const policy = createHostPolicy('https://mcp.example.test', ['proxy.internal:8443']);
    const ask = () => ({
      evil: policy.refusal('evil.example.com', undefined, 8787),
      wrongPort: policy.refusal('localhost:1', undefined, 8787),
      loopback: policy.refusal('localhost:8787', undefined, 8787),
      sameNameOtherPort: policy.refusal('localhost:8787', undefined, 9000),
      proxied: policy.refusal('proxy.internal:8443', 'https://mcp.example.test', 8787),
      badOrigin: policy.refusal('mcp.example.test', 'http://mcp.example.test:8443', 8787),
    });
    const first = ask();
    expect(first).toMatchObject({ loopback: undefined, proxied: undefined });
    expect(first.evil).toMatch(/not a name/);
    expect(first.wrongPort).toMatch(/not a name/);
    expect(first.sameNameOtherPort).toMatch(/not a name/);
    expect(first.badOrigin).toMatch(/Origin/);
    for (let i = 0; i < 1000; i++) policy.refusal(`host-${i}.example.com`, undefined, 8787);
    expect(ask()).toEqual(first);
  });
});

describe('X-Request-Id on every /mcp answer', () => {
  const requestIdOf = (res: { headers: Headers }) => res.headers.get('x-request-id');

  it('is on an answer of the SDK (server/discover), a fresh tools/list and its cached repeat', async () => {
    const answers = [
      await rawMcp(server.url, { token: agent.token, method: 'server/discover' }),
      await rawMcp(server.url, { token: agent.token, method: 'tools/list' }),
      await rawMcp(server.url, { token: agent.token, method: 'tools/list' }),
    ];
    for (const res of answers) {
      expect(res.status).toBe(200);
      expect(requestIdOf(res)).toMatch(/^[\w-]{8,}$/);
    }
    expect(new Set(answers.map(requestIdOf)).size).toBe(answers.length);
  });

  it('is on a direct device tool call and on a gate refusal', async () => {
    const tools = (await rawMcp(server.url, { token: agent.token, method: 'tools/list' })).json as { result: { tools: { name: string }[] } };
    const name = tools.result.tools.find((t) => t.name.startsWith('get_state__'))!.name;
    const call = await rawMcp(server.url, { token: agent.token, method: 'tools/call', name, params: { name, arguments: {}, _meta: { 'dfc/waitSeconds': 0 } } });
    expect(call.status).toBe(200);
    expect(requestIdOf(call)).toMatch(/^[\w-]{8,}$/);
    const unsupported = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'content-type': 'text/plain' } });
    expect(unsupported.status).toBe(415);
    expect(requestIdOf(unsupported)).toMatch(/^[\w-]{8,}$/);
    const refused = await rawMcp(server.url, { method: 'tools/list' });
    expect(refused.status).toBe(401);
    expect(requestIdOf(refused)).toMatch(/^[\w-]{8,}$/);
  });
});

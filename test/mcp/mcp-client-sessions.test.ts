import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { initializeLegacy, startLegacyCall } from '../helpers/legacy-prompts.js';
import { rawMcp, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * 2025-era sessions (docs/agents/mcp.md "Sessions", docs/agents/confirmation.md): the answer
 * to an `initialize` carries an `Mcp-Session-Id`; a request with one this service did not
 * issue to the calling connection is answered 404, as the 2025 revision's session management
 * says, so the client initializes again instead of being served as one that cannot ask. An
 * answer to an ask that finds no call waiting for it is refused, never accepted and lost.
 */
const server = useTestServer();
let lamp: AttachedDevice;
let agent: { token: string; principal: string };
let other: { token: string; principal: string };
let setPower: string;

const LEGACY = '2025-11-25';

beforeAll(async () => {
  const api = server.api;
  const owner = await server.ownerToken('owner-sessions');
  lamp = await attachDevice(api, owner);
  agent = await createAgent(api, owner, { name: 'sessions', principal: 'agent:sessions' });
  other = await createAgent(api, owner, { name: 'other', principal: 'agent:other' });
  for (const principal of [agent.principal, other.principal]) await grant(api, owner, principal, lamp.id, ['set_power'], undefined, 'user');
  setPower = toolName('set_power', lamp);
});

function legacyPost(token: string, session: string | undefined, body: unknown): Promise<Response> {
  return fetch(`${server.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': LEGACY,
      authorization: `Bearer ${token}`,
      ...(session !== undefined ? { 'mcp-session-id': session } : {}),
    },
    body: JSON.stringify(body),
  });
}

/** The official client speaking the 2025 handshake, resuming `session` when given. */
async function legacyClient(token: string, session?: string): Promise<Client> {
  const mcp = new Client({ name: 'session-tests', version: '1.0.0' }, { versionNegotiation: { mode: 'legacy' } });
  const transport = new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), {
    sessionId: session,
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
  await mcp.connect(transport);
  return mcp;
}

describe('an unknown Mcp-Session-Id on a 2025-era request', () => {
  it('is answered 404 for a malformed id, a forged one, and one issued to another connection', async () => {
    const theirs = await initializeLegacy(server.url, other.token);
    const mine = await initializeLegacy(server.url, agent.token);
    const forged = `${mine.slice(0, -4)}${mine.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    for (const [what, session] of [
      ['malformed', 'not-a-session'],
      ['forged', forged],
      ["another connection's", theirs],
    ] as const) {
      const res = await legacyPost(agent.token, session, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
      expect(res.status, what).toBe(404);
      const body = (await res.json()) as { error: { code: number; message: string } };
      expect(body.error.code, what).toBe(-32001);
      expect(body.error.message, what).toContain('initialize');
    }
    // The id it was given is served.
    const res = await legacyPost(agent.token, mine, { jsonrpc: '2.0', id: 1, method: 'tools/list', params: {} });
    expect(res.status).toBe(200);
  });

  it('is answered 404 for a call and for a posted answer, and nothing is queued', async () => {
    const before = (await server.api.get('/v1/actions', { token: await server.ownerToken('owner-sessions') })).body.data.length;
    const call = await legacyPost(agent.token, 'not-a-session', {
      jsonrpc: '2.0',
      id: 2,
      method: 'tools/call',
      params: { name: setPower, arguments: { on: true } },
    });
    expect(call.status).toBe(404);
    const answer = await legacyPost(agent.token, 'not-a-session', { jsonrpc: '2.0', id: 7, result: { action: 'accept', content: { confirm: true } } });
    expect(answer.status).toBe(404);
    expect((await server.api.get('/v1/actions', { token: await server.ownerToken('owner-sessions') })).body.data.length).toBe(before);
  });

  it('lets an initialize that carries a stale id start a new session', async () => {
    const res = await legacyPost(agent.token, 'not-a-session', {
      jsonrpc: '2.0',
      id: 0,
      method: 'initialize',
      params: { protocolVersion: LEGACY, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('mcp-session-id')).toMatch(/^s1\./);
  });

  it('is ignored on a 2026-07-28 request, which has no sessions', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'mcp-session-id': 'not-a-session' } });
    expect(res.status, res.text).toBe(200);
    expect(res.json.result.tools.length).toBeGreaterThan(0);
  });

  it('makes the official client’s request fail with 404, and a fresh connect works', async () => {
    const theirs = await initializeLegacy(server.url, other.token);
    const stale = await legacyClient(agent.token, theirs);
    const refused = await stale.ping().then(
      () => undefined,
      (error: unknown) => error as { data?: { status?: number } },
    );
    expect(refused?.data?.status).toBe(404);
    await stale.close();
    const fresh = await legacyClient(agent.token);
    expect((await fresh.listTools()).tools.map((t) => t.name)).toContain(setPower);
    await fresh.close();
  });
});

describe('an answer to a 2025-era ask', () => {
  it('that finds no call waiting is refused with 409 and a reason, not accepted with 202', async () => {
    const session = await initializeLegacy(server.url, agent.token);
    const res = await legacyPost(agent.token, session, { jsonrpc: '2.0', id: 123_456, result: { action: 'accept', content: { confirm: true } } });
    expect(res.status).toBe(409);
    const body = (await res.json()) as { error: { message: string } };
    expect(body.error.message).toContain('No call waits for this answer');
    expect(body.error.message).toContain('Nothing was confirmed');
  });

  it('that reaches its waiting call is taken with 202, and the call completes', async () => {
    const session = await initializeLegacy(server.url, agent.token);
    const call = await startLegacyCall(server.url, agent.token, setPower, { on: true }, 1, { session });
    expect(call.kind).toBe('ask');
    if (call.kind !== 'ask') return;
    expect(await call.answer({ action: 'decline' })).toBe(202);
    const result = await call.result();
    expect(result.isError).toBe(true);
    expect(result.structuredContent.error.code).toBe('confirmation_declined');
  });
});

describe('a 2026-07-28 request', () => {
  it('is given no session id', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list' });
    expect(res.status, res.text).toBe(200);
    expect(res.headers.get('mcp-session-id')).toBeNull();
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client as Api } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { initializeLegacy, legacyHeaders } from '../helpers/legacy-prompts.js';
import { toolName } from '../helpers/mcp-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { createRememberedCapabilities } from '../../src/mcp/remembered-capabilities.js';

/**
 * What 2025-era clients declared on `initialize`: a client that sends its `Mcp-Session-Id`
 * back carries it in that id (src/mcp/client-sessions.ts), so nothing is remembered for it and
 * no tenant's load can make it forget; a client that sends none is remembered per connection
 * in a memory bounded per workspace and per instance (src/mcp/remembered-capabilities.ts).
 */
const ELICITS = { elicitation: {} };

describe('remembered client capabilities are bounded per workspace, and an instance full of them keeps fair shares', () => {
  it('keeps another workspace’s clients while one workspace initializes 20,000 connections', () => {
    const memory = createRememberedCapabilities({ total: 10_000, perWorkspace: 1_000 });
    memory.remember('victim', 'victim-conn', ELICITS);
    for (let i = 0; i < 20_000; i++) memory.remember('flooder', `flooder-${i}`, ELICITS);
    expect(memory.recall('victim-conn')).toEqual(ELICITS);
    // The flooder keeps only its own most recent clients, up to its workspace's bound.
    expect(memory.size('flooder')).toBe(1_000);
    expect(memory.recall('flooder-19999')).toEqual(ELICITS);
    expect(memory.recall('flooder-18999')).toBeUndefined();
  });

  it('past the instance bound takes from the workspaces holding the most, never from one under its fair share', () => {
    const memory = createRememberedCapabilities({ total: 100, perWorkspace: 60 });
    for (let i = 0; i < 10; i++) memory.remember('bystander', `bystander-${i}`, ELICITS);
    // Four tenants, each initializing far past what the instance keeps: 101 connections each, as often as it likes.
    for (let round = 0; round < 100; round++)
      for (let t = 0; t < 4; t++) for (let i = 0; i < 101; i++) memory.remember(`tenant-${t}`, `tenant-${t}-${i}`, ELICITS);
    expect(memory.size()).toBe(100);
    // A fifth of the instance is the bystander's fair share; it holds 10 and loses none.
    for (let i = 0; i < 10; i++) expect(memory.recall(`bystander-${i}`), `bystander-${i}`).toEqual(ELICITS);
    for (let t = 0; t < 4; t++) expect(memory.size(`tenant-${t}`)).toBeLessThanOrEqual(23);
  });

  it('keeps the clients it holds when a crowd of new workspaces arrives at a full instance', () => {
    const memory = createRememberedCapabilities({ total: 100, perWorkspace: 60 });
    for (let w = 0; w < 100; w++) memory.remember(`steady-${w}`, `steady-${w}-conn`, ELICITS);
    for (let w = 0; w < 10_000; w++) memory.remember(`newcomer-${w}`, `newcomer-${w}-conn`, ELICITS);
    for (let w = 0; w < 100; w++) expect(memory.recall(`steady-${w}-conn`), `steady-${w}`).toEqual(ELICITS);
    expect(memory.size()).toBe(100);
  });

  it('forgets a workspace’s least recently used client first, not one in use', () => {
    const memory = createRememberedCapabilities({ total: 100, perWorkspace: 3 });
    for (const key of ['a', 'b', 'c']) memory.remember('ws', key, ELICITS);
    expect(memory.recall('a')).toEqual(ELICITS);
    memory.remember('ws', 'd', ELICITS);
    expect(memory.recall('b')).toBeUndefined();
    for (const key of ['a', 'c', 'd']) expect(memory.recall(key), key).toEqual(ELICITS);
  });
});

/** The first JSON-RPC message of a raw 2025-era tools/call's event stream (the ask, or the call's answer); the stream is then dropped. */
async function firstMessage(url: string, token: string, session: string, name: string): Promise<any> {
  const abort = new AbortController();
  const res = await fetch(`${url}/mcp`, {
    method: 'POST',
    headers: legacyHeaders(token, session),
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: { on: true } } }),
    signal: abort.signal,
  });
  if (!res.headers.get('content-type')?.includes('text/event-stream')) return res.json();
  const reader = res.body!.pipeThrough(new TextDecoderStream()).getReader();
  let text = '';
  while (!text.includes('\n\n')) {
    const { value, done } = await reader.read();
    if (done) break;
    text += value;
  }
  abort.abort();
  const data = text.split('\n').find((line) => line.startsWith('data:'))!;
  return JSON.parse(data.slice(5));
}

describe('a 2025-era session id carries what its client declared', () => {
  let server: TestServer;
  let api: Api;
  let lamp: AttachedDevice;
  let agent: { token: string; principal: string };
  let setPower: string;
  beforeAll(async () => {
    server = await startTestServer();
    api = client(server.url);
    const owner = await server.ownerToken('owner-sessions');
    lamp = await attachDevice(api, owner);
    agent = await createAgent(api, owner, { name: 'sessions', principal: 'agent:sessions' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'user');
    setPower = toolName('set_power', lamp);
  });
  afterAll(() => server.close());

  it('asks the user of a session that declared elicitation after a restart, with nothing remembered', async () => {
    const session = await initializeLegacy(server.url, agent.token, { elicitation: { form: {} } });
    const dir = server.dir;
    await server.close();
    server = await startTestServer({ dir });
    const message = await firstMessage(server.url, agent.token, session, setPower);
    expect(message.method, JSON.stringify(message)).toBe('elicitation/create');
    expect(message.params.message).toContain('set_power');
  });

  it('tells a session that declared no elicitation that its client cannot ask, whatever another client of the token declared', async () => {
    const cannot = await initializeLegacy(server.url, agent.token, {});
    await initializeLegacy(server.url, agent.token, { elicitation: { form: {} } });
    const message = await firstMessage(server.url, agent.token, cannot, setPower);
    expect(message.result?.isError, JSON.stringify(message)).toBe(true);
    expect(message.result.structuredContent.error.code).toBe('confirmation_required');
  });
});

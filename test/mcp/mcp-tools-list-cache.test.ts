import { beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, toolName, type RawResponse } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The modern tools/list answer is cached per caller (src/mcp/tools-list-cache.ts) and must
 * still show exactly what the caller may call now: every write to grants, manifests or
 * devices, and every grant expiry, shows on the very next request.
 */
const clock = manualClock();
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };

async function listTools(token: string): Promise<string[]> {
  const res = await rawMcp(server.url, { token, method: 'tools/list' });
  expect(res.status, res.text).toBe(200);
  return (res.json.result.tools as { name: string }[]).map((t) => t.name);
}

async function deviceTools(token: string): Promise<string[]> {
  return (await listTools(token)).filter((name) => name.includes('__'));
}

/** A 2025-era tools/list, which the SDK always answers itself (no `_meta`, no routing headers). */
async function legacyList(token: string): Promise<RawResponse> {
  return rawMcp(server.url, {
    token,
    method: 'tools/list',
    headers: { 'mcp-protocol-version': undefined, 'mcp-method': undefined },
    body: JSON.stringify({ jsonrpc: '2.0', id: 9, method: 'tools/list', params: {} }),
  });
}

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-tools-cache');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'cached', access: 'act', principal: 'agent:cached' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state']);
});

describe('POST /mcp tools/list from the per-caller cache', () => {
  it('answers a repeated request with the same tools the SDK lists, under the request id', async () => {
    const first = await rawMcp(server.url, { token: agent.token, method: 'tools/list', id: 1 });
    const second = await rawMcp(server.url, { token: agent.token, method: 'tools/list', id: 'again' });
    expect(second.status).toBe(200);
    expect(second.headers.get('content-type')).toContain('application/json');
    expect(second.json.id).toBe('again');
    expect(second.json.result).toEqual(first.json.result);
    expect(second.json.result).toMatchObject({ resultType: 'complete', ttlMs: 0, cacheScope: 'private' });
    const legacy = await legacyList(agent.token);
    expect(legacy.status).toBe(200);
    expect(second.json.result.tools).toEqual(legacy.json.result.tools);
  });

  it('shows a new grant on the next request', async () => {
    expect(await deviceTools(agent.token)).toEqual([toolName('get_state', lamp.id)]);
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    expect(await deviceTools(agent.token)).toEqual([toolName('get_state', lamp.id), toolName('set_power', lamp.id)]);
  });

  it('drops a revoked grant on the next request, and a call to it is still refused with 403', async () => {
    await deviceTools(agent.token);
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } });
    expect(revoked.status).toBe(200);
    expect(await deviceTools(agent.token)).toEqual([toolName('get_state', lamp.id)]);
    const call = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/call',
      name: toolName('set_power', lamp.id),
      params: { name: toolName('set_power', lamp.id), arguments: { on: true } },
    });
    expect(call.status).toBe(403);
    expect(call.json.error.code).toBe('grant_required');
  });

  it('drops a function whose grant expired, with no write in between', async () => {
    await grant(api, owner, agent.principal, lamp.id, ['set_brightness'], 60);
    expect(await deviceTools(agent.token)).toContain(toolName('set_brightness', lamp.id));
    clock.advance(61_000);
    expect(await deviceTools(agent.token)).not.toContain(toolName('set_brightness', lamp.id));
  });

  it('follows a republished manifest', async () => {
    const before = await rawMcp(server.url, { token: agent.token, method: 'tools/list' });
    const described = (r: RawResponse) =>
      (r.json.result.tools as { name: string; description: string }[]).find((t) => t.name.startsWith('get_state__'))!.description;
    expect(described(before)).toContain('Power and brightness.');
    const manifest = { capabilities: lampManifest.capabilities.map((c) => (c.name === 'get_state' ? { ...c, description: 'Reads the lamp.' } : c)) };
    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: manifest })).status).toBe(200);
    expect(described(await rawMcp(server.url, { token: agent.token, method: 'tools/list' }))).toContain('Reads the lamp.');
  });

  it('drops the functions of a revoked device on the next request', async () => {
    const other = await attachDevice(api, owner, { name: 'Spare lamp' });
    await grant(api, owner, agent.principal, other.id, ['get_state']);
    expect(await deviceTools(agent.token)).toContain(toolName('get_state', other.id));
    expect((await api.post(`/v1/devices/${other.id}/revoke`, { token: owner })).status).toBe(200);
    expect(await deviceTools(agent.token)).not.toContain(toolName('get_state', other.id));
  });

  it('keeps callers apart: another principal and a read ceiling see their own lists', async () => {
    const reader = await createAgent(api, owner, { name: 'reader', access: 'read', principal: 'agent:cached-reader' });
    const stranger = await createAgent(api, owner, { name: 'stranger', access: 'act', principal: 'agent:stranger' });
    await grant(api, owner, reader.principal, lamp.id, ['get_state', 'set_power']);
    await deviceTools(agent.token);
    expect(await deviceTools(reader.token)).toEqual([toolName('get_state', lamp.id)]);
    expect(await deviceTools(stranger.token)).toEqual([]);
  });

  it('leaves requests the SDK must judge to the SDK: a mismatched Mcp-Method header is still -32020', async () => {
    await listTools(agent.token);
    const res = await rawMcp(server.url, { token: agent.token, method: 'tools/list', headers: { 'mcp-method': 'resources/list' } });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32020);
  });

  it('answers a revoked token with 401 even when its list is cached', async () => {
    const short = await createAgent(api, owner, { name: 'short', access: 'act', principal: agent.principal });
    await listTools(short.token);
    const connections = (await api.get('/v1/agent-connections', { token: owner })).body.data as { id: string; name: string }[];
    const id = connections.find((c) => c.name === 'short')!.id;
    expect((await api.post(`/v1/agent-connections/${id}/revoke`, { token: owner })).status).toBe(200);
    expect((await rawMcp(server.url, { token: short.token, method: 'tools/list' })).status).toBe(401);
  });
});

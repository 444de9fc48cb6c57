import { beforeAll, describe, expect, it } from 'vitest';
import { createCallGateCache } from '../../src/mcp/call-gate-cache.js';
import type { DeviceTool } from '../../src/mcp/device-tool-names.js';
import { grant } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, toolName, type RawResponse } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The tools/call gate keeps what it read for a caller and a device (src/mcp/call-gate-cache.ts)
 * and must still answer exactly as a fresh read would: every write to grants, manifests or
 * devices, whoever made it, and every grant expiry, shows on the very next call. Each test
 * calls once first, so that the second call meets a kept entry.
 */
const clock = manualClock();
let owner: string;

function call(token: string, device: AttachedDevice, capability: string, args: Record<string, unknown>): Promise<RawResponse> {
  const name = toolName(capability, device.id);
  return rawMcp(server.url, { token, method: 'tools/call', name, params: { name, arguments: args, _meta: { 'dfc/waitSeconds': 0 } } });
}

async function queued(token: string, device: AttachedDevice, capability: string, args: Record<string, unknown>): Promise<void> {
  const res = await call(token, device, capability, args);
  expect(res.status, res.text).toBe(200);
  expect(res.json.result.structuredContent.status).toBe('queued');
}

async function refused(token: string, device: AttachedDevice, capability: string, code: string): Promise<void> {
  const res = await call(token, device, capability, { on: true });
  expect(res.status).toBe(403);
  expect(res.json.error.code).toBe(code);
}

async function setup(name: string) {
  const lamp = await attachDevice(api, owner, { name });
  const agent = await createAgent(api, owner, { name, access: 'act', principal: `agent:${name}` });
  return { lamp, agent };
}

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-call-gate');
});

describe('POST /mcp tools/call through the kept gate', () => {
  it('refuses the next call once the grant is revoked', async () => {
    const { lamp, agent } = await setup('gate-revoked');
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    await queued(agent.token, lamp, 'set_power', { on: true });
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } });
    expect(revoked.status).toBe(200);
    await refused(agent.token, lamp, 'set_power', 'grant_required');
  });

  it('refuses the next call once the grant expired, with no write in between', async () => {
    const { lamp, agent } = await setup('gate-expired');
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], 60);
    await queued(agent.token, lamp, 'set_power', { on: true });
    clock.advance(61_000);
    await refused(agent.token, lamp, 'set_power', 'grant_required');
  });

  it('checks the arguments against the schema the device republished, not the one it replaced', async () => {
    const { lamp, agent } = await setup('gate-schema');
    await grant(api, owner, agent.principal, lamp.id, ['set_brightness']);
    await queued(agent.token, lamp, 'set_brightness', { level: 50 });
    const dimmer = {
      capabilities: lampManifest.capabilities.map((c) =>
        c.name === 'set_brightness' ? { ...c, arguments: { ...c.arguments, properties: { level: { type: 'integer', minimum: 0, maximum: 10 } } } } : c,
      ),
    };
    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: dimmer })).status).toBe(200);
    // The grant was for the old schema: it no longer applies until the owner grants again.
    expect((await call(agent.token, lamp, 'set_brightness', { level: 5 })).status).toBe(403);
    await grant(api, owner, agent.principal, lamp.id, ['set_brightness']);
    await queued(agent.token, lamp, 'set_brightness', { level: 5 });

    const before = (await api.get('/v1/actions', { token: owner })).body.data.length;
    const res = await call(agent.token, lamp, 'set_brightness', { level: 50 });
    expect(res.json.result).toMatchObject({ isError: true, structuredContent: { error: { code: 'validation_failed' } } });
    expect((await api.get('/v1/actions', { token: owner })).body.data.length).toBe(before);
  });

  it('refuses the next call after a revocation written by another instance, straight to the database', async () => {
    const { lamp, agent } = await setup('gate-elsewhere');
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    await queued(agent.token, lamp, 'set_power', { on: true });
    await server.service.db.run('UPDATE grants SET revoked_at = ? WHERE principal = ? AND device_id = ?', [clock.now(), agent.principal, lamp.id]);
    await refused(agent.token, lamp, 'set_power', 'grant_required');
  });

  it('refuses the next call to a revoked device', async () => {
    const { lamp, agent } = await setup('gate-device');
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    await queued(agent.token, lamp, 'set_power', { on: true });
    expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    await refused(agent.token, lamp, 'set_power', 'grant_required');
  });

  it("keeps ceilings apart: a read connection of the same principal is refused what the act connection's call was allowed", async () => {
    const { lamp, agent } = await setup('gate-ceiling');
    const reader = await createAgent(api, owner, { name: 'gate-ceiling-reader', access: 'read', principal: agent.principal });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    await queued(agent.token, lamp, 'set_power', { on: true });
    await refused(reader.token, lamp, 'set_power', 'insufficient_access');
  });
});

describe('the kept gate, in memory', () => {
  const tool = (name: string, padding = ''): DeviceTool => ({
    name,
    fn: {
      deviceId: 'd',
      deviceName: 'Lamp',
      deviceKind: 'device',
      parentId: null,
      parentName: null,
      capability: name,
      kind: 'control',
      description: padding,
      arguments: { type: 'object', properties: { on: { type: 'boolean' } } },
      approval: 'none',
    },
  });
  const size = (t: DeviceTool) => JSON.stringify(t).length;

  it('holds no more JSON text than its bound, letting the oldest kept entry go first', () => {
    const bound = size(tool('a')) * 2;
    const cache = createCallGateCache({ perPartition: bound, total: bound });
    const state = { version: 1, now: 0 };
    cache.keep('w', 'a', { version: 1, validUntil: Infinity, tools: [tool('a')] });
    cache.keep('w', 'b', { version: 1, validUntil: Infinity, tools: [tool('b')] });
    expect(cache.tools('w', 'a', state)).toHaveLength(1);
    cache.keep('w', 'c', { version: 1, validUntil: Infinity, tools: [tool('c')] });
    expect(cache.tools('w', 'a', state)).toBeUndefined();
    expect(cache.tools('w', 'b', state)).toHaveLength(1);
    expect(cache.tools('w', 'c', state)).toHaveLength(1);
    // Larger than the whole bound: answered, not kept, and nothing else is lost for nothing.
    expect(cache.keep('w', 'big', { version: 1, validUntil: Infinity, tools: [tool('big', 'x'.repeat(bound))] })).toHaveLength(1);
    expect(cache.tools('w', 'big', state)).toBeUndefined();
  });

  it('answers nothing for another version or at the next grant expiry', () => {
    const cache = createCallGateCache();
    cache.keep('w', 'k', { version: 3, validUntil: 1_000, tools: [tool('a')] });
    expect(cache.tools('w', 'k', { version: 4, now: 0 })).toBeUndefined();
    cache.keep('w', 'k', { version: 3, validUntil: 1_000, tools: [tool('a')] });
    expect(cache.tools('w', 'k', { version: 3, now: 999 })).toHaveLength(1);
    expect(cache.tools('w', 'k', { version: 3, now: 1_000 })).toBeUndefined();
  });

  it('keeps entries no request can change', () => {
    const cache = createCallGateCache();
    const [kept] = cache.keep('w', 'k', { version: 1, validUntil: Infinity, tools: [tool('a')] });
    expect(() => {
      (kept!.fn.arguments as Record<string, unknown>).type = 'array';
    }).toThrow(TypeError);
  });
});

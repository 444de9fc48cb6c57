import type { Client as McpClient } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, rawMcp, toolName, type Era } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

let owner: string;
let lamp: AttachedDevice;
let fan: AttachedDevice;
let alice: { token: string; principal: string };
let bob: { token: string; principal: string };
let aliceAction: { id: string };

const text = (r: { contents: unknown[] }) => JSON.parse((r.contents[0] as { text: string }).text);

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-resources');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  fan = await attachDevice(api, owner, { name: 'Fan' });
  alice = await createAgent(api, owner, { name: 'alice', access: 'act', principal: 'agent:res-alice' });
  bob = await createAgent(api, owner, { name: 'bob', access: 'act', principal: 'agent:res-bob' });
  await grant(api, owner, alice.principal, lamp.id, ['get_state', 'set_power']);
  await grant(api, owner, bob.principal, fan.id, ['get_state']);
  const queued = await api.post(`/v1/devices/${lamp.id}/actions`, { token: alice.token, body: { capability: 'set_power', arguments: { on: true } } });
  expect(queued.status).toBe(201);
  aliceAction = queued.body.data;
});

describe.each<Era>(['modern', 'legacy'])('resources (%s client)', (era) => {
  let a: McpClient;
  let b: McpClient;
  beforeAll(async () => {
    a = await connect(server.url, alice.token, era);
    b = await connect(server.url, bob.token, era);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('lists the three templates', async () => {
    const templates = (await a.listResourceTemplates()).resourceTemplates.map((t) => t.uriTemplate);
    expect(templates).toEqual(['device://{deviceId}', 'device://{deviceId}/state', 'action://{actionId}']);
  });

  it('lists only the devices each agent may call a function on, and only its own actions', async () => {
    // The MCP Apps device view is the same for every caller (test/mcp/mcp-apps.test.ts).
    const VIEW = 'ui://device-function-control/device.html';
    expect((await a.listResources()).resources.map((r) => r.uri)).toEqual([
      VIEW,
      `device://${lamp.id}`,
      `device://${lamp.id}/state`,
      `action://${aliceAction.id}`,
    ]);
    expect((await b.listResources()).resources.map((r) => r.uri)).toEqual([VIEW, `device://${fan.id}`, `device://${fan.id}/state`]);
    for (const r of (await a.listResources()).resources.filter((r) => r.uri.startsWith('device://'))) expect(r.description).toBeTruthy();
  });

  it('reads a granted device with its capabilities filtered, and refuses others as not found', async () => {
    const device = text(await a.readResource({ uri: `device://${lamp.id}` }));
    expect(device).toMatchObject({ id: lamp.id, name: 'Lamp' });
    expect(device.capabilities.map((c: { name: string }) => c.name)).toEqual(['get_state', 'set_power']);
    await expect(a.readResource({ uri: `device://${fan.id}` })).rejects.toMatchObject({ code: -32602 });
    await expect(a.readResource({ uri: 'device://not-a-uuid' })).rejects.toMatchObject({ code: -32602 });
  });

  it("reads the agent's own action and no other principal's", async () => {
    expect(text(await a.readResource({ uri: `action://${aliceAction.id}` }))).toMatchObject({ id: aliceAction.id, status: 'queued' });
    await expect(b.readResource({ uri: `action://${aliceAction.id}` })).rejects.toMatchObject({ code: -32602 });
  });

  it('offers one prompt on how to operate devices', async () => {
    const prompts = (await a.listPrompts()).prompts.map((p) => p.name);
    expect(prompts).toEqual(['operate_devices']);
  });
});

describe('parity: REST and MCP give the same data for the same principal', () => {
  it.each<Era>(['modern', 'legacy'])('list_devices, list_functions and get_action (%s)', async (era) => {
    const mcp = await connect(server.url, alice.token, era);
    try {
      const devices = await mcp.callTool({ name: 'list_devices', arguments: {} });
      expect(devices.structuredContent).toEqual({ devices: (await api.get('/v1/devices', { token: alice.token })).body.data });
      const functions = await mcp.callTool({ name: 'list_functions', arguments: {} });
      expect(functions.structuredContent).toEqual({ functions: (await api.get('/v1/functions', { token: alice.token })).body.data });
      const action = await mcp.callTool({ name: 'get_action', arguments: { actionId: aliceAction.id } });
      expect(action.structuredContent).toEqual((await api.get(`/v1/actions/${aliceAction.id}`, { token: alice.token })).body.data);
      // The resource and the tool agree too.
      expect(text(await mcp.readResource({ uri: `action://${aliceAction.id}` }))).toEqual(action.structuredContent);
    } finally {
      await mcp.close();
    }
  });

  it('gives the same validation issues for a bad get_action input', async () => {
    const mcp = await connect(server.url, alice.token, 'modern');
    try {
      const result = await mcp.callTool({ name: 'get_action', arguments: { actionId: 'nope' } });
      expect(result.isError).toBe(true);
      const rest = await api.get('/v1/actions/nope', { token: alice.token });
      const { requestId: _a, ...viaMcp } = errorEnvelope(result).error;
      const { requestId: _b, ...viaRest } = rest.body.error;
      expect(viaMcp).toEqual(viaRest);
    } finally {
      await mcp.close();
    }
  });
});

describe('DEVICE_CONTROLS_ENABLED=false', () => {
  let agent: { token: string; principal: string };
  let device: AttachedDevice;
  const off = useTestServer({ env: { DEVICE_CONTROLS_ENABLED: 'false' } });
  const offApi = off.api;

  beforeAll(async () => {
    const o = await off.ownerToken('owner-off');
    ({ device, agent } = await grantedDevice(offApi, o, { capabilities: ['get_state'] }));
  });

  it('hides device tools and broadcast, keeps reads, and answers a device tool call or broadcast with 503 device_controls_disabled', async () => {
    const mcp = await connect(off.url, agent.token, 'modern');
    try {
      const names = (await mcp.listTools()).tools.map((t) => t.name);
      expect(names).toEqual(['list_devices', 'get_device_state', 'list_functions', 'get_action', 'list_actions', 'cancel_action']);
      expect(((await mcp.callTool({ name: 'list_functions', arguments: {} })).structuredContent as any).functions).toHaveLength(1);
    } finally {
      await mcp.close();
    }
    const name = toolName('get_state', device.id);
    const call = await rawMcp(off.url, { token: agent.token, method: 'tools/call', name, params: { name, arguments: {} } });
    expect(call.status).toBe(503);
    expect(call.json).toMatchObject({ error: { code: 'device_controls_disabled' } });
    const args = { deviceIds: [device.id], capability: 'get_state', arguments: {}, idempotencyKey: 'k1' };
    const bc = await rawMcp(off.url, { token: agent.token, method: 'tools/call', name: 'broadcast', params: { name: 'broadcast', arguments: args } });
    expect(bc.status).toBe(503);
  });
});

describe('lists answered in one page refuse a cursor', () => {
  for (const method of ['resources/list', 'resources/templates/list', 'prompts/list']) {
    it(`answers ${method} with cursor "bogus" -32602, not the whole list again`, async () => {
      const res = await rawMcp(server.url, { token: alice.token, method, params: { cursor: 'bogus' } });
      expect(res.json.error).toMatchObject({ code: -32602, message: expect.stringContaining('cursor') });
      expect(res.json.result).toBeUndefined();
    });

    it(`still answers ${method} without a cursor`, async () => {
      const res = await rawMcp(server.url, { token: alice.token, method });
      expect(res.json.result).toBeDefined();
    });
  }
});

describe('a device the agent cannot call: unknown, another workspace’s, or revoked', () => {
  it('is answered grant_required on REST and MCP alike, for a single call and in a broadcast', async () => {
    const stranger = await server.ownerToken('owner-resources-elsewhere');
    const foreign = await attachDevice(api, stranger, { name: 'Elsewhere' });
    const revoked = await attachDevice(api, owner, { name: 'Gone' });
    await grant(api, owner, alice.principal, revoked.id, ['set_power']);
    expect((await api.post(`/v1/devices/${revoked.id}/revoke`, { token: owner })).status).toBe(200);
    const mcp = await connect(server.url, alice.token, 'modern');
    for (const [what, deviceId] of [
      ['unknown', '3f1e2d3c-4b5a-4697-8877-665544332211'],
      ["another workspace's", foreign.id],
      ['revoked', revoked.id],
    ] as const) {
      const rest = await api.post(`/v1/devices/${deviceId}/actions`, { token: alice.token, body: { capability: 'set_power', arguments: { on: true } } });
      expect([rest.status, rest.body.error.code], what).toEqual([403, 'grant_required']);
      const name = toolName('set_power', deviceId);
      const call = await rawMcp(server.url, { token: alice.token, method: 'tools/call', name, params: { name, arguments: { on: true } } });
      expect([call.status, call.json.error.code], what).toEqual([403, 'grant_required']);
      // The official client sees the same refusal.
      const refused = await mcp.callTool({ name, arguments: { on: true } }).then(
        () => undefined,
        (error: { data?: { status?: number; text?: string } }) => error.data,
      );
      expect(refused?.status, what).toBe(403);
      expect(JSON.parse(refused!.text!).error.code, what).toBe('grant_required');
      const body = { deviceIds: [deviceId], capability: 'set_power', arguments: { on: true }, idempotencyKey: crypto.randomUUID() };
      const restBroadcast = await api.post('/v1/broadcasts', { token: alice.token, body });
      expect(restBroadcast.body.data.results[0].error.code, what).toBe('grant_required');
      const mcpBroadcast: any = await mcp.callTool({ name: 'broadcast', arguments: { ...body, idempotencyKey: crypto.randomUUID() } });
      expect(mcpBroadcast.structuredContent.results[0].error.code, what).toBe('grant_required');
    }
    await mcp.close();
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { grant, next, queue, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, rawMcp, toolName } from '../helpers/mcp-client.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { claimNext } from '../../src/store/action-hand-out.js';
import { listen } from '../helpers/tasks-client.js';
import { connectDevice } from '../helpers/ws.js';
import { manualClock } from '../helpers/clock.js';
import { grantedWorld } from '../helpers/world.js';

/**
 * The owner's pause switch for device control (docs/owners/console-guide.md "Pause device
 * control"): `POST /v1/device-controls { paused }` holds every request that would queue an
 * action in the owner's workspace (REST, broadcast, MCP device tool) with 503
 * `device_controls_disabled`, and `next` hands its devices nothing, until the owner resumes.
 * Other workspaces are untouched; the switch survives a restart.
 */

let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };
let setPower: string;

const pause = (paused: boolean, token = owner) => api.post('/v1/device-controls', { token, body: { paused } });

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('pause-owner');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'pause', access: 'act', principal: 'agent:pause' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
  setPower = toolName('set_power', lamp.id);
});
afterAll(async () => {
  await pause(false);
});

describe('the pause switch over REST', () => {
  it('starts running, pauses with who and when, and resumes', async () => {
    expect((await api.get('/v1/device-controls', { token: owner })).body.data).toEqual({
      enabled: true,
      paused: false,
      pausedAt: null,
      pausedBy: null,
      serviceEnabled: true,
    });
    const paused = await pause(true);
    expect(paused.status).toBe(200);
    expect(paused.body.data).toMatchObject({ enabled: false, paused: true, pausedAt: expect.any(Number), pausedBy: 'pause-owner', serviceEnabled: true });
    expect((await api.get('/v1/device-controls', { token: owner })).body.data).toEqual(paused.body.data);
    // Pausing again keeps the first pause's time.
    expect((await pause(true)).body.data.pausedAt).toBe(paused.body.data.pausedAt);
    expect((await pause(false)).body.data).toMatchObject({ enabled: true, paused: false, pausedAt: null, pausedBy: null });
  });

  it('refuses an agent request with 503 device_controls_disabled while paused, and accepts it once resumed', async () => {
    await pause(true);
    const refused = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('device_controls_disabled');
    expect(refused.body.error.message).toContain('paused for this workspace by its owner');
    const broadcast = await api.post('/v1/broadcasts', {
      token: agent.token,
      body: { deviceIds: [lamp.id], capability: 'get_state', arguments: {}, idempotencyKey: 'paused' },
    });
    expect(broadcast.status).toBe(503);
    expect(broadcast.body.error.code).toBe('device_controls_disabled');
    await pause(false);
    const accepted = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(accepted.status).toBe(201);
    expect(accepted.body.data.status).toBe('queued');
    await api.post(`/v1/actions/${accepted.body.data.id}/cancel`, { token: owner });
  });

  it('answers the pause before any other refusal, and queues nothing for a keyed request or its replay', async () => {
    const keyed = { capability: 'set_power', arguments: { on: false }, idempotencyKey: `pause-${lamp.id}` };
    const first = await requestAction(api, agent.token, lamp.id, keyed);
    expect(first.status).toBe(201);
    await api.post(`/v1/actions/${first.body.data.id}/cancel`, { token: owner });
    await pause(true);
    try {
      for (const body of [
        { capability: 'not_granted', arguments: {} },
        { capability: 'set_power', arguments: { on: 'yes' } },
        keyed,
        { ...keyed, idempotencyKey: `pause-fresh-${lamp.id}` },
      ]) {
        const refused = await requestAction(api, agent.token, lamp.id, body);
        expect({ capability: body.capability, status: refused.status, code: refused.body.error?.code }).toEqual({
          capability: body.capability,
          status: 503,
          code: 'device_controls_disabled',
        });
      }
      expect((await server.service.db.all("SELECT id FROM actions WHERE device_id = ? AND status = 'queued'", [lamp.id])).length).toBe(0);
    } finally {
      await pause(false);
    }
  });

  it('holds commands queued before the pause: next hands out nothing until resumed, and they stay cancellable', async () => {
    const held = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    const other = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    await pause(true);
    expect((await next(api, lamp)).body).toEqual({ data: null });
    expect((await api.get(`/v1/actions/${held.id}`, { token: owner })).body.data.status).toBe('queued');
    expect((await api.post(`/v1/actions/${other.id}/cancel`, { token: owner })).body.data.status).toBe('cancelled');
    // Reads keep working.
    expect((await api.get('/v1/functions', { token: agent.token })).body.data).toHaveLength(2);
    await pause(false);
    expect((await next(api, lamp)).body.data.id).toBe(held.id);
  });

  it('wakes a device holding a queued command when control resumes, once per device', async () => {
    const held = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    await pause(true);
    const socket = await connectDevice(api, server.url, lamp);
    try {
      await pause(false);
      expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: lamp.id, actionId: held.id });
      // Resuming a workspace that runs wakes nobody.
      await pause(false);
      expect((await next(api, lamp)).body.data.id).toBe(held.id);
      expect(socket.frames).toHaveLength(1);
    } finally {
      socket.ws.close();
      for (const a of (await api.get('/v1/actions', { token: owner })).body.data) {
        if (a.status === 'queued' || a.status === 'received') await api.post(`/v1/actions/${a.id}/cancel`, { token: owner });
      }
    }
  });

  it("pauses only the owner's own workspace", async () => {
    const other = await server.ownerToken('pause-other-owner');
    const otherLamp = await attachDevice(api, other, { name: 'Other lamp' });
    const otherAgent = await createAgent(api, other, { access: 'act' });
    await grant(api, other, otherAgent.principal, otherLamp.id, ['get_state']);
    await pause(true);
    try {
      expect((await requestAction(api, otherAgent.token, otherLamp.id, { capability: 'get_state', arguments: {} })).status).toBe(201);
      expect((await api.get('/v1/device-controls', { token: other })).body.data.paused).toBe(false);
    } finally {
      await pause(false);
    }
  });

  it('takes an owner session only, and a boolean', async () => {
    expect((await pause(true, agent.token)).status).toBe(403);
    expect((await api.post('/v1/device-controls', { body: { paused: true } })).status).toBe(401);
    const bad = await api.post('/v1/device-controls', { token: owner, body: { paused: 'yes' } });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].path).toBe('paused');
    expect((await api.get('/v1/device-controls', { token: owner })).body.data.paused).toBe(false);
  });
});

describe('the pause switch over MCP', () => {
  it('answers a device tool call with 503 device_controls_disabled while paused, and runs it once resumed', async () => {
    await pause(true);
    try {
      const raw = await rawMcp(server.url, { token: agent.token, method: 'tools/call', name: setPower, params: { name: setPower, arguments: { on: true } } });
      expect(raw.status).toBe(503);
      expect(raw.json.error.code).toBe('device_controls_disabled');
      expect(raw.json.error.message).toContain('paused for this workspace by its owner');
      // The fixed broadcast tool too.
      const mcp = await connect(server.url, agent.token, 'modern');
      try {
        const result = await mcp
          .callTool({ name: 'broadcast', arguments: { deviceIds: [lamp.id], capability: 'get_state', arguments: {}, idempotencyKey: 'paused-mcp' } })
          .catch((error: unknown) => error);
        const text = JSON.stringify(result);
        expect(text).toContain('device_controls_disabled');
      } finally {
        await mcp.close();
      }
    } finally {
      await pause(false);
    }
    const mcp = await connect(server.url, agent.token, 'modern');
    try {
      const call = mcp.callTool({ name: setPower, arguments: { on: true } });
      // The device fetches the command the resumed call queued and reports it.
      let command: { id: string } | null = null;
      await expect.poll(async () => (command = (await next(api, lamp)).body.data)).not.toBeNull();
      await api.post(`/v1/device/${lamp.id}/result`, { token: lamp.token, body: { actionId: command!.id, ok: true, result: { on: true } } });
      const result = await call;
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ status: 'succeeded', capability: 'set_power' });
    } finally {
      await mcp.close();
    }
  });

  it('hides device tools and broadcast from tools/list while paused as the kill switch does, lists them again once resumed, and tells a listening agent each time', async () => {
    const names = async () =>
      ((await rawMcp(server.url, { token: agent.token, method: 'tools/list' })).json.result.tools as { name: string }[]).map((t) => t.name);
    // Listed (and kept by the tools/list cache) before the pause.
    expect(await names()).toEqual(expect.arrayContaining([setPower, 'broadcast']));
    expect(await names()).toEqual(expect.arrayContaining([setPower, 'broadcast']));
    const stream = await listen(server.url, agent.token, { toolsListChanged: true });
    await stream.next((m) => m.method === 'notifications/subscriptions/acknowledged');
    try {
      await pause(true);
      try {
        const paused = await names();
        expect(paused).not.toContain(setPower);
        expect(paused).not.toContain('broadcast');
        expect(paused).toContain('list_devices');
        await stream.next((m) => m.method === 'notifications/tools/list_changed', 6000);
      } finally {
        await pause(false);
      }
      expect(await names()).toEqual(expect.arrayContaining([setPower, 'broadcast']));
      await stream.next((m) => m.method === 'notifications/tools/list_changed', 6000);
    } finally {
      stream.close();
    }
  });

  it('a device tool call over the SDK client gets a tool error naming the pause', async () => {
    await pause(true);
    const mcp = await connect(server.url, agent.token, 'legacy');
    try {
      const outcome = await mcp.callTool({ name: setPower, arguments: { on: false } }).then(
        (result) => ({ result }),
        (error: unknown) => ({ error }),
      );
      const text = 'result' in outcome ? JSON.stringify(errorEnvelope(outcome.result as { content: unknown })) : String(outcome.error);
      expect(text).toMatch(/device_controls_disabled|paused for this workspace/);
    } finally {
      await mcp.close();
      await pause(false);
    }
  });
});

describe('the pause switch is persisted', () => {
  it('holds across a restart on the same database', async () => {
    const first = await startTestServer();
    const firstApi = client(first.url);
    const o = await first.ownerToken('pause-restart-owner');
    const l = await attachDevice(firstApi, o);
    const a = await createAgent(firstApi, o, { access: 'act' });
    await grant(firstApi, o, a.principal, l.id, ['get_state']);
    await firstApi.post('/v1/device-controls', { token: o, body: { paused: true } });
    await first.close();
    const again = await startTestServer({ dir: first.dir });
    try {
      const againApi = client(again.url);
      expect((await requestAction(againApi, a.token, l.id, { capability: 'get_state', arguments: {} })).status).toBe(503);
      const resumed = await againApi.post('/v1/device-controls', { token: await again.ownerToken('pause-restart-owner'), body: { paused: false } });
      expect(resumed.body.data.paused).toBe(false);
      expect((await requestAction(againApi, a.token, l.id, { capability: 'get_state', arguments: {} })).status).toBe(201);
    } finally {
      await again.close();
    }
  });
});

describe('the pause switch holds a command even against a racing hand-out', () => {
  it('a pause committed after the check before the claim still keeps the command from the device', async () => {
    const queued = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
    expect(queued.body.data.status).toBe('queued');
    const db = server.service.db;
    const { workspaceId } = (await db.get<{ workspaceId: string }>('SELECT workspace_id AS workspaceId FROM actions WHERE id = ?', [queued.body.data.id]))!;
    // The pause lands between the domain's check and the claim: only the claim's own guard sees it.
    await db.run('UPDATE workspaces SET controls_paused_at = ?, controls_paused_by = ? WHERE id = ?', [Date.now(), 'racing-owner', workspaceId]);
    expect(await claimNext(db, lamp.id, Date.now())).toBeUndefined();
    await db.run('UPDATE workspaces SET controls_paused_at = NULL, controls_paused_by = NULL WHERE id = ?', [workspaceId]);
    expect((await claimNext(db, lamp.id, Date.now()))?.row.id).toBe(queued.body.data.id);
  });
});

describe('the pause switch holds a command that may no longer run', () => {
  const clock = manualClock();
  // The sweep is left to reads: the test moves the clock past the grant's end.
  const held = useTestServer({ clock, env: { EXPIRY_SWEEP_SECONDS: '3600' } });

  it('next neither hands it out nor cancels it while paused; the first next after resuming cancels it with its reason', async () => {
    const { owner: heldOwner, device, agent: heldAgent } = await grantedWorld(held, 'held-owner', { capabilities: ['set_power'], ttlSeconds: 60 });
    const action = await queue(held.api, heldAgent.token, device.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 });
    const read = async () => (await held.api.get(`/v1/actions/${action.id}`, { token: heldOwner })).body.data;
    expect((await held.api.post('/v1/device-controls', { token: heldOwner, body: { paused: true } })).status).toBe(200);
    clock.advance(61_000);
    expect((await next(held.api, device)).body).toEqual({ data: null });
    expect(await read()).toMatchObject({ status: 'queued', cancelReason: null });
    expect((await held.api.post('/v1/device-controls', { token: heldOwner, body: { paused: false } })).status).toBe(200);
    expect((await next(held.api, device)).body).toEqual({ data: null });
    expect(await read()).toMatchObject({ status: 'cancelled', cancelReason: 'grant_expired' });
  });
});

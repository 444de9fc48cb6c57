import { beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { childrenOf, grant, hubManifest, next, queue, report, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { grantedDevice, grantedWorld } from '../helpers/world.js';

const clock = manualClock();
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  ({ owner, device: lamp, agent } = await grantedWorld(server, 'actions-owner', { capabilities: ['get_state', 'set_power', 'set_brightness'] }));
});

const actionCount = async (token = owner) => (await api.get('/v1/actions/export', { token })).body.data.count as number;

describe('POST /v1/devices/{deviceId}/actions: idempotencyKey', () => {
  it('replays the first answer for the same key and body and creates nothing', async () => {
    const body = { capability: 'set_power', arguments: { on: true }, idempotencyKey: 'power-on-1' };
    const first = await requestAction(api, agent.token, lamp.id, body);
    expect(first.status).toBe(201);
    const before = await actionCount();
    clock.advance(1000);
    const again = await requestAction(api, agent.token, lamp.id, { ...body, arguments: { on: true }, ttlSeconds: 30 });
    expect(again.status).toBe(201);
    expect(again.body).toEqual(first.body);
    expect(await actionCount()).toBe(before);
  });

  it('replays the first answer even after the action moved on', async () => {
    const body = { capability: 'get_state', arguments: {}, idempotencyKey: 'state-after-done' };
    const first = await requestAction(api, agent.token, lamp.id, body);
    await next(api, lamp);
    await report(api, lamp, { actionId: first.body.data.id, ok: true });
    const again = await requestAction(api, agent.token, lamp.id, body);
    expect(again.body.data).toEqual(first.body.data);
    expect(again.body.data.status).toBe('queued');
  });

  it('creates one action for concurrent requests with the same key, all answered alike', async () => {
    const before = await actionCount();
    const body = { capability: 'get_state', arguments: {}, idempotencyKey: 'concurrent' };
    const answers = await Promise.all(Array.from({ length: 6 }, () => requestAction(api, agent.token, lamp.id, body)));
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(201));
    expect(new Set(answers.map((a) => a.body.data.id)).size).toBe(1);
    expect(await actionCount()).toBe(before + 1);
  });

  it('answers 409 idempotency_key_reused for the same key with another body, creating nothing', async () => {
    await queue(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 10 }, idempotencyKey: 'level' });
    const before = await actionCount();
    for (const changed of [
      { capability: 'set_brightness', arguments: { level: 11 }, idempotencyKey: 'level' },
      { capability: 'set_brightness', arguments: { level: 10 }, ttlSeconds: 60, idempotencyKey: 'level' },
      { capability: 'get_state', arguments: {}, idempotencyKey: 'level' },
    ]) {
      const res = await requestAction(api, agent.token, lamp.id, changed);
      expect(res.status, JSON.stringify(changed)).toBe(409);
      expect(res.body.error.code).toBe('idempotency_key_reused');
    }
    expect(await actionCount()).toBe(before);
  });

  it('keeps keys per principal: another principal with the same key gets its own action', async () => {
    const other = await createAgent(api, owner, { access: 'act' });
    await grant(api, owner, other.principal, lamp.id, ['get_state']);
    const body = { capability: 'get_state', arguments: {}, idempotencyKey: 'shared-key' };
    const mine = await queue(api, agent.token, lamp.id, body);
    const theirs = await queue(api, other.token, lamp.id, body);
    expect(theirs.id).not.toBe(mine.id);
  });

  it('stores nothing for a refused request: the key works once the grant exists', async () => {
    const newcomer = await createAgent(api, owner, { access: 'act' });
    const body = { capability: 'get_state', arguments: {}, idempotencyKey: 'after-grant' };
    expect((await requestAction(api, newcomer.token, lamp.id, body)).status).toBe(403);
    await grant(api, owner, newcomer.principal, lamp.id, ['get_state']);
    expect((await requestAction(api, newcomer.token, lamp.id, body)).status).toBe(201);
  });

  it('forgets a key after 24 hours: the same key then queues a new action', async () => {
    const body = { capability: 'get_state', arguments: {}, idempotencyKey: 'daily' };
    const first = await queue(api, agent.token, lamp.id, body);
    clock.advance(24 * 60 * 60 * 1000 - 1);
    expect((await queue(api, agent.token, lamp.id, body)).id).toBe(first.id);
    clock.advance(1);
    expect((await queue(api, agent.token, lamp.id, body)).id).not.toBe(first.id);
  });

  it('rejects an empty or over-long key with 400', async () => {
    for (const idempotencyKey of ['', 'k'.repeat(129)]) {
      const res = await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, idempotencyKey });
      expect(res.status).toBe(400);
      expect(res.body.error.issues[0].path).toBe('idempotencyKey');
    }
  });
});

describe('POST /v1/devices/{deviceId}/actions: request checks', () => {
  it('answers 403 grant_required for an unknown device or a function the device does not have, as MCP does', async () => {
    const unknown = await requestAction(api, agent.token, '3f1e2d3c-4b5a-4697-8877-665544332211', { capability: 'get_state', arguments: {} });
    expect(unknown.status).toBe(403);
    expect(unknown.body.error.code).toBe('grant_required');
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'fly', arguments: {} });
    expect(res.status).toBe(403); // no grant can exist for a function the device lacks
    expect(res.body.error.code).toBe('grant_required');
  });

  it('answers 403 to an owner session and to a device credential (agents request actions)', async () => {
    expect((await requestAction(api, owner, lamp.id, { capability: 'get_state', arguments: {} })).status).toBe(403);
    expect((await requestAction(api, lamp.token, lamp.id, { capability: 'get_state', arguments: {} })).status).toBe(403);
  });

  it('answers 400 for arguments that are not an object and for unknown body fields', async () => {
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: [] })).status).toBe(400);
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, color: 'red' })).status).toBe(400);
  });
});

describe('a second workspace', () => {
  it('cannot see or touch grants, actions, functions, devices or commands of the first', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb } = await childrenOf(api, owner, hub.id);
    const [aGrant] = await grant(api, owner, agent.principal, hub.id, ['hub_status']);
    const aAction = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });

    const intruder = await server.ownerToken('intruder');
    const intruderLamp = await attachDevice(api, intruder, { name: 'Intruder lamp' });
    const intruderAgent = await createAgent(api, intruder, { access: 'act', principal: agent.principal }); // same principal name

    // Grants: not listed, not revocable, not creatable on the first workspace's devices.
    expect((await api.get('/v1/grants', { token: intruder })).body.data).toEqual([]);
    expect((await api.post('/v1/grants/revoke', { token: intruder, body: { grantId: aGrant!.id } })).status).toBe(404);
    expect((await api.post('/v1/grants/revoke', { token: intruder, body: { principal: agent.principal, deviceId: hub.id } })).status).toBe(404);
    expect(
      (await api.post('/v1/grants', { token: intruder, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['get_state'] } })).status,
    ).toBe(404);
    expect((await api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: intruder, body: { principal: agent.principal, mode: 'control' } })).status).toBe(
      404,
    );

    // Functions and devices: nothing of the first workspace.
    const fnDevices = (await api.get('/v1/functions', { token: intruder })).body.data.map((f: any) => f.deviceId);
    expect(fnDevices.every((id: string) => id === intruderLamp.id)).toBe(true);
    expect((await api.get('/v1/functions', { token: intruderAgent.token })).body.data).toEqual([]);
    expect((await api.get('/v1/devices', { token: intruderAgent.token })).body.data).toEqual([]);

    // Actions: not requestable, readable, cancellable or listed.
    const refused = await requestAction(api, intruderAgent.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
    // Answered as for an unknown device: nothing says the device exists.
    expect(refused.status).toBe(403);
    expect(refused.body.error).toMatchObject({ code: 'grant_required', message: expect.stringContaining('no device it may call has this id') });
    expect((await api.get(`/v1/actions/${aAction.id}`, { token: intruder })).status).toBe(404);
    expect((await api.get(`/v1/actions/${aAction.id}`, { token: intruderAgent.token })).status).toBe(404);
    expect((await api.post(`/v1/actions/${aAction.id}/cancel`, { token: intruder })).status).toBe(404);
    expect((await api.post(`/v1/actions/${aAction.id}/cancel`, { token: intruderAgent.token })).status).toBe(404);
    expect((await api.get('/v1/actions', { token: intruder })).body.data).toEqual([]);
    expect((await api.get('/v1/actions/export', { token: intruder })).body.data.count).toBe(0);
    const broadcast = await api.post('/v1/broadcasts', {
      token: intruderAgent.token,
      body: { deviceIds: [lamp.id, bulb], capability: 'set_power', arguments: { on: true }, idempotencyKey: 'intrude' },
    });
    expect(broadcast.body.data.results.map((r: any) => r.error?.code)).toEqual(['grant_required', 'grant_required']);

    // Devices: the intruder's device is handed nothing of the first workspace and cannot report on it.
    expect((await next(api, intruderLamp)).body.data).toBeNull();
    expect((await report(api, intruderLamp, { actionId: aAction.id, ok: true })).status).toBe(404);
    expect((await api.post(`/v1/device/${lamp.id}/next`, { token: intruderLamp.token, headers: { 'x-service-workspace': lamp.workspace } })).status).toBe(403);

    expect((await api.get(`/v1/actions/${aAction.id}`, { token: owner })).body.data.status).toBe('queued');
    expect((await api.get(`/v1/grants?principal=${agent.principal}&deviceId=${hub.id}`, { token: owner })).body.data).toHaveLength(1);
  });
});

describe('DEVICE_CONTROLS_ENABLED=false (kill switch)', () => {
  let offOwner: string;
  let offLamp: AttachedDevice;
  let offAgent: { token: string; principal: string };

  const off = useTestServer({ env: { DEVICE_CONTROLS_ENABLED: 'false' } });
  const offApi = off.api;

  beforeAll(async () => {
    offOwner = await off.ownerToken('kill-switch-owner');
    ({ device: offLamp, agent: offAgent } = await grantedDevice(offApi, offOwner, { capabilities: ['get_state', 'set_power'] }));
  });

  it('answers 503 device_controls_disabled to every action request, read functions included', async () => {
    for (const body of [
      { capability: 'set_power', arguments: { on: true } },
      { capability: 'get_state', arguments: {} },
      { capability: 'get_state', arguments: {}, idempotencyKey: 'k' },
    ]) {
      const res = await requestAction(offApi, offAgent.token, offLamp.id, body);
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('device_controls_disabled');
    }
  });

  it('answers 503 device_controls_disabled to broadcasts', async () => {
    const res = await offApi.post('/v1/broadcasts', {
      token: offAgent.token,
      body: { deviceIds: [offLamp.id], capability: 'get_state', arguments: {}, idempotencyKey: 'b' },
    });
    expect(res.status).toBe(503);
    expect(res.body.error.code).toBe('device_controls_disabled');
  });

  it('keeps reads working and says so in health', async () => {
    const health = await offApi.get('/healthz');
    expect(health.status).toBe(200);
    expect(health.body.deviceControlsEnabled).toBe(false);
    expect((await offApi.get('/v1/devices', { token: offAgent.token })).body.data).toHaveLength(1);
    expect((await offApi.get('/v1/functions', { token: offAgent.token })).body.data).toHaveLength(2);
    expect((await offApi.get('/v1/grants', { token: offOwner })).body.data).toHaveLength(2);
    expect((await offApi.get('/v1/actions', { token: offOwner })).body.data).toEqual([]);
    expect((await offApi.get('/v1/actions/export', { token: offOwner })).status).toBe(200);
    expect((await next(offApi, offLamp)).body).toEqual({ data: null });
  });

  it('holds commands queued before the switch was turned off: next hands out nothing, results of fetched ones are kept, queued ones stay cancellable', async () => {
    const before = await startTestServer({});
    const beforeApi = client(before.url);
    const o = await before.ownerToken('switch-restart-owner');
    const { device: l, agent: a } = await grantedDevice(beforeApi, o, { capabilities: ['get_state'] });
    const fetched = await queue(beforeApi, a.token, l.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    const first = await queue(beforeApi, a.token, l.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    const second = await queue(beforeApi, a.token, l.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    expect((await next(beforeApi, l)).body.data.id).toBe(fetched.id);
    await before.close();

    const after = await startTestServer({ dir: before.dir, env: { DEVICE_CONTROLS_ENABLED: 'false' } });
    try {
      const afterApi = client(after.url);
      expect((await requestAction(afterApi, a.token, l.id, { capability: 'get_state', arguments: {} })).status).toBe(503);
      expect((await next(afterApi, l)).body).toEqual({ data: null });
      expect((await report(afterApi, l, { actionId: fetched.id, ok: true })).body.data.status).toBe('succeeded');
      expect((await afterApi.get(`/v1/actions/${first.id}`, { token: a.token })).body.data.status).toBe('queued');
      expect((await afterApi.post(`/v1/actions/${second.id}/cancel`, { token: a.token })).body.data.status).toBe('cancelled');
    } finally {
      await after.close();
    }
  });

  it('reports deviceControlsEnabled true when the switch is on', async () => {
    expect((await api.get('/healthz')).body.deviceControlsEnabled).toBe(true);
  });
});

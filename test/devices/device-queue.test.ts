import { beforeAll, describe, expect, it } from 'vitest';
import { getAction } from '../../src/store/actions.js';
import type { ServiceEvent } from '../../src/domain/event-hub.js';
import { childrenOf, grant, hubManifest, next, queue, report } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

let owner: string;
let agent: { token: string; principal: string };

// A one-second sweep, for the test of expiry without any further call.
const server = useTestServer({ env: { EXPIRY_SWEEP_SECONDS: '1' } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('queue-owner');
  agent = await createAgent(api, owner, { access: 'act' });
});

async function grantedLamp(name = 'Lamp'): Promise<AttachedDevice> {
  const lamp = await attachDevice(api, owner, { name });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power', 'set_brightness']);
  return lamp;
}

describe('POST /v1/device/{deviceId}/next: exactly once', () => {
  it('delivers each of 20 queued actions exactly once to 40 concurrent polls', async () => {
    const lamp = await grantedLamp();
    const queued = [];
    for (let level = 0; level < 20; level++) queued.push((await queue(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level } })).id);

    const polls = await Promise.all(Array.from({ length: 40 }, () => next(api, lamp)));
    expect(polls.every((p) => p.status === 200)).toBe(true);
    const delivered = polls
      .map((p) => p.body.data)
      .filter((d) => d !== null)
      .map((d) => d.id as string);
    expect(delivered).toHaveLength(20);
    expect(new Set(delivered).size).toBe(20);
    expect([...delivered].sort()).toEqual([...queued].sort());
    expect(polls.filter((p) => p.body.data === null)).toHaveLength(20);
    for (const id of queued) expect((await api.get(`/v1/actions/${id}`, { token: owner })).body.data.status).toBe('received');
  });

  it('answers { data: null } when nothing is queued, changing nothing', async () => {
    const lamp = await grantedLamp();
    const res = await next(api, lamp);
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: null });
  });

  it("hands a device only its own commands, never another device's", async () => {
    const a = await grantedLamp('A');
    const b = await grantedLamp('B');
    const forA = await queue(api, agent.token, a.id, { capability: 'get_state', arguments: {} });
    expect((await next(api, b)).body.data).toBeNull();
    expect((await next(api, a)).body.data.id).toBe(forA.id);
  });
});

describe('POST /v1/device/{deviceId}/next: gateways', () => {
  it("returns the gateway's own and its children's commands, naming the child in deviceId", async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb, Cloud: cloud } = await childrenOf(api, owner, hub.id);
    await api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: owner, body: { principal: agent.principal, mode: 'control', includeServices: true } });
    const own = await queue(api, agent.token, hub.id, { capability: 'hub_status', arguments: {} });
    const child = await queue(api, agent.token, bulb!, { capability: 'set_power', arguments: { on: true } });
    const service = await queue(api, agent.token, cloud!, { capability: 'cloud_sync', arguments: {} });

    const handed = [];
    for (let i = 0; i < 3; i++) handed.push((await next(api, hub)).body.data);
    expect(handed.map((d) => [d.id, d.deviceId])).toEqual([
      [own.id, hub.id],
      [child.id, bulb],
      [service.id, cloud],
    ]);
    expect((await next(api, hub)).body.data).toBeNull();

    const done = await report(api, hub, { actionId: child.id, ok: true, result: { on: true } });
    expect(done.status).toBe(200);
    expect(done.body.data).toMatchObject({ deviceId: bulb, status: 'succeeded' });
  });
});

describe('POST /v1/device/{deviceId}/next: x-service-workspace', () => {
  it('answers 400 when the header is missing or not 64 lowercase hex characters', async () => {
    const lamp = await grantedLamp();
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const missing = await api.post(`/v1/device/${lamp.id}/next`, { token: lamp.token });
    expect(missing.status).toBe(400);
    expect(missing.body.error.issues[0].path).toBe('workspace');
    for (const bad of [lamp.workspace.toUpperCase(), lamp.workspace.slice(1), `${lamp.workspace}0`, 'workspace']) {
      const res = await next(api, lamp, bad);
      expect(res.status, bad).toBe(400);
    }
    // Nothing was handed out by the refused polls.
    expect((await next(api, lamp)).body.data).not.toBeNull();
  });

  it("answers 403 to another workspace's routing id", async () => {
    const lamp = await grantedLamp();
    const otherOwner = await server.ownerToken('queue-other-owner');
    const foreign = await attachDevice(api, otherOwner);
    expect(foreign.workspace).not.toBe(lamp.workspace);
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const res = await next(api, lamp, foreign.workspace);
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
    expect((await next(api, lamp)).body.data).not.toBeNull();
  });

  it('answers 401 without a device credential and 403 to an agent token', async () => {
    const lamp = await grantedLamp();
    expect((await api.post(`/v1/device/${lamp.id}/next`, { headers: { 'x-service-workspace': lamp.workspace } })).status).toBe(401);
    expect((await api.post(`/v1/device/${lamp.id}/next`, { token: agent.token, headers: { 'x-service-workspace': lamp.workspace } })).status).toBe(403);
  });
});

describe('expiry sweep', () => {
  it('expires a queued action at its deadline without any further call, and publishes the change', async () => {
    const lamp = await grantedLamp();
    const expired: ServiceEvent[] = [];
    const stop = server.service.events.subscribe((e) => {
      if (e.type === 'action' && e.action.status === 'expired') expired.push(e);
    });
    try {
      const workspaceId = (await api.get('/v1/account', { token: owner })).body.data.workspaceId as string;
      const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 1 });
      // From here on no HTTP request is made: only the sweep (EXPIRY_SWEEP_SECONDS=1) can act.
      // The row is read through the store, which does not expire anything on read.
      const deadline = Date.now() + 5000;
      let row = await getAction(server.service.db, workspaceId, action.id);
      expect(row?.status).toBe('queued');
      while (row?.status !== 'expired' && Date.now() < deadline) {
        await new Promise((r) => setTimeout(r, 100));
        row = await getAction(server.service.db, workspaceId, action.id);
      }
      expect(row).toMatchObject({ status: 'expired', completedAt: action.expiresAt, dispatchedAt: null });
      // The event is published after the sweep's commit, so it can follow the row by a turn of the loop.
      await expect.poll(() => expired.map((e) => e.type === 'action' && e.action.id)).toContain(action.id);
    } finally {
      stop();
    }
  });
});

describe('gateway children left out of a republished manifest', () => {
  it("cancels a detached child's queued commands so the gateway is not handed them", async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb } = await childrenOf(api, owner, hub.id);
    await api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: owner, body: { principal: agent.principal, mode: 'control' } });
    const onBulb = await queue(api, agent.token, bulb!, { capability: 'set_power', arguments: { on: true } });
    const withoutBulb = { ...hubManifest, children: hubManifest.children.filter((c) => c.key !== 'bulb') };
    expect((await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: withoutBulb })).status).toBe(200);
    expect((await next(api, hub)).body.data).toBeNull();
    expect((await api.get(`/v1/actions/${onBulb.id}`, { token: owner })).body.data.status).toBe('cancelled');
  });
});

describe('device revocation', () => {
  it("cancels the device's queued actions and leaves its finished ones alone", async () => {
    const lamp = await grantedLamp();
    const done = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(api, lamp);
    await report(api, lamp, { actionId: done.id, ok: true });
    const pending = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    const state = async (id: string) => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data.status;
    expect(await state(pending.id)).toBe('cancelled');
    expect(await state(done.id)).toBe('succeeded');
    expect((await next(api, lamp)).status).toBe(401);
  });

  it("cancels a revoked child's queued commands so its gateway never receives them", async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb } = await childrenOf(api, owner, hub.id);
    await api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: owner, body: { principal: agent.principal, mode: 'control' } });
    const onBulb = await queue(api, agent.token, bulb!, { capability: 'set_power', arguments: { on: true } });
    const onHub = await queue(api, agent.token, hub.id, { capability: 'hub_status', arguments: {} });
    await api.post(`/v1/devices/${bulb}/revoke`, { token: owner });
    expect((await next(api, hub)).body.data.id).toBe(onHub.id);
    expect((await next(api, hub)).body.data).toBeNull();
    expect((await api.get(`/v1/actions/${onBulb.id}`, { token: owner })).body.data.status).toBe('cancelled');
  });
});

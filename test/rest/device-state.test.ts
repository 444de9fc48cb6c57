import { describe, expect, it } from 'vitest';
import type { Client } from '../helpers/api.js';
import { childrenOf, grant, hubManifest, next, queue, report } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { grantedWorld } from '../helpers/world.js';

const clock = manualClock();
const server = useTestServer({ clock });

const stateSchema = {
  type: 'object',
  properties: { on: { type: 'boolean' }, level: { type: 'integer', minimum: 0, maximum: 100 } },
  required: ['on'],
  additionalProperties: false,
};

/** The lamp, its read functions declaring what they report. */
const thermoLamp = {
  capabilities: [
    { ...lampManifest.capabilities[0], result: stateSchema },
    {
      name: 'get_temp',
      kind: 'read',
      arguments: { type: 'object' },
      result: { type: 'object', properties: { celsius: { type: 'number' } }, required: ['celsius'] },
    },
    ...lampManifest.capabilities.slice(1),
  ],
};

/** An owner and one device of theirs, no agent. */
async function ownedDevice(subject: string, manifest: Record<string, unknown> = lampManifest) {
  const owner = await server.ownerToken(subject);
  return { owner, device: await attachDevice(server.api, owner, { manifest }) };
}

function reportState(api: Client, device: AttachedDevice, body: Record<string, unknown>) {
  return api.post(`/v1/device/${device.id}/state`, { token: device.token, body });
}

function readState(api: Client, token: string, deviceId: string) {
  return api.get(`/v1/devices/${deviceId}/state`, { token });
}

async function actionCount(api: Client, owner: string): Promise<number> {
  const res = await api.get('/v1/actions', { token: owner });
  expect(res.status).toBe(200);
  return (res.body.data as unknown[]).length;
}

describe('result schemas in the manifest', () => {
  it('lists a declared result schema with its function', async () => {
    const owner = await server.ownerToken('state-schema-list');
    const device = await attachDevice(server.api, owner, { manifest: thermoLamp });
    const res = await server.api.get('/v1/devices', { token: owner });
    const listed = (res.body.data as { id: string; capabilities: { name: string; result?: unknown }[] }[]).find((d) => d.id === device.id)!;
    expect(listed.capabilities[0]).toMatchObject({ name: 'get_state', result: stateSchema });
    expect(listed.capabilities[2]).not.toHaveProperty('result');
  });

  it('refuses a result schema under the rules of an argument schema, at its field', async () => {
    const owner = await server.ownerToken('state-schema-refused');
    const device = await attachDevice(server.api, owner, { manifest: null });
    const bad = { capabilities: [{ ...lampManifest.capabilities[0], result: { type: 'string' } }] };
    const res = await server.api.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: bad });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues).toContainEqual(expect.objectContaining({ path: 'capabilities.0.result' }));
  });

  it('refuses a result that does not match, under result, and leaves the action as it was', async () => {
    const { owner, device, agent } = await grantedWorld(server, 'state-result-refused', { capabilities: ['get_state'], device: { manifest: thermoLamp } });
    const action = await queue(server.api, agent.token, device.id, { capability: 'get_state', arguments: {} });
    expect((await next(server.api, device)).status).toBe(200);
    const refused = await report(server.api, device, { actionId: action.id, ok: true, result: { on: 'yes' } });
    expect(refused.status).toBe(400);
    expect(refused.body.error.code).toBe('validation_failed');
    expect(refused.body.error.issues).toContainEqual(expect.objectContaining({ path: 'result.on' }));
    const after = await server.api.get(`/v1/actions/${action.id}`, { token: owner });
    expect(after.body.data.status).toBe('received');
    const accepted = await report(server.api, device, { actionId: action.id, ok: true, result: { on: true, level: 40 } });
    expect(accepted.status).toBe(200);
    expect(accepted.body.data.status).toBe('succeeded');
  });
});

describe('last-known values', () => {
  it('keeps a successful read result as the value, and reading it queues nothing', async () => {
    const { owner, device, agent } = await grantedWorld(server, 'state-from-result', { capabilities: ['get_state', 'set_power'] });
    const action = await queue(server.api, agent.token, device.id, { capability: 'get_state', arguments: {} });
    await next(server.api, device);
    expect((await report(server.api, device, { actionId: action.id, ok: true, result: { on: true } })).status).toBe(200);
    const control = await queue(server.api, agent.token, device.id, { capability: 'set_power', arguments: { on: false } });
    await next(server.api, device);
    expect((await report(server.api, device, { actionId: control.id, ok: true, result: { on: false } })).status).toBe(200);

    const before = await actionCount(server.api, owner);
    const res = await readState(server.api, agent.token, device.id);
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({
      deviceId: device.id,
      online: true,
      lastSeenAt: expect.any(Number),
      values: [{ capability: 'get_state', value: { on: true }, reportedAt: clock.now(), source: 'result', actionId: action.id }],
    });
    expect(await actionCount(server.api, owner)).toBe(before);
  });

  it('stores a report whole, and says how many values it took', async () => {
    const { owner, device } = await ownedDevice('state-report', thermoLamp);
    const res = await reportState(server.api, device, { values: { get_state: { on: true, level: 10 }, get_temp: { celsius: 21.5 } } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toEqual({ accepted: 2 });
    const state = await readState(server.api, owner, device.id);
    expect(state.body.data.values).toEqual([
      { capability: 'get_state', value: { on: true, level: 10 }, reportedAt: clock.now(), source: 'report', actionId: null },
      { capability: 'get_temp', value: { celsius: 21.5 }, reportedAt: clock.now(), source: 'report', actionId: null },
    ]);
  });

  it('refuses a report with one bad entry and stores nothing of it', async () => {
    const { owner, device } = await ownedDevice('state-report-refused', thermoLamp);
    const cases: [Record<string, unknown>, string][] = [
      [{ get_state: { on: true }, get_temp: { celsius: 'warm' } }, 'values.get_temp.celsius'],
      [{ get_state: { on: true }, set_power: { on: true } }, 'values.set_power'],
      [{ get_state: { on: true }, no_such: {} }, 'values.no_such'],
    ];
    for (const [values, path] of cases) {
      const res = await reportState(server.api, device, { values });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.issues).toContainEqual(expect.objectContaining({ path }));
    }
    expect((await readState(server.api, owner, device.id)).body.data.values).toEqual([]);
  });

  it('takes 1 to 64 entries', async () => {
    const { device } = await ownedDevice('state-report-count');
    const empty = await reportState(server.api, device, { values: {} });
    expect(empty.status).toBe(400);
    expect(empty.body.error.issues).toContainEqual(expect.objectContaining({ path: 'values' }));
    const many = Object.fromEntries(Array.from({ length: 65 }, (_, i) => [`f${i}`, {}]));
    const tooMany = await reportState(server.api, device, { values: many });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.issues).toContainEqual(expect.objectContaining({ path: 'values' }));
  });

  it('moves only reportedAt for an equal value, and marks the device seen', async () => {
    const { owner, device } = await ownedDevice('state-report-equal');
    expect((await reportState(server.api, device, { values: { get_state: { on: true } } })).status).toBe(200);
    clock.advance(120_000);
    const offline = await readState(server.api, owner, device.id);
    expect(offline.body.data.online).toBe(false);
    expect((await reportState(server.api, device, { values: { get_state: { on: true } } })).status).toBe(200);
    const state = await readState(server.api, owner, device.id);
    expect(state.body.data).toMatchObject({ online: true, lastSeenAt: clock.now() });
    expect(state.body.data.values).toEqual([{ capability: 'get_state', value: { on: true }, reportedAt: clock.now(), source: 'report', actionId: null }]);
  });

  it("reports for a gateway's child with deviceId, and for no other device", async () => {
    const owner = await server.ownerToken('state-gateway');
    const hub = await attachDevice(server.api, owner, { kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb } = await childrenOf(server.api, owner, hub.id);
    const res = await reportState(server.api, hub, { deviceId: bulb, values: { get_state: { on: false } } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await readState(server.api, owner, bulb!)).body.data.values).toMatchObject([{ capability: 'get_state', value: { on: false } }]);
    const other = await attachDevice(server.api, owner);
    const foreign = await reportState(server.api, hub, { deviceId: other.id, values: { get_state: { on: false } } });
    expect(foreign.status).toBe(404);
    const wrongPath = await server.api.post(`/v1/device/${other.id}/state`, { token: hub.token, body: { values: { get_state: {} } } });
    expect(wrongPath.status).toBe(403);
  });

  it('drops a value with its function when the manifest no longer publishes it', async () => {
    const { owner, device } = await ownedDevice('state-goes-with-function');
    await reportState(server.api, device, { values: { get_state: { on: true } } });
    const republished = await server.api.post(`/v1/device/${device.id}/manifest`, {
      token: device.token,
      body: { capabilities: lampManifest.capabilities.slice(1) },
    });
    expect(republished.status).toBe(200);
    expect((await readState(server.api, owner, device.id)).body.data.values).toEqual([]);
  });

  it("counts values in the workspace's action_bytes", async () => {
    const { owner, device } = await ownedDevice('state-budget');
    const used = async () => (await server.api.get('/v1/usage', { token: owner })).body.data.storage.action_bytes.used as number;
    const before = await used();
    await reportState(server.api, device, { values: { get_state: { on: true, note: 'x'.repeat(100) } } });
    expect(await used()).toBe(before + JSON.stringify({ on: true, note: 'x'.repeat(100) }).length);
  });
});

describe('who reads which values', () => {
  it('shows an agent only the read functions it holds a live grant on, and hides a revoked one at once', async () => {
    const owner = await server.ownerToken('state-visibility');
    const device = await attachDevice(server.api, owner, { manifest: thermoLamp });
    await reportState(server.api, device, { values: { get_state: { on: true }, get_temp: { celsius: 20 } } });
    const reader = await createAgent(server.api, owner, { name: 'reader', access: 'read' });
    const [granted] = await grant(server.api, owner, reader.principal, device.id, ['get_temp']);
    const seen = await readState(server.api, reader.token, device.id);
    expect(seen.status).toBe(200);
    expect((seen.body.data.values as { capability: string }[]).map((v) => v.capability)).toEqual(['get_temp']);
    const all = await readState(server.api, owner, device.id);
    expect((all.body.data.values as { capability: string }[]).map((v) => v.capability)).toEqual(['get_state', 'get_temp']);

    const controller = await createAgent(server.api, owner, { name: 'controller' });
    await grant(server.api, owner, controller.principal, device.id, ['set_power']);
    const onlyControl = await readState(server.api, controller.token, device.id);
    expect(onlyControl.status).toBe(200);
    expect(onlyControl.body.data.values).toEqual([]);

    const stranger = await createAgent(server.api, owner, { name: 'stranger' });
    expect((await readState(server.api, stranger.token, device.id)).status).toBe(404);

    const revoked = await server.api.post('/v1/grants/revoke', { token: owner, body: { grantId: granted!.id } });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect((await readState(server.api, reader.token, device.id)).status).toBe(404);
  });

  it("answers 404 for another workspace's device", async () => {
    const { device } = await ownedDevice('state-owner-a');
    const other = await server.ownerToken('state-owner-b');
    expect((await readState(server.api, other, device.id)).status).toBe(404);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

let owner: string;
let agent: { token: string; principal: string };
let lamps: AttachedDevice[];

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('broadcast-owner');
  agent = await createAgent(api, owner, { access: 'act' });
  lamps = [];
  for (let i = 0; i < 3; i++) {
    const lamp = await attachDevice(api, owner, { name: `Lamp ${i}` });
    await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
    lamps.push(lamp);
  }
});

let keySeq = 0;
const key = () => `bc-${++keySeq}`;
const send = (body: Record<string, unknown>, token = agent.token) => api.post('/v1/broadcasts', { token, body });
const actionCount = async () => (await api.get('/v1/actions/export', { token: owner })).body.data.count as number;

describe('POST /v1/broadcasts', () => {
  it('queues one action per device with the broadcast id, each fetched by its own device (200)', async () => {
    const res = await send({ deviceIds: lamps.map((l) => l.id), capability: 'set_power', arguments: { on: true }, idempotencyKey: key() });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const { id, results } = res.body.data;
    expect(id).toMatch(/^[0-9a-f-]{36}$/);
    expect(results.map((r: any) => [r.deviceId, r.ok])).toEqual(lamps.map((l) => [l.id, true]));
    for (const r of results) {
      expect(r.action).toMatchObject({
        deviceId: r.deviceId,
        capability: 'set_power',
        arguments: { on: true },
        status: 'queued',
        broadcastId: id,
        principal: agent.principal,
      });
      expect(r.action.expiresAt - r.action.createdAt).toBe(30_000); // default ttlSeconds
    }
    for (const [i, lamp] of lamps.entries()) expect((await next(api, lamp)).body.data.id).toBe(results[i].action.id);
  });

  it('accepts at most 20 devices: 21 is 400 at deviceIds, and so is an empty list', async () => {
    const ids = Array.from({ length: 21 }, (_, i) => `3f1e2d3c-4b5a-4697-8877-${String(i).padStart(12, '0')}`);
    const tooMany = await send({ deviceIds: ids, capability: 'get_state', arguments: {}, idempotencyKey: key() });
    expect(tooMany.status).toBe(400);
    expect(tooMany.body.error.issues[0].path).toBe('deviceIds');
    const twenty = await send({ deviceIds: ids.slice(0, 20), capability: 'get_state', arguments: {}, idempotencyKey: key() });
    expect(twenty.status).toBe(200);
    expect(twenty.body.data.results.every((r: any) => r.ok === false && r.error.code === 'grant_required')).toBe(true);
    expect((await send({ deviceIds: [], capability: 'get_state', arguments: {}, idempotencyKey: key() })).status).toBe(400);
  });

  it('rejects a repeated device id with 400 at deviceIds.N instead of queuing twice', async () => {
    const res = await send({ deviceIds: [lamps[0]!.id, lamps[1]!.id, lamps[0]!.id], capability: 'get_state', arguments: {}, idempotencyKey: key() });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ path: 'deviceIds.2', message: 'duplicate device id' }]);
  });

  it('fails per device: an ungranted device and a schema mismatch fail while the others are queued', async () => {
    const ungranted = await attachDevice(api, owner, { name: 'Ungranted' });
    const strict = await attachDevice(api, owner, {
      name: 'Strict',
      manifest: {
        capabilities: [
          {
            name: 'set_power',
            kind: 'control',
            arguments: { type: 'object', properties: { on: { type: 'boolean' }, pin: { type: 'string' } }, required: ['on', 'pin'] },
          },
        ],
      },
    });
    await grant(api, owner, agent.principal, strict.id, ['set_power']);
    const before = await actionCount();
    const res = await send({
      deviceIds: [lamps[0]!.id, ungranted.id, strict.id, lamps[1]!.id],
      capability: 'set_power',
      arguments: { on: false },
      idempotencyKey: key(),
    });
    expect(res.status).toBe(200);
    const [a, b, c, d] = res.body.data.results;
    expect(a).toMatchObject({ deviceId: lamps[0]!.id, ok: true });
    expect(b).toEqual({ deviceId: ungranted.id, ok: false, error: { code: 'grant_required', message: expect.any(String) } });
    expect(c).toEqual({
      deviceId: strict.id,
      ok: false,
      error: { code: 'validation_failed', message: expect.any(String), issues: [{ path: 'arguments.pin', message: expect.any(String) }] },
    });
    expect(d).toMatchObject({ deviceId: lamps[1]!.id, ok: true });
    expect(await actionCount()).toBe(before + 2);
  });

  it('checks the ceiling per device: a read-ceiling agent gets insufficient_access for a control function', async () => {
    const reader = await createAgent(api, owner, { access: 'read' });
    await grant(api, owner, reader.principal, lamps[0]!.id, ['get_state', 'set_power']);
    const control = await send({ deviceIds: [lamps[0]!.id], capability: 'set_power', arguments: { on: true }, idempotencyKey: key() }, reader.token);
    expect(control.body.data.results[0]).toMatchObject({ ok: false, error: { code: 'insufficient_access' } });
    const read = await send({ deviceIds: [lamps[0]!.id], capability: 'get_state', arguments: {}, idempotencyKey: key() }, reader.token);
    expect(read.body.data.results[0].ok).toBe(true);
  });

  it('replays the first answer for the same key and body and creates nothing', async () => {
    const body = { deviceIds: lamps.map((l) => l.id), capability: 'get_state', arguments: {}, idempotencyKey: key() };
    const first = await send(body);
    const before = await actionCount();
    const again = await send({ ...body, ttlSeconds: 30 });
    expect(again.status).toBe(200);
    expect(again.body).toEqual(first.body);
    expect(await actionCount()).toBe(before);
  });

  it('replays a partly failed broadcast as it was, even once the failing device is granted', async () => {
    const late = await attachDevice(api, owner, { name: 'Late' });
    const body = { deviceIds: [lamps[0]!.id, late.id], capability: 'get_state', arguments: {}, idempotencyKey: key() };
    const first = await send(body);
    expect(first.body.data.results.map((r: any) => r.ok)).toEqual([true, false]);
    await grant(api, owner, agent.principal, late.id, ['get_state']);
    expect((await send(body)).body).toEqual(first.body);
  });

  it('answers 409 idempotency_key_reused for the same key with another body', async () => {
    const k = key();
    await send({ deviceIds: [lamps[0]!.id], capability: 'get_state', arguments: {}, idempotencyKey: k });
    const before = await actionCount();
    for (const changed of [
      { deviceIds: [lamps[1]!.id], capability: 'get_state', arguments: {} },
      { deviceIds: [lamps[0]!.id], capability: 'get_state', arguments: {}, ttlSeconds: 31 },
      { deviceIds: [lamps[0]!.id, lamps[1]!.id], capability: 'get_state', arguments: {} },
    ]) {
      const res = await send({ ...changed, idempotencyKey: k });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('idempotency_key_reused');
    }
    // The same key on a single action is another request too.
    const single = await api.post(`/v1/devices/${lamps[0]!.id}/actions`, {
      token: agent.token,
      body: { capability: 'get_state', arguments: {}, idempotencyKey: k },
    });
    expect(single.status).toBe(409);
    expect(await actionCount()).toBe(before);
  });

  it('keeps keys per principal', async () => {
    const other = await createAgent(api, owner, { access: 'act' });
    await grant(api, owner, other.principal, lamps[0]!.id, ['get_state']);
    const body = { deviceIds: [lamps[0]!.id], capability: 'get_state', arguments: {}, idempotencyKey: 'shared' };
    const mine = await send(body);
    const theirs = await send(body, other.token);
    expect(theirs.body.data.id).not.toBe(mine.body.data.id);
  });

  it('takes ttlSeconds from 1 to 300 (default 30) and rejects values outside', async () => {
    for (const ttlSeconds of [1, 300]) {
      const res = await send({ deviceIds: [lamps[2]!.id], capability: 'get_state', arguments: {}, ttlSeconds, idempotencyKey: key() });
      const action = res.body.data.results[0].action;
      expect(action.expiresAt - action.createdAt).toBe(ttlSeconds * 1000);
    }
    for (const ttlSeconds of [0, 301, 2.5]) {
      const res = await send({ deviceIds: [lamps[2]!.id], capability: 'get_state', arguments: {}, ttlSeconds, idempotencyKey: key() });
      expect(res.status, String(ttlSeconds)).toBe(400);
      expect(res.body.error.issues[0].path).toBe('ttlSeconds');
    }
  });

  it('requires idempotencyKey, capability and arguments (400)', async () => {
    const full = { deviceIds: [lamps[0]!.id], capability: 'get_state', arguments: {}, idempotencyKey: key() };
    for (const field of ['idempotencyKey', 'capability', 'arguments'] as const) {
      const { [field]: _omitted, ...rest } = full;
      const res = await send(rest);
      expect(res.status, field).toBe(400);
      expect(res.body.error.issues[0].path).toBe(field);
    }
  });

  it('answers 403 to an owner session and 401 without a credential', async () => {
    const body = { deviceIds: [lamps[0]!.id], capability: 'get_state', arguments: {}, idempotencyKey: key() };
    expect((await send(body, owner)).status).toBe(403);
    expect((await api.post('/v1/broadcasts', { body })).status).toBe(401);
  });
});

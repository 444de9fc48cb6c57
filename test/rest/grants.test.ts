import { beforeAll, describe, expect, it } from 'vitest';
import { grant, queue, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

const clock = manualClock();
let owner: string;

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('grants-owner');
});

const UNKNOWN = '3f1e2d3c-4b5a-4697-8877-665544332211';

describe('POST /v1/grants', () => {
  it('grants one principal functions of one device: one grant per capability, no expiry by default', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post('/v1/grants', { token: owner, body: { principal: 'agent:bot', deviceId: lamp.id, capabilities: ['get_state', 'set_power'] } });
    expect(res.status).toBe(201);
    expect(res.body.data).toHaveLength(2);
    for (const [i, capability] of ['get_state', 'set_power'].entries()) {
      expect(res.body.data[i]).toEqual({
        id: expect.any(String),
        principal: 'agent:bot',
        deviceId: lamp.id,
        capability,
        expiresAt: null,
        expired: false,
        gatewayId: null,
        createdAt: clock.now(),
        approval: 'none',
        functionKind: i === 0 ? 'read' : 'control',
        schemaFingerprint: expect.stringMatching(/^[0-9a-f]{64}$/),
        stale: null,
        conditions: null,
      });
    }
  });

  it('sets expiresAt from ttlSeconds and accepts its bounds 60 and 31536000', async () => {
    const lamp = await attachDevice(api, owner);
    for (const ttlSeconds of [60, 31_536_000]) {
      const [g] = await grant(api, owner, 'agent:ttl', lamp.id, ['get_state'], ttlSeconds);
      expect((g as any).expiresAt).toBe(clock.now() + ttlSeconds * 1000);
    }
    expect((await grant(api, owner, 'agent:ttl', lamp.id, ['get_state'], null))[0]).toMatchObject({ expiresAt: null });
  });

  it('rejects ttlSeconds outside 60..31536000 with 400 at ttlSeconds', async () => {
    const lamp = await attachDevice(api, owner);
    for (const ttlSeconds of [59, 31_536_001, 0, -1, 90.5, '600']) {
      const res = await api.post('/v1/grants', { token: owner, body: { principal: 'p', deviceId: lamp.id, capabilities: ['get_state'], ttlSeconds } });
      expect(res.status, String(ttlSeconds)).toBe(400);
      expect(res.body.error.issues[0].path).toBe('ttlSeconds');
    }
  });

  it('rejects an unknown capability with 400 and an issue at capabilities.N, granting nothing', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post('/v1/grants', {
      token: owner,
      body: { principal: 'agent:x', deviceId: lamp.id, capabilities: ['get_state', 'fly', 'set_power', 'teleport'] },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toEqual(['capabilities.1', 'capabilities.3']);
    expect((await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner })).body.data).toEqual([]);
  });

  it('rejects a principal longer than 128 characters, an empty list and a bad device id', async () => {
    const lamp = await attachDevice(api, owner);
    const long = await api.post('/v1/grants', { token: owner, body: { principal: 'p'.repeat(129), deviceId: lamp.id, capabilities: ['get_state'] } });
    expect(long.status).toBe(400);
    expect(long.body.error.issues[0].path).toBe('principal');
    expect((await api.post('/v1/grants', { token: owner, body: { principal: 'p', deviceId: lamp.id, capabilities: [] } })).status).toBe(400);
    expect((await api.post('/v1/grants', { token: owner, body: { principal: 'p', deviceId: 'lamp', capabilities: ['get_state'] } })).status).toBe(400);
    expect((await api.post('/v1/grants', { token: owner, body: { principal: 'p', deviceId: UNKNOWN, capabilities: ['get_state'] } })).status).toBe(404);
  });

  it('replaces an existing grant for the same function, renewing its expiry (one live grant listed)', async () => {
    const lamp = await attachDevice(api, owner);
    await grant(api, owner, 'agent:renew', lamp.id, ['get_state'], 60);
    const [renewed] = await grant(api, owner, 'agent:renew', lamp.id, ['get_state'], null);
    const listed = (await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner })).body.data;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ id: renewed!.id, expiresAt: null });
  });

  it('answers 403 to an agent token and 401 without a credential', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    const body = { principal: agent.principal, deviceId: lamp.id, capabilities: ['get_state'] };
    expect((await api.post('/v1/grants', { token: agent.token, body })).status).toBe(403);
    expect((await api.post('/v1/grants', { body })).status).toBe(401);
  });
});

describe('GET /v1/grants', () => {
  it('lists grants newest first, filtered by principal, by device, or both', async () => {
    const fresh = await server.ownerToken('grants-list-owner');
    const a = await attachDevice(api, fresh);
    const b = await attachDevice(api, fresh);
    await grant(api, fresh, 'p1', a.id, ['get_state']);
    clock.advance(1);
    await grant(api, fresh, 'p2', a.id, ['set_power']);
    clock.advance(1);
    await grant(api, fresh, 'p1', b.id, ['set_brightness']);
    const pick = (res: any) => res.body.data.map((g: any) => `${g.principal}/${g.deviceId === a.id ? 'a' : 'b'}/${g.capability}`);
    expect(pick(await api.get('/v1/grants', { token: fresh }))).toEqual(['p1/b/set_brightness', 'p2/a/set_power', 'p1/a/get_state']);
    expect(pick(await api.get('/v1/grants?principal=p1', { token: fresh }))).toEqual(['p1/b/set_brightness', 'p1/a/get_state']);
    expect(pick(await api.get(`/v1/grants?deviceId=${a.id}`, { token: fresh }))).toEqual(['p2/a/set_power', 'p1/a/get_state']);
    expect(pick(await api.get(`/v1/grants?principal=p1&deviceId=${a.id}`, { token: fresh }))).toEqual(['p1/a/get_state']);
    expect((await api.get('/v1/grants?deviceId=nope', { token: fresh })).status).toBe(400);
  });

  it('shows an expired grant with expired: true and leaves revoked grants out', async () => {
    const fresh = await server.ownerToken('grants-expired-owner');
    const lamp = await attachDevice(api, fresh);
    await grant(api, fresh, 'p', lamp.id, ['get_state'], 60);
    const [revoked] = await grant(api, fresh, 'p', lamp.id, ['set_power']);
    await api.post('/v1/grants/revoke', { token: fresh, body: { grantId: revoked!.id } });
    clock.advance(60_000);
    const listed = (await api.get('/v1/grants', { token: fresh })).body.data;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ capability: 'get_state', expired: true });
  });
});

describe('POST /v1/grants/revoke', () => {
  it('revokes one grant by id', async () => {
    const lamp = await attachDevice(api, owner);
    const grants = await grant(api, owner, 'agent:rv1', lamp.id, ['get_state', 'set_power']);
    const res = await api.post('/v1/grants/revoke', { token: owner, body: { grantId: grants[0]!.id } });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ revoked: 1 });
    const left = (await api.get(`/v1/grants?principal=agent:rv1`, { token: owner })).body.data;
    expect(left.map((g: any) => g.capability)).toEqual(['set_power']);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: grants[0]!.id } })).body.data).toEqual({ revoked: 0 });
  });

  it('revokes every grant of a principal on a device, or only one capability', async () => {
    const lamp = await attachDevice(api, owner);
    await grant(api, owner, 'agent:rv2', lamp.id, ['get_state', 'set_power', 'set_brightness']);
    await grant(api, owner, 'agent:other', lamp.id, ['get_state']);
    const one = await api.post('/v1/grants/revoke', { token: owner, body: { principal: 'agent:rv2', deviceId: lamp.id, capability: 'set_power' } });
    expect(one.body.data).toEqual({ revoked: 1 });
    const all = await api.post('/v1/grants/revoke', { token: owner, body: { principal: 'agent:rv2', deviceId: lamp.id } });
    expect(all.body.data).toEqual({ revoked: 2 });
    const left = (await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner })).body.data;
    expect(left.map((g: any) => g.principal)).toEqual(['agent:other']);
  });

  it('answers 404 for an unknown grant or device and 400 for a body that is neither shape', async () => {
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: UNKNOWN } })).status).toBe(404);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { principal: 'p', deviceId: UNKNOWN } })).status).toBe(404);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: {} })).status).toBe(400);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: UNKNOWN, principal: 'p' } })).status).toBe(400);
  });
});

describe('POST /v1/grants/{grantId}/update', () => {
  it('changes the approval mode in place: same id, same recorded function, and the next request follows it', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner, { access: 'act' });
    const [given] = await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const before = (await api.get(`/v1/grants?principal=${encodeURIComponent(agent.principal)}`, { token: owner })).body.data[0];
    const res = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { approval: 'owner' } });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ ...before, approval: 'owner' });
    const asked = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(asked.status).toBe(201);
    expect(asked.body.data.status).toBe('awaiting_approval');
    const left = (await api.get(`/v1/grants?principal=${encodeURIComponent(agent.principal)}`, { token: owner })).body.data;
    expect(left.map((g: any) => [g.id, g.approval])).toEqual([[given!.id, 'owner']]);
  });

  it('sets a new expiry from now, or none, and keeps the approval mode when only ttlSeconds is given', async () => {
    const lamp = await attachDevice(api, owner);
    const [given] = await grant(api, owner, 'agent:upd-ttl', lamp.id, ['get_state'], null, 'owner');
    const timed = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { ttlSeconds: 3600 } });
    expect(timed.body.data).toMatchObject({ expiresAt: clock.now() + 3_600_000, approval: 'owner', expired: false });
    const forever = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { ttlSeconds: null, approval: 'none' } });
    expect(forever.body.data).toMatchObject({ expiresAt: null, approval: 'none' });
  });

  it('refuses to change an expired grant (409), at the expiry instant too: granting again is how it is allowed again', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner, { access: 'act' });
    const [given] = await grant(api, owner, agent.principal, lamp.id, ['get_state'], 60);
    clock.advance(60_000);
    for (const body of [{ ttlSeconds: 600 }, { ttlSeconds: null }, { approval: 'owner' }]) {
      const res = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body });
      expect(res.status).toBe(409);
      expect(res.body.error.code).toBe('conflict');
    }
    expect((await api.get(`/v1/grants?principal=${encodeURIComponent(agent.principal)}`, { token: owner })).body.data[0]).toMatchObject({
      expired: true,
      approval: 'none',
      expiresAt: clock.now(),
    });
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} })).status).toBe(403);
    await grant(api, owner, agent.principal, lamp.id, ['get_state'], 600);
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} })).status).toBe(201);
  });

  it('refuses to change a stale grant (409): granting again is how the owner accepts the changed function', async () => {
    const lamp = await attachDevice(api, owner);
    const [given] = await grant(api, owner, 'agent:upd-stale', lamp.id, ['set_power']);
    const changed = {
      capabilities: lampManifest.capabilities.map((c) =>
        c.name === 'set_power' ? { ...c, arguments: { type: 'object', properties: { on: { type: 'string' } } } } : c,
      ),
    };
    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: changed })).status).toBe(200);
    const res = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { approval: 'owner' } });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conflict');
    const now = (await api.get('/v1/grants?principal=agent:upd-stale', { token: owner })).body.data[0];
    expect(now).toMatchObject({ approval: 'none', stale: { reason: 'schema_changed' } });
  });

  it('answers 404 for a revoked or unknown grant and 400 for an empty change or a bad value', async () => {
    const lamp = await attachDevice(api, owner);
    const [given] = await grant(api, owner, 'agent:upd-bad', lamp.id, ['get_state']);
    const empty = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: {} });
    expect(empty.status).toBe(400);
    expect(empty.body.error.issues[0].path).toBe('approval');
    const mode = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { approval: 'sometimes' } });
    expect(mode.status).toBe(400);
    expect(mode.body.error.issues[0].path).toBe('approval');
    const ttl = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { ttlSeconds: 59 } });
    expect(ttl.body.error.issues[0].path).toBe('ttlSeconds');
    expect((await api.post(`/v1/grants/${UNKNOWN}/update`, { token: owner, body: { approval: 'owner' } })).status).toBe(404);
    await api.post('/v1/grants/revoke', { token: owner, body: { grantId: given!.id } });
    expect((await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { approval: 'owner' } })).status).toBe(404);
  });

  it("answers 404 for another workspace's grant", async () => {
    const lamp = await attachDevice(api, owner);
    const [given] = await grant(api, owner, 'agent:upd-ws', lamp.id, ['get_state']);
    const stranger = await server.ownerToken('grants-stranger');
    expect((await api.post(`/v1/grants/${given!.id}/update`, { token: stranger, body: { approval: 'owner' } })).status).toBe(404);
    expect((await api.get('/v1/grants?principal=agent:upd-ws', { token: owner })).body.data[0].approval).toBe('none');
  });
});

describe('live grant checks on action requests', () => {
  it('answers 403 grant_required on the request after the grant is revoked', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner, { access: 'act' });
    const [g] = await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await api.post('/v1/grants/revoke', { token: owner, body: { grantId: g!.id } });
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('grant_required');
  });

  it('answers 403 grant_required once the grant has expired', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['get_state'], ttlSeconds: 60 });
    clock.advance(59_999);
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    clock.advance(1);
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('grant_required');
  });

  it('answers 403 grant_required for a function of the device that was not granted', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['get_state'] });
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('grant_required');
  });

  it("keeps grants per principal: another principal's grant does not help", async () => {
    const lamp = await attachDevice(api, owner);
    const granted = await createAgent(api, owner, { access: 'act' });
    const other = await createAgent(api, owner, { access: 'act' });
    await grant(api, owner, granted.principal, lamp.id, ['get_state']);
    expect((await requestAction(api, other.token, lamp.id, { capability: 'get_state', arguments: {} })).status).toBe(403);
  });

  it('keeps grants across token rotation: a new connection for the same principal may act', async () => {
    const lamp = await attachDevice(api, owner);
    const first = await createAgent(api, owner, { access: 'act', principal: 'agent:rotating' });
    await grant(api, owner, 'agent:rotating', lamp.id, ['get_state']);
    await api.post(`/v1/agent-connections/${(first as any).id}/revoke`, { token: owner });
    const second = await createAgent(api, owner, { access: 'act', principal: 'agent:rotating' });
    await queue(api, second.token, lamp.id, { capability: 'get_state', arguments: {} });
  });

  it('answers 403 once the device is revoked, even with a live grant', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['get_state'] });
    await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(res.status).toBe(403);
  });
});

describe('read ceiling vs function kind', () => {
  it('answers 403 insufficient_access to a read-ceiling agent calling a granted control function', async () => {
    const { device: lamp, agent: reader } = await grantedDevice(api, owner, { agent: { access: 'read' }, capabilities: ['get_state', 'set_power'] });
    const res = await requestAction(api, reader.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('insufficient_access');
  });

  it('lets a read-ceiling agent call a granted read function', async () => {
    const { device: lamp, agent: reader } = await grantedDevice(api, owner, { agent: { access: 'read' }, capabilities: ['get_state'] });
    const action = await queue(api, reader.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(action.status).toBe('queued');
  });
});

describe('GET /v1/devices (agent)', () => {
  it('shows an agent only the devices it has live grants on, with capabilities filtered by grant and ceiling', async () => {
    const fresh = await server.ownerToken('agent-devices-owner');
    // Devices list in attachment order; the hand-moved clock would otherwise give all three one millisecond.
    const granted = await attachDevice(api, fresh, { name: 'granted' });
    clock.advance(1);
    await attachDevice(api, fresh, { name: 'ungranted' });
    clock.advance(1);
    const expiring = await attachDevice(api, fresh, { name: 'expiring' });
    const reader = await createAgent(api, fresh, { access: 'read', principal: 'agent:reader' });
    const actor = await createAgent(api, fresh, { access: 'act', principal: 'agent:actor' });
    for (const p of ['agent:reader', 'agent:actor']) await grant(api, fresh, p, granted.id, ['get_state', 'set_power']);
    await grant(api, fresh, 'agent:actor', expiring.id, ['get_state'], 60);

    const asActor = (await api.get('/v1/devices', { token: actor.token })).body.data;
    expect(asActor.map((d: any) => d.name)).toEqual(['granted', 'expiring']);
    expect(asActor[0].capabilities).toEqual(lampManifest.capabilities.filter((c) => c.name !== 'set_brightness'));

    const asReader = (await api.get('/v1/devices', { token: reader.token })).body.data;
    expect(asReader.map((d: any) => d.name)).toEqual(['granted']);
    expect(asReader[0].capabilities.map((c: any) => c.name)).toEqual(['get_state']);

    clock.advance(60_000);
    expect((await api.get('/v1/devices', { token: actor.token })).body.data.map((d: any) => d.name)).toEqual(['granted']);
  });
});

describe('GET /v1/functions', () => {
  it('lists every function of the workspace for the owner and exactly the callable ones for an agent', async () => {
    const fresh = await server.ownerToken('functions-owner');
    const lamp = await attachDevice(api, fresh, { name: 'Lamp' });
    const revoked = await attachDevice(api, fresh, { name: 'Gone' });
    const reader = await createAgent(api, fresh, { access: 'read' });
    const actor = await createAgent(api, fresh, { access: 'act' });
    await grant(api, fresh, reader.principal, lamp.id, ['get_state', 'set_power']);
    await grant(api, fresh, actor.principal, lamp.id, ['set_power']);
    await grant(api, fresh, actor.principal, revoked.id, ['get_state']);
    await api.post(`/v1/devices/${revoked.id}/revoke`, { token: fresh });

    const all = (await api.get('/v1/functions', { token: fresh })).body.data;
    expect(all.map((f: any) => f.capability)).toEqual(['get_state', 'set_power', 'set_brightness']);
    expect(all[1]).toEqual({
      deviceId: lamp.id,
      deviceName: 'Lamp',
      deviceKind: 'device',
      parentId: null,
      parentName: null,
      capability: 'set_power',
      kind: 'control',
      arguments: lampManifest.capabilities[1]!.arguments,
    });
    const fnNames = async (token: string) => (await api.get('/v1/functions', { token })).body.data.map((f: any) => `${f.deviceName}.${f.capability}`);
    expect(await fnNames(reader.token)).toEqual(['Lamp.get_state']);
    expect(await fnNames(actor.token)).toEqual(['Lamp.set_power']);

    await api.post('/v1/grants/revoke', { token: fresh, body: { principal: actor.principal, deviceId: lamp.id } });
    expect(await fnNames(actor.token)).toEqual([]);
  });

  it('answers 403 to a device credential', async () => {
    const lamp = await attachDevice(api, owner);
    expect((await api.get('/v1/functions', { token: lamp.token })).status).toBe(403);
  });
});

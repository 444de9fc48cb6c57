import { beforeAll, describe, expect, it } from 'vitest';
import { childrenOf, grant, hubManifest, next, queue, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

// docs/reference/rules.md "Access", rules 1 to 6, one by one.

let owner: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('gateway-owner');
});

interface Hub {
  hub: AttachedDevice;
  bulb: string;
  cloud: string;
}

async function attachHub(): Promise<Hub> {
  const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
  const children = await childrenOf(api, owner, hub.id);
  return { hub, bulb: children.Bulb!, cloud: children.Cloud! };
}

function gatewayGrant(deviceId: string, body: Record<string, unknown>) {
  return api.post(`/v1/devices/${deviceId}/gateway-grants`, { token: owner, body });
}

/** The principal's live grants as `device/capability`, device named by role. */
async function granted(principal: string, names: Record<string, string>): Promise<string[]> {
  const res = await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: owner });
  expect(res.status).toBe(200);
  const byId = Object.fromEntries(Object.entries(names).map(([name, id]) => [id, name]));
  return res.body.data.map((g: any) => `${byId[g.deviceId] ?? g.deviceId}/${g.capability}`).sort();
}

const roles = (h: Hub) => ({ hub: h.hub.id, bulb: h.bulb, cloud: h.cloud });

describe('rule 1: read mode grants read functions, control mode all functions', () => {
  it('grants only read functions of the gateway and its children in read mode', async () => {
    const h = await attachHub();
    const res = await gatewayGrant(h.hub.id, { principal: 'agent:r1-read', mode: 'read' });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body).toEqual({ data: { ok: true, devices: 2 } });
    expect(await granted('agent:r1-read', roles(h))).toEqual(['bulb/get_state', 'hub/hub_status']);
  });

  it('grants every function in control mode', async () => {
    const h = await attachHub();
    const res = await gatewayGrant(h.hub.id, { principal: 'agent:r1-control', mode: 'control' });
    expect(res.body.data).toEqual({ ok: true, devices: 2 });
    expect(await granted('agent:r1-control', roles(h))).toEqual(['bulb/get_state', 'bulb/set_power', 'hub/hub_reboot', 'hub/hub_status']);
  });

  it('marks the grants with the gateway and a default expiry of 3600 s', async () => {
    const h = await attachHub();
    await gatewayGrant(h.hub.id, { principal: 'agent:r1-meta', mode: 'read' });
    const list = (await api.get('/v1/grants?principal=agent:r1-meta', { token: owner })).body.data;
    for (const g of list) {
      expect(g.gatewayId).toBe(h.hub.id);
      expect(g.expiresAt - g.createdAt).toBe(3_600_000);
    }
  });
});

describe('rule 2: the gateway and its linked devices', () => {
  it("lets the principal act on the gateway's child, and the gateway's next hands the command over", async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control' });
    const action = await queue(api, agent.token, h.bulb, { capability: 'set_power', arguments: { on: true } });
    const fetched = await next(api, h.hub);
    expect(fetched.body.data).toMatchObject({ id: action.id, deviceId: h.bulb, capability: 'set_power' });
  });
});

describe('rule 3: service devices only with includeServices', () => {
  it('leaves services ungranted by default and grants them with includeServices', async () => {
    const h = await attachHub();
    await gatewayGrant(h.hub.id, { principal: 'agent:r3', mode: 'control', includeServices: false });
    expect((await granted('agent:r3', roles(h))).some((g) => g.startsWith('cloud/'))).toBe(false);
    const res = await gatewayGrant(h.hub.id, { principal: 'agent:r3', mode: 'control', includeServices: true });
    expect(res.body.data).toEqual({ ok: true, devices: 3 });
    expect((await granted('agent:r3', roles(h))).filter((g) => g.startsWith('cloud/'))).toEqual(['cloud/cloud_info', 'cloud/cloud_sync']);
  });
});

describe('rule 4: devices that appear later stay ungranted', () => {
  it('does not grant a child added by republishing the manifest after the grant', async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control', includeServices: true });
    const withFan = {
      ...hubManifest,
      children: [
        ...hubManifest.children,
        { key: 'fan', name: 'Fan', kind: 'device', capabilities: [{ name: 'spin', kind: 'control', arguments: { type: 'object' } }] },
      ],
    };
    expect((await api.post(`/v1/device/${h.hub.id}/manifest`, { token: h.hub.token, body: withFan })).status).toBe(200);
    const fan = (await childrenOf(api, owner, h.hub.id)).Fan!;
    expect((await api.get(`/v1/grants?deviceId=${fan}`, { token: owner })).body.data).toEqual([]);
    const res = await requestAction(api, agent.token, fan, { capability: 'spin', arguments: {} });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('grant_required');
    // The devices that were there keep their grants.
    await queue(api, agent.token, h.bulb, { capability: 'set_power', arguments: { on: true } });
  });
});

describe("rule 5: the call replaces this principal's grants on the gateway and its children", () => {
  it('drops earlier grants that the new mode does not cover, including per-device ones', async () => {
    const h = await attachHub();
    await grant(api, owner, 'agent:r5', h.bulb, ['set_power']); // per-device, before the gateway grant
    await gatewayGrant(h.hub.id, { principal: 'agent:r5', mode: 'control', includeServices: true });
    await gatewayGrant(h.hub.id, { principal: 'agent:r5', mode: 'read' });
    expect(await granted('agent:r5', roles(h))).toEqual(['bulb/get_state', 'hub/hub_status']);
  });

  it('also replaces grants on a child that is detached at the time, so they do not come back with it', async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control' });
    const withoutBulb = { ...hubManifest, children: hubManifest.children.filter((c) => c.key !== 'bulb') };
    expect((await api.post(`/v1/device/${h.hub.id}/manifest`, { token: h.hub.token, body: withoutBulb })).status).toBe(200);
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'read' });
    expect((await api.post(`/v1/device/${h.hub.id}/manifest`, { token: h.hub.token, body: hubManifest })).status).toBe(200);
    expect((await childrenOf(api, owner, h.hub.id)).Bulb).toBe(h.bulb); // same record, same id per key
    const res = await requestAction(api, agent.token, h.bulb, { capability: 'set_power', arguments: { on: true } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('grant_required');
  });

  it("cancels the principal's queued commands on omitted service devices, and only those", async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    const other = await createAgent(api, owner, { access: 'act' });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control', includeServices: true });
    await gatewayGrant(h.hub.id, { principal: other.principal, mode: 'control', includeServices: true });
    const onService = await queue(api, agent.token, h.cloud, { capability: 'cloud_sync', arguments: {} });
    const onBulb = await queue(api, agent.token, h.bulb, { capability: 'set_power', arguments: { on: true } });
    const othersOnService = await queue(api, other.token, h.cloud, { capability: 'cloud_sync', arguments: {} });

    const res = await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control', includeServices: false });
    expect(res.body.data).toEqual({ ok: true, devices: 2 });

    const state = async (id: string) => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data.status;
    expect(await state(onService.id)).toBe('cancelled');
    expect(await state(onBulb.id)).toBe('queued');
    expect(await state(othersOnService.id)).toBe('queued');
    expect((await granted(agent.principal, roles(h))).some((g) => g.startsWith('cloud/'))).toBe(false);
    expect((await granted(other.principal, roles(h))).filter((g) => g.startsWith('cloud/'))).toHaveLength(2);
    const refused = await requestAction(api, agent.token, h.cloud, { capability: 'cloud_info', arguments: {} });
    expect(refused.body.error.code).toBe('grant_required');
  });

  it('publishes the cancellation so waiters learn of it', async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control', includeServices: true });
    const action = await queue(api, agent.token, h.cloud, { capability: 'cloud_sync', arguments: {} });
    const seen: { status: string; targetId: string }[] = [];
    const stop = server.service.events.subscribe((e) => {
      if (e.type === 'action' && e.action.id === action.id) seen.push({ status: e.action.status, targetId: e.targetId });
    });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'read' });
    stop();
    expect(seen).toEqual([{ status: 'cancelled', targetId: h.hub.id }]);
  });
});

describe('rule 6: other gateways are unaffected; per-device grants stay revocable', () => {
  it("leaves the principal's grants on another gateway untouched", async () => {
    const first = await attachHub();
    const second = await attachHub();
    await gatewayGrant(first.hub.id, { principal: 'agent:r6', mode: 'control', includeServices: true });
    await gatewayGrant(second.hub.id, { principal: 'agent:r6', mode: 'control', includeServices: true });
    await gatewayGrant(first.hub.id, { principal: 'agent:r6', mode: 'read' });
    const all = await granted('agent:r6', { ...roles(first), ...{ hub2: second.hub.id, bulb2: second.bulb, cloud2: second.cloud } });
    expect(all.filter((g) => /^(hub2|bulb2|cloud2)\//.test(g))).toEqual([
      'bulb2/get_state',
      'bulb2/set_power',
      'cloud2/cloud_info',
      'cloud2/cloud_sync',
      'hub2/hub_reboot',
      'hub2/hub_status',
    ]);
  });

  it('lets the owner revoke one device function granted by a gateway grant, leaving the rest', async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    await gatewayGrant(h.hub.id, { principal: agent.principal, mode: 'control' });
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: h.bulb, capability: 'set_power' } });
    expect(revoked.body.data).toEqual({ revoked: 1 });
    expect((await requestAction(api, agent.token, h.bulb, { capability: 'set_power', arguments: { on: true } })).status).toBe(403);
    await queue(api, agent.token, h.bulb, { capability: 'get_state', arguments: {} });
    await queue(api, agent.token, h.hub.id, { capability: 'hub_reboot', arguments: {} });
    const byId = (await api.get(`/v1/grants?principal=${agent.principal}&deviceId=${h.hub.id}`, { token: owner })).body.data[0];
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: byId.id } })).body.data).toEqual({ revoked: 1 });
    expect(await granted(agent.principal, roles(h))).toHaveLength(2);
  });
});

describe('ttlSeconds', () => {
  it('null means no expiry', async () => {
    const h = await attachHub();
    await gatewayGrant(h.hub.id, { principal: 'agent:ttl-null', mode: 'read', ttlSeconds: null });
    const list = (await api.get('/v1/grants?principal=agent:ttl-null', { token: owner })).body.data;
    expect(list.length).toBeGreaterThan(0);
    expect(list.every((g: any) => g.expiresAt === null)).toBe(true);
  });

  it('accepts 60 and 31536000 and rejects values outside them with 400', async () => {
    const h = await attachHub();
    for (const ttlSeconds of [60, 31_536_000]) {
      expect((await gatewayGrant(h.hub.id, { principal: 'agent:ttl', mode: 'read', ttlSeconds })).status).toBe(200);
    }
    for (const ttlSeconds of [59, 31_536_001, 0, 1.5]) {
      const res = await gatewayGrant(h.hub.id, { principal: 'agent:ttl', mode: 'read', ttlSeconds });
      expect(res.status, String(ttlSeconds)).toBe(400);
      expect(res.body.error.issues[0].path).toBe('ttlSeconds');
    }
  });
});

describe('validation and access', () => {
  it('answers 400 for a device that is not a gateway, and for a gateway child', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await gatewayGrant(lamp.id, { principal: 'p', mode: 'read' });
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([{ path: 'deviceId', message: 'not a gateway' }]);
    const h = await attachHub();
    expect((await gatewayGrant(h.bulb, { principal: 'p', mode: 'read' })).status).toBe(400);
  });

  it('answers 400 for a bad mode, a missing or too long principal, and 404 for an unknown gateway', async () => {
    const h = await attachHub();
    expect((await gatewayGrant(h.hub.id, { principal: 'p', mode: 'act' })).status).toBe(400);
    expect((await gatewayGrant(h.hub.id, { mode: 'read' })).status).toBe(400);
    expect((await gatewayGrant(h.hub.id, { principal: 'x'.repeat(129), mode: 'read' })).status).toBe(400);
    expect((await gatewayGrant('3f1e2d3c-4b5a-4697-8877-665544332211', { principal: 'p', mode: 'read' })).status).toBe(404);
  });

  it('answers 403 to an agent token', async () => {
    const h = await attachHub();
    const agent = await createAgent(api, owner, { access: 'act' });
    const res = await api.post(`/v1/devices/${h.hub.id}/gateway-grants`, { token: agent.token, body: { principal: agent.principal, mode: 'control' } });
    expect(res.status).toBe(403);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { attachDevice, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

let owner: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('manifest-owner');
});

const objectSchema = { type: 'object', properties: {}, additionalProperties: false };
const read = (name: string) => ({ name, kind: 'read', arguments: objectSchema });
const control = (name: string) => ({ name, kind: 'control', arguments: objectSchema });

async function devices(): Promise<any[]> {
  const res = await api.get('/v1/devices', { token: owner });
  expect(res.status).toBe(200);
  return res.body.data;
}

function issuePaths(body: any): string[] {
  return body.error.issues.map((issue: { path: string; message: string }) => {
    expect(Object.keys(issue).sort()).toEqual(['message', 'path']);
    return issue.path;
  });
}

describe('POST /v1/device/{deviceId}/manifest', () => {
  it("stores a device's capabilities, shown in the owner's device list", async () => {
    const lamp = await attachDevice(api, owner, { manifest: null });
    const res = await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest });
    expect(res.status).toBe(200);
    expect(res.body.data.device.capabilities).toEqual(lampManifest.capabilities);
    expect(res.body.data.children).toEqual([]);
    const record = (await devices()).find((d) => d.id === lamp.id);
    expect(record.capabilities).toEqual(lampManifest.capabilities);
    expect(Object.keys(record).sort()).toEqual(
      ['capabilities', 'createdAt', 'id', 'key', 'kind', 'lastSeenAt', 'name', 'online', 'parentId', 'revoked'].sort(),
    );
  });

  it('replaces the manifest on republish', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: { capabilities: [read('status')] } });
    expect(res.status).toBe(200);
    expect((await devices()).find((d) => d.id === lamp.id).capabilities.map((c: { name: string }) => c.name)).toEqual(['status']);
  });

  it('accepts an empty manifest', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: { capabilities: [] } });
    expect(res.status).toBe(200);
    expect(res.body.data.device.capabilities).toEqual([]);
  });

  it('answers 403 when a device publishes for another device', async () => {
    const mine = await attachDevice(api, owner, { name: 'mine' });
    const other = await attachDevice(api, owner, { name: 'other' });
    const res = await api.post(`/v1/device/${other.id}/manifest`, { token: mine.token, body: { capabilities: [] } });
    expect(res.status).toBe(403);
    expect(res.body.error.code).toBe('forbidden');
    expect((await devices()).find((d) => d.id === other.id).capabilities).toEqual(lampManifest.capabilities);
  });

  it('answers 401 for a revoked device', async () => {
    const lamp = await attachDevice(api, owner);
    await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
    const res = await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest });
    expect(res.status).toBe(401);
  });
});

describe('gateway manifests', () => {
  const hubManifest = {
    capabilities: [read('hub_status')],
    children: [
      { key: 'zigbee:0x01', name: 'Hall light', kind: 'device', capabilities: [read('get_state'), control('set_power')] },
      { key: 'zigbee:0x02', name: 'Porch light', kind: 'device', capabilities: [control('set_power')] },
      { key: 'weather', name: 'Weather service', kind: 'service', capabilities: [read('forecast')] },
    ],
  };

  it('turns children and services into device records with parentId = the gateway', async () => {
    const hub = await attachDevice(api, owner, { kind: 'gateway', name: 'Hub', manifest: null });
    const res = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: hubManifest });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.device).toMatchObject({ id: hub.id, kind: 'gateway', parentId: null, key: null });
    expect(res.body.data.children).toHaveLength(3);
    expect(res.body.data.children.map((c: { key: string }) => c.key)).toEqual(hubManifest.children.map((c) => c.key));

    const children = (await devices()).filter((d) => d.parentId === hub.id);
    expect(children.map((c) => [c.name, c.kind]).sort()).toEqual([
      ['Hall light', 'device'],
      ['Porch light', 'device'],
      ['Weather service', 'service'],
    ]);
    const hall = children.find((c) => c.name === 'Hall light');
    expect(hall.capabilities.map((c: { name: string }) => c.name)).toEqual(['get_state', 'set_power']);
    expect(hall.revoked).toBe(false);
  });

  it('keeps a stable id per key on republish, and a child left out disappears from the list', async () => {
    const hub = await attachDevice(api, owner, { kind: 'gateway', manifest: null });
    const first = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: hubManifest });
    const idOf = (list: any[], name: string) => list.find((c) => c.name === name).id;
    const hallId = idOf(first.body.data.children, 'Hall light');
    const porchId = idOf(first.body.data.children, 'Porch light');

    const renamed = {
      ...hubManifest,
      children: [{ ...hubManifest.children[0]!, name: 'Hallway light' }, hubManifest.children[2]!],
    };
    const second = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: renamed });
    expect(second.status).toBe(200);
    expect(idOf(second.body.data.children, 'Hallway light')).toBe(hallId);
    expect(second.body.data.children).toHaveLength(2);
    const listedIds = (await devices()).map((d) => d.id);
    expect(listedIds).toContain(hallId);
    expect(listedIds).not.toContain(porchId);

    // A key that comes back gets its old record back.
    const third = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: hubManifest });
    expect(idOf(third.body.data.children, 'Porch light')).toBe(porchId);
    expect((await devices()).map((d) => d.id)).toContain(porchId);
  });

  it('removes every child when republished without children', async () => {
    const hub = await attachDevice(api, owner, { kind: 'gateway', manifest: null });
    await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: hubManifest });
    const res = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: { capabilities: [] } });
    expect(res.status).toBe(200);
    expect(res.body.data.children).toEqual([]);
    expect((await devices()).filter((d) => d.parentId === hub.id)).toEqual([]);
  });

  it('gives the same key under two gateways two different devices', async () => {
    const a = await attachDevice(api, owner, { kind: 'gateway', manifest: null });
    const b = await attachDevice(api, owner, { kind: 'gateway', manifest: null });
    const ra = await api.post(`/v1/device/${a.id}/manifest`, { token: a.token, body: hubManifest });
    const rb = await api.post(`/v1/device/${b.id}/manifest`, { token: b.token, body: hubManifest });
    const idsA = ra.body.data.children.map((c: { id: string }) => c.id);
    const idsB = rb.body.data.children.map((c: { id: string }) => c.id);
    expect(idsA.filter((id: string) => idsB.includes(id))).toEqual([]);
  });
});

describe('manifest validation', () => {
  let lamp: { id: string; token: string };
  let hub: { id: string; token: string };
  beforeAll(async () => {
    lamp = await attachDevice(api, owner, { name: 'validation lamp' });
    hub = await attachDevice(api, owner, { kind: 'gateway', name: 'validation hub', manifest: null });
  });

  const cases: [string, 'lamp' | 'hub', unknown, string][] = [
    ['duplicate capability names', 'lamp', { capabilities: [read('a'), control('a')] }, 'capabilities.1.name'],
    ['a capability name that breaks the pattern', 'lamp', { capabilities: [read('Bad Name')] }, 'capabilities.0.name'],
    ['a capability name of 65 characters', 'lamp', { capabilities: [read(`a${'b'.repeat(64)}`)] }, 'capabilities.0.name'],
    ['a capability kind other than read or control', 'lamp', { capabilities: [{ ...read('a'), kind: 'write' }] }, 'capabilities.0.kind'],
    ['arguments that are not an object schema', 'lamp', { capabilities: [{ ...read('a'), arguments: { type: 'string' } }] }, 'capabilities.0.arguments'],
    [
      'arguments that are not a valid JSON Schema',
      'lamp',
      { capabilities: [{ ...read('a'), arguments: { type: 'object', properties: { x: { type: 'no-such-type' } } } }] },
      'capabilities.0.arguments',
    ],
    ['a missing capabilities list', 'lamp', { children: [] }, 'capabilities'],
    [
      'children on a device that is not a gateway',
      'lamp',
      { capabilities: [], children: [{ key: 'k', name: 'c', kind: 'device', capabilities: [] }] },
      'children',
    ],
    [
      'duplicate child keys',
      'hub',
      {
        capabilities: [],
        children: [
          { key: 'k', name: 'one', kind: 'device', capabilities: [] },
          { key: 'k', name: 'two', kind: 'device', capabilities: [] },
        ],
      },
      'children.1.key',
    ],
    [
      'duplicate capability names within a child',
      'hub',
      { capabilities: [], children: [{ key: 'k', name: 'c', kind: 'device', capabilities: [read('x'), read('x')] }] },
      'children.0.capabilities.1.name',
    ],
    [
      'an invalid JSON Schema in a child',
      'hub',
      { capabilities: [], children: [{ key: 'k', name: 'c', kind: 'device', capabilities: [{ ...read('x'), arguments: { type: 'object', required: 'x' } }] }] },
      'children.0.capabilities.0.arguments',
    ],
    ['a child kind "gateway"', 'hub', { capabilities: [], children: [{ key: 'k', name: 'c', kind: 'gateway', capabilities: [] }] }, 'children.0.kind'],
    ['an empty child key', 'hub', { capabilities: [], children: [{ key: '', name: 'c', kind: 'device', capabilities: [] }] }, 'children.0.key'],
    ['an unknown field in a capability', 'lamp', { capabilities: [{ ...read('a'), extra: true }] }, 'capabilities.0.extra'],
  ];

  it.each(cases)('rejects %s with 400 and an issue at its path', async (_label, who, body, path) => {
    const device = who === 'lamp' ? lamp : hub;
    const res = await api.post(`/v1/device/${device.id}/manifest`, { token: device.token, body });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(issuePaths(res.body)).toContain(path);
  });

  it('leaves the stored manifest untouched when a republish is rejected', async () => {
    await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: { capabilities: [read('a'), read('a')] } });
    expect((await devices()).find((d) => d.id === lamp.id).capabilities).toEqual(lampManifest.capabilities);
  });

  it('reports every problem at once', async () => {
    const res = await api.post(`/v1/device/${hub.id}/manifest`, {
      token: hub.token,
      body: {
        capabilities: [read('a'), read('a')],
        children: [
          { key: 'k', name: 'one', kind: 'device', capabilities: [{ ...read('x'), arguments: { type: 'array' } }] },
          { key: 'k', name: 'two', kind: 'device', capabilities: [] },
        ],
      },
    });
    expect(res.status).toBe(400);
    expect(issuePaths(res.body).sort()).toEqual(['capabilities.1.name', 'children.0.capabilities.0.arguments', 'children.1.key']);
  });
});

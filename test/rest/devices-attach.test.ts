import { beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../helpers/clock.js';
import { createSetupToken, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const DEVICE_TOKEN = /^dfc_device_[A-Za-z0-9_-]{43}$/;

const clock = manualClock();
let owner: string;

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('attach-owner');
});

async function listed(id: string) {
  const res = await api.get('/v1/devices', { token: owner });
  return res.body.data.find((d: { id: string }) => d.id === id);
}

describe('POST /v1/sdk/devices', () => {
  it('attaches a device: 201 with the device record, its own credential and the routing id', async () => {
    const setup = await createSetupToken(api, owner);
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'Desk lamp' } });
    expect(res.status).toBe(201);
    expect(Object.keys(res.body.data).sort()).toEqual(['device', 'token', 'workspace']);
    const account = await api.get('/v1/account', { token: owner });
    expect(res.body.data).toEqual({
      device: {
        id: expect.stringMatching(UUID_V4),
        name: 'Desk lamp',
        kind: 'device',
        parentId: null,
        key: null,
        online: false,
        lastSeenAt: null,
        revoked: false,
        createdAt: clock.now(),
        capabilities: [],
      },
      token: expect.stringMatching(DEVICE_TOKEN),
      workspace: account.body.data.routingId,
    });
    expect(res.body.data.workspace).toMatch(/^[a-f0-9]{64}$/);
    expect(await listed(res.body.data.device.id)).toEqual(res.body.data.device);
  });

  it('attaches a gateway when kind is "gateway"', async () => {
    const setup = await createSetupToken(api, owner);
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'Hub', kind: 'gateway' } });
    expect(res.status).toBe(201);
    expect(res.body.data.device.kind).toBe('gateway');
  });

  it('gives the device a credential that works on device endpoints', async () => {
    const setup = await createSetupToken(api, owner);
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'Lamp' } });
    const published = await api.post(`/v1/device/${res.body.data.device.id}/manifest`, { token: res.body.data.token, body: lampManifest });
    expect(published.status).toBe(200);
  });

  const accepted: [string, Record<string, unknown>][] = [
    ['a name of 1 character', { name: 'x' }],
    ['a name of 64 characters', { name: 'n'.repeat(64) }],
  ];
  it.each(accepted)('accepts %s', async (_label, body) => {
    const setup = await createSetupToken(api, owner);
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body })).status).toBe(201);
  });

  const rejected: [string, Record<string, unknown>, string][] = [
    ['an empty name', { name: '' }, 'name'],
    ['a name of 65 characters', { name: 'n'.repeat(65) }, 'name'],
    ['kind "service" (only gateways create services)', { name: 'x', kind: 'service' }, 'kind'],
    ['an unknown field', { name: 'x', deviceId: 'abc' }, 'deviceId'],
  ];
  it.each(rejected)('rejects %s with 400 without using up the token', async (_label, body, path) => {
    const setup = await createSetupToken(api, owner);
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toContain(path);
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'after' } })).status).toBe(201);
  });
});

describe('setup token deviceLimit', () => {
  it('lets a limit-3 token attach exactly 3 devices, then answers 403 device_limit_reached', async () => {
    const setup = await createSetupToken(api, owner, { name: 'three', deviceLimit: 3 });
    for (let i = 0; i < 3; i++) {
      expect((await api.post('/v1/sdk/devices', { token: setup.token, body: { name: `d${i}` } })).status).toBe(201);
    }
    const fourth = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'd3' } });
    expect(fourth.status).toBe(403);
    expect(fourth.body.error.code).toBe('device_limit_reached');
    const list = await api.get('/v1/device-setup-tokens', { token: owner });
    expect(list.body.data.find((c: { id: string }) => c.id === setup.id)).toMatchObject({
      attachedDeviceCount: 3,
      deviceLimit: 3,
      canAttach: false,
      revoked: false,
    });
  });

  it('lets exactly one of two concurrent attaches on a limit-1 token win', async () => {
    const setup = await createSetupToken(api, owner, { name: 'race' });
    const before = (await api.get('/v1/devices', { token: owner })).body.data.length;
    const results = await Promise.all([
      api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'racer A' } }),
      api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'racer B' } }),
    ]);
    expect(results.map((r) => r.status).sort()).toEqual([201, 403]);
    expect(results.find((r) => r.status === 403)!.body.error.code).toBe('device_limit_reached');
    expect((await api.get('/v1/devices', { token: owner })).body.data.length).toBe(before + 1);
  });

  it('lets exactly five of ten concurrent attaches on a limit-5 token win', async () => {
    const setup = await createSetupToken(api, owner, { name: 'crowd', deviceLimit: 5 });
    const results = await Promise.all(Array.from({ length: 10 }, (_, i) => api.post('/v1/sdk/devices', { token: setup.token, body: { name: `crowd ${i}` } })));
    expect(results.filter((r) => r.status === 201)).toHaveLength(5);
    expect(results.filter((r) => r.status === 403)).toHaveLength(5);
  });
});

describe('setup token expiry and revocation on attach', () => {
  it('attaches one millisecond before expiresAt and answers 401 at expiresAt', async () => {
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'expiring', deviceLimit: 2 } });
    const { token, expiresAt } = setup.body.data;
    try {
      clock.set(expiresAt - 1);
      expect((await api.post('/v1/sdk/devices', { token, body: { name: 'just in time' } })).status).toBe(201);
      clock.set(expiresAt);
      const late = await api.post('/v1/sdk/devices', { token, body: { name: 'too late' } });
      expect(late.status).toBe(401);
      expect(late.body.error.code).toBe('unauthorized');
    } finally {
      clock.set(Date.now());
    }
  });

  it('answers 401 on the next attach after the setup token is revoked', async () => {
    const setup = await createSetupToken(api, owner, { name: 'revoked', deviceLimit: 5 });
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'first' } })).status).toBe(201);
    await api.post(`/v1/device-setup-tokens/${setup.id}/revoke`, { token: owner });
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'second' } });
    expect(res.status).toBe(401);
  });

  it('does not detach devices or revoke their credentials when the setup token is revoked', async () => {
    const setup = await createSetupToken(api, owner, { name: 'parent' });
    const attached = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'survivor' } });
    const { device, token } = attached.body.data;
    await api.post(`/v1/device-setup-tokens/${setup.id}/revoke`, { token: owner });

    expect(await listed(device.id)).toMatchObject({ id: device.id, revoked: false });
    const published = await api.post(`/v1/device/${device.id}/manifest`, { token, body: lampManifest });
    expect(published.status).toBe(200);
  });

  it('does not detach devices when the setup token expires', async () => {
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'expires', ttlSeconds: 60 } });
    const attached = await api.post('/v1/sdk/devices', { token: setup.body.data.token, body: { name: 'outlives' } });
    try {
      clock.set(setup.body.data.expiresAt + 1);
      const { device, token } = attached.body.data;
      expect((await api.post(`/v1/device/${device.id}/manifest`, { token, body: lampManifest })).status).toBe(200);
      expect((await listed(device.id)).revoked).toBe(false);
    } finally {
      clock.set(Date.now());
    }
  });
});

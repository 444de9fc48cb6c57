import { beforeAll, describe, expect, it } from 'vitest';
import { attachDevice, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

let owner: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('devices-owner');
});

const hubManifest = {
  capabilities: [],
  children: [
    { key: 'a', name: 'Child A', kind: 'device', capabilities: [] },
    { key: 'svc', name: 'Service', kind: 'service', capabilities: [] },
  ],
};

describe('GET /v1/devices (owner)', () => {
  it('lists every device of the workspace in attachment order', async () => {
    const fresh = await server.ownerToken('devices-list-owner');
    expect((await api.get('/v1/devices', { token: fresh })).body).toEqual({ data: [] });
    const first = await attachDevice(api, fresh, { name: 'first' });
    const second = await attachDevice(api, fresh, { name: 'second' });
    const res = await api.get('/v1/devices', { token: fresh });
    expect(res.status).toBe(200);
    expect(res.body.data.map((d: { id: string }) => d.id)).toEqual([first.id, second.id]);
  });

  it('rejects unknown query parameters with 400', async () => {
    const res = await api.get('/v1/devices?color=red', { token: owner });
    expect(res.status).toBe(400);
  });
});

describe('POST /v1/devices/{deviceId}/revoke', () => {
  it('revokes a device: 200 with revoked true, and its credential answers 401 on the next call', async () => {
    const lamp = await attachDevice(api, owner);
    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest })).status).toBe(200);

    const res = await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: lamp.id, revoked: true, online: false });

    const next = await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest });
    expect(next.status).toBe(401);
    expect(next.body.error.code).toBe('unauthorized');
    const listed = (await api.get('/v1/devices', { token: owner })).body.data.find((d: { id: string }) => d.id === lamp.id);
    expect(listed.revoked).toBe(true);
  });

  it('revokes a gateway together with its children and services', async () => {
    const hub = await attachDevice(api, owner, { kind: 'gateway', manifest: hubManifest });
    await api.post(`/v1/devices/${hub.id}/revoke`, { token: owner });
    const list = (await api.get('/v1/devices', { token: owner })).body.data;
    const family = list.filter((d: { id: string; parentId: string | null }) => d.id === hub.id || d.parentId === hub.id);
    expect(family).toHaveLength(3);
    expect(family.every((d: { revoked: boolean }) => d.revoked)).toBe(true);
  });

  it('revokes one child without touching its gateway or siblings', async () => {
    const hub = await attachDevice(api, owner, { kind: 'gateway', manifest: hubManifest });
    const children = (await api.get('/v1/devices', { token: owner })).body.data.filter((d: { parentId: string }) => d.parentId === hub.id);
    const target = children.find((c: { name: string }) => c.name === 'Child A');
    const res = await api.post(`/v1/devices/${target.id}/revoke`, { token: owner });
    expect(res.status).toBe(200);
    const list = (await api.get('/v1/devices', { token: owner })).body.data;
    expect(list.find((d: { id: string }) => d.id === hub.id).revoked).toBe(false);
    expect(list.find((d: { name: string; parentId: string }) => d.parentId === hub.id && d.name === 'Service').revoked).toBe(false);
    expect((await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: hubManifest })).status).toBe(200);
  });

  it('is idempotent: revoking a revoked device answers it again', async () => {
    const lamp = await attachDevice(api, owner);
    const once = await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
    const twice = await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
    expect(twice.status).toBe(200);
    expect(twice.body.data).toEqual(once.body.data);
  });

  it('answers 404 for an unknown device and 400 for an id that is not a uuid', async () => {
    expect((await api.post('/v1/devices/3f1e2d3c-4b5a-4697-8877-665544332211/revoke', { token: owner })).status).toBe(404);
    const bad = await api.post('/v1/devices/lamp/revoke', { token: owner });
    expect(bad.status).toBe(400);
    expect(bad.body.error.issues[0].path).toBe('deviceId');
  });

  it('answers 403 to the device itself (a device cannot revoke devices)', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post(`/v1/devices/${lamp.id}/revoke`, { token: lamp.token });
    expect(res.status).toBe(403);
    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest })).status).toBe(200);
  });
});

describe('GET /v1/account', () => {
  it("returns the owner's workspace with its routing id and usage counts", async () => {
    const fresh = await server.ownerToken('account-owner', { workspace: 'acme' });
    const empty = await api.get('/v1/account', { token: fresh });
    expect(empty.status).toBe(200);
    expect(empty.body.data).toEqual({
      workspaceId: expect.any(String),
      workspaceKey: 'acme',
      routingId: expect.stringMatching(/^[a-f0-9]{64}$/),
      subject: 'account-owner',
      createdAt: expect.any(Number),
      usage: { devices: 0, agentConnections: 0, setupTokens: 0 },
    });

    const hub = await attachDevice(api, fresh, { kind: 'gateway', manifest: hubManifest }); // 1 setup token, 3 devices
    await api.post('/v1/agent-connections', { token: fresh, body: { name: 'bot' } });
    const lamp = await attachDevice(api, fresh); // 2 setup tokens, 4 devices
    await api.post(`/v1/devices/${lamp.id}/revoke`, { token: fresh });
    const res = await api.get('/v1/account', { token: fresh });
    expect(res.body.data.usage).toEqual({ devices: 3, agentConnections: 1, setupTokens: 2 });
    expect(res.body.data.workspaceId).toBe(empty.body.data.workspaceId);
    expect(hub.workspace).toBe(empty.body.data.routingId);
  });
});

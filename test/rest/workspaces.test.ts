import { beforeAll, describe, expect, it } from 'vitest';
import { attachDevice, createAgent, createSetupToken, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/** Workspace A holds tokens and devices; workspace B must neither see nor touch them. */
let ownerA: string;
let ownerB: string;
let setupA: { id: string; token: string };
let agentA: { id: string; token: string };
let deviceA: AttachedDevice;
let gatewayA: AttachedDevice;
let deviceB: AttachedDevice;

const ids = (res: { body: { data: { id: string }[] } }) => res.body.data.map((entry) => entry.id);

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  ownerA = await server.ownerToken('owner-a', { workspace: 'workspace-a' });
  ownerB = await server.ownerToken('owner-b', { workspace: 'workspace-b' });
  setupA = await createSetupToken(api, ownerA, { name: 'A setup', deviceLimit: 5 });
  agentA = await createAgent(api, ownerA);
  deviceA = await attachDevice(api, ownerA);
  gatewayA = await attachDevice(api, ownerA, {
    kind: 'gateway',
    manifest: { capabilities: [], children: [{ key: 'c', name: 'A child', kind: 'device', capabilities: [] }] },
  });
  deviceB = await attachDevice(api, ownerB);
  await createAgent(api, ownerB);
});

describe('a second workspace cannot see the first one', () => {
  it('has its own account, routing id and usage', async () => {
    const a = await api.get('/v1/account', { token: ownerA });
    const b = await api.get('/v1/account', { token: ownerB });
    expect(b.body.data.workspaceId).not.toBe(a.body.data.workspaceId);
    expect(b.body.data.routingId).not.toBe(a.body.data.routingId);
    expect(deviceB.workspace).toBe(b.body.data.routingId);
    expect(deviceA.workspace).toBe(a.body.data.routingId);
    expect(b.body.data.usage).toEqual({ devices: 1, agentConnections: 1, setupTokens: 1 });
  });

  it("does not list the first workspace's setup tokens (either family)", async () => {
    for (const family of ['/v1/device-setup-tokens', '/v1/sdk-tokens']) {
      const res = await api.get(family, { token: ownerB });
      expect(ids(res)).not.toContain(setupA.id);
      expect(res.body.data).toHaveLength(1);
    }
  });

  it("does not list the first workspace's agent connections", async () => {
    const res = await api.get('/v1/agent-connections', { token: ownerB });
    expect(ids(res)).not.toContain(agentA.id);
    expect(res.body.data).toHaveLength(1);
  });

  it("does not list the first workspace's devices or gateway children", async () => {
    const res = await api.get('/v1/devices', { token: ownerB });
    expect(ids(res)).toEqual([deviceB.id]);
  });
});

describe('a second workspace cannot touch the first one', () => {
  it("answers 404 when revoking the first workspace's setup token, which keeps working", async () => {
    for (const family of ['/v1/device-setup-tokens', '/v1/sdk-tokens']) {
      const res = await api.post(`${family}/${setupA.id}/revoke`, { token: ownerB });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    }
    expect((await api.post('/v1/sdk/devices', { token: setupA.token, body: { name: 'still A' } })).status).toBe(201);
  });

  it("answers 404 when revoking the first workspace's agent connection, which keeps working", async () => {
    const res = await api.post(`/v1/agent-connections/${agentA.id}/revoke`, { token: ownerB });
    expect(res.status).toBe(404);
    expect((await api.get('/v1/devices', { token: agentA.token })).status).toBe(200);
  });

  it("answers 404 when revoking the first workspace's device or gateway child, which keep working", async () => {
    expect((await api.post(`/v1/devices/${deviceA.id}/revoke`, { token: ownerB })).status).toBe(404);
    expect((await api.post(`/v1/devices/${gatewayA.id}/revoke`, { token: ownerB })).status).toBe(404);
    const child = (await api.get('/v1/devices', { token: ownerA })).body.data.find((d: { parentId: string }) => d.parentId === gatewayA.id);
    expect((await api.post(`/v1/devices/${child.id}/revoke`, { token: ownerB })).status).toBe(404);

    const listA = (await api.get('/v1/devices', { token: ownerA })).body.data;
    expect(listA.every((d: { revoked: boolean }) => !d.revoked)).toBe(true);
    expect((await api.post(`/v1/device/${deviceA.id}/manifest`, { token: deviceA.token, body: lampManifest })).status).toBe(200);
  });

  it('answers 403 when a device of one workspace publishes for a device of the other', async () => {
    const res = await api.post(`/v1/device/${deviceA.id}/manifest`, { token: deviceB.token, body: { capabilities: [] } });
    expect(res.status).toBe(403);
    const a = (await api.get('/v1/devices', { token: ownerA })).body.data.find((d: { id: string }) => d.id === deviceA.id);
    expect(a.capabilities).toEqual(lampManifest.capabilities);
  });

  it("attaches devices with a setup token only into the token's own workspace", async () => {
    const attached = await api.post('/v1/sdk/devices', { token: setupA.token, body: { name: 'lands in A' } });
    const id = attached.body.data.device.id;
    expect(ids(await api.get('/v1/devices', { token: ownerA }))).toContain(id);
    expect(ids(await api.get('/v1/devices', { token: ownerB }))).not.toContain(id);
  });
});

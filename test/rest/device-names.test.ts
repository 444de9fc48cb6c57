import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { attachDevice, createSetupToken, lampManifest } from '../helpers/fixtures.js';
import { openSse, type SseStream } from '../helpers/sse.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The owner names devices (docs/reference/rules.md "Devices"): POST /v1/devices/{deviceId}/rename
 * with a name of 1 to 64 characters, kept over any name a gateway's manifest publishes later; a
 * device attached without a name takes its setup token's.
 */

const server = useTestServer();
let api: Client;
let owner: string;

beforeAll(async () => {
  api = client(server.url);
  owner = await server.ownerToken('device-names-owner');
});

const devices = async () =>
  (await api.get('/v1/devices', { token: owner })).body.data as { id: string; name: string; parentId: string | null; childKey?: string | null }[];

const gatewayManifest = (names: { hall: string; porch: string }) => ({
  capabilities: [],
  children: [
    { key: 'hall', name: names.hall, kind: 'device', capabilities: lampManifest.capabilities },
    { key: 'porch', name: names.porch, kind: 'device', capabilities: lampManifest.capabilities },
  ],
});

describe('POST /v1/devices/{deviceId}/rename', () => {
  let events: SseStream;
  beforeAll(async () => {
    events = await openSse(`${server.url}/v1/events`, { token: owner });
  });
  afterAll(() => events.close());

  it('renames the device: 200 with the Device, and the list shows the new name', async () => {
    const lamp = await attachDevice(api, owner, { name: 'Lamp' });
    const res = await api.post(`/v1/devices/${lamp.id}/rename`, { token: owner, body: { name: 'Desk lamp' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ id: lamp.id, name: 'Desk lamp' });
    expect((await devices()).find((d) => d.id === lamp.id)!.name).toBe('Desk lamp');
    // The device republishing its manifest, as each start does, keeps the owner's name.
    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest })).status).toBe(200);
    expect((await devices()).find((d) => d.id === lamp.id)!.name).toBe('Desk lamp');
  });

  it('journals device.renamed with the new name', async () => {
    const lamp = await attachDevice(api, owner, { name: 'Spare lamp' });
    expect((await api.post(`/v1/devices/${lamp.id}/rename`, { token: owner, body: { name: 'Guest lamp' } })).status).toBe(200);
    const event = await events.nextWhere(
      (e) => e.event === 'device.renamed' && (JSON.parse(e.data) as { data: { device: { id: string } } }).data.device.id === lamp.id,
    );
    expect(JSON.parse(event.data)).toMatchObject({
      type: 'device.renamed',
      data: { device: { id: lamp.id, name: 'Guest lamp', kind: 'device', parentId: null } },
    });
  });

  it("keeps the owner's name for a gateway's child over the names its manifests publish", async () => {
    const gateway = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: gatewayManifest({ hall: 'Hall light', porch: 'Porch light' }) });
    const children = (await devices()).filter((d) => d.parentId === gateway.id);
    const hall = children.find((d) => d.name === 'Hall light')!;
    const porch = children.find((d) => d.name === 'Porch light')!;
    expect((await api.post(`/v1/devices/${hall.id}/rename`, { token: owner, body: { name: 'Landing light' } })).status).toBe(200);

    const republished = await api.post(`/v1/device/${gateway.id}/manifest`, {
      token: gateway.token,
      body: gatewayManifest({ hall: 'Hall lamp', porch: 'Front door light' }),
    });
    expect(republished.status, JSON.stringify(republished.body)).toBe(200);
    const after = await devices();
    expect(after.find((d) => d.id === hall.id)!.name).toBe('Landing light');
    // A child the owner did not rename follows its gateway's manifest as before.
    expect(after.find((d) => d.id === porch.id)!.name).toBe('Front door light');
  });

  it('refuses an empty name or one over 64 characters, with the issue at name', async () => {
    const lamp = await attachDevice(api, owner);
    for (const name of ['', 'x'.repeat(65)]) {
      const res = await api.post(`/v1/devices/${lamp.id}/rename`, { token: owner, body: { name } });
      expect(res.status).toBe(400);
      expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toContain('name');
    }
    expect((await api.post(`/v1/devices/${lamp.id}/rename`, { token: owner, body: { name: 'x'.repeat(64) } })).status).toBe(200);
    expect((await api.post(`/v1/devices/${lamp.id}/rename`, { token: owner, body: {} })).status).toBe(400);
  });

  it("answers 404 for another workspace's device and leaves its name alone", async () => {
    const lamp = await attachDevice(api, owner, { name: 'Mine' });
    const stranger = await server.ownerToken('device-names-stranger');
    const res = await api.post(`/v1/devices/${lamp.id}/rename`, { token: stranger, body: { name: 'Theirs' } });
    expect(res.status).toBe(404);
    expect((await devices()).find((d) => d.id === lamp.id)!.name).toBe('Mine');
  });

  it("refuses the device's own credential (only the owner names it)", async () => {
    const lamp = await attachDevice(api, owner, { name: 'Self-named' });
    const res = await api.post(`/v1/devices/${lamp.id}/rename`, { token: lamp.token, body: { name: 'Chosen by itself' } });
    expect(res.status).toBe(403);
    expect((await devices()).find((d) => d.id === lamp.id)!.name).toBe('Self-named');
  });
});

describe('POST /v1/sdk/devices without a name', () => {
  it('names the device after its setup token', async () => {
    const setup = await createSetupToken(api, owner, { name: 'Node thermostat' });
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body: {} });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.device.name).toBe('Node thermostat');
  });

  it('uses the name a device sends when it sends one', async () => {
    const setup = await createSetupToken(api, owner, { name: 'Node thermostat' });
    const res = await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'Hall thermostat' } });
    expect(res.status).toBe(201);
    expect(res.body.data.device.name).toBe('Hall thermostat');
  });
});

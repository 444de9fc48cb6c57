import { describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

// GET /v1/device-states (docs/devices/state.md): the last-known state of a page of devices,
// each item what GET /v1/devices/{deviceId}/state answers, in the order of GET /v1/devices.

const server = useTestServer();

describe('GET /v1/device-states', () => {
  it('answers each device of the page as its own state read answers it, in the order of the devices list', async () => {
    const owner = await server.ownerToken('device-states-owner');
    const lamps = [await attachDevice(server.api, owner, { name: 'One' }), await attachDevice(server.api, owner, { name: 'Two' })];
    await server.api.post(`/v1/device/${lamps[0]!.id}/state`, { token: lamps[0]!.token, body: { values: { get_state: { on: true } } } });
    const res = await server.api.get('/v1/device-states', { token: owner });
    expect(res.status).toBe(200);
    const listed = await server.api.get('/v1/devices', { token: owner });
    expect((res.body.data as { deviceId: string }[]).map((s) => s.deviceId)).toEqual((listed.body.data as { id: string }[]).map((d) => d.id));
    for (const lamp of lamps) {
      const one = await server.api.get(`/v1/devices/${lamp.id}/state`, { token: owner });
      expect((res.body.data as { deviceId: string }[]).find((s) => s.deviceId === lamp.id)).toEqual(one.body.data);
    }
  });

  it('pages with the cursor devices.list uses', async () => {
    const owner = await server.ownerToken('device-states-pages');
    for (const name of ['A', 'B', 'C']) await attachDevice(server.api, owner, { name });
    const first = await server.api.get('/v1/device-states?limit=2', { token: owner });
    expect(first.body.data).toHaveLength(2);
    // The next page is the Link header's (RFC 8288), as for every list.
    const link = /<([^>]+)>;\s*rel="next"/.exec(first.headers.get('link') ?? '')![1]!;
    const second = await server.api.get(new URL(link, server.url).pathname + new URL(link, server.url).search, { token: owner });
    expect(second.body.data).toHaveLength(1);
    expect(second.headers.get('link')).toBeNull();
  });

  it('shows an agent only the devices it may call and the values of its read grants', async () => {
    const owner = await server.ownerToken('device-states-agent');
    const granted = await attachDevice(server.api, owner, { name: 'Granted' });
    const hidden = await attachDevice(server.api, owner, { name: 'Hidden' });
    const controlled = await attachDevice(server.api, owner, { name: 'Controlled' });
    for (const lamp of [granted, hidden, controlled]) {
      await server.api.post(`/v1/device/${lamp.id}/state`, { token: lamp.token, body: { values: { get_state: { on: true } } } });
    }
    const agent = await createAgent(server.api, owner, { name: 'states' });
    await grant(server.api, owner, agent.principal, granted.id, ['get_state']);
    await grant(server.api, owner, agent.principal, controlled.id, ['set_power']);
    const res = await server.api.get('/v1/device-states', { token: agent.token });
    expect(res.status).toBe(200);
    const byId = new Map((res.body.data as { deviceId: string; values: unknown[] }[]).map((s) => [s.deviceId, s.values]));
    expect([...byId.keys()].sort()).toEqual([granted.id, controlled.id].sort());
    expect(byId.get(granted.id)).toMatchObject([{ capability: 'get_state', value: { on: true } }]);
    expect(byId.get(controlled.id)).toEqual([]);
  });

  it('refuses a device credential', async () => {
    const owner = await server.ownerToken('device-states-device');
    const lamp = await attachDevice(server.api, owner);
    const res = await server.api.get('/v1/device-states', { token: lamp.token });
    expect(res.status).toBe(403);
  });
});

import type { Client } from '@modelcontextprotocol/client';
import { afterAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { connect } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

// Device state over MCP (docs/devices/state.md, docs/agents): the resource
// device://{deviceId}/state, the get_device_state tool, and the 2026-07-28 listen stream
// telling a subscriber that a value changed; with the official client SDK.

const server = useTestServer();
const clients: Client[] = [];
afterAll(async () => {
  for (const client of clients) await client.close().catch(() => {});
});

async function client(token: string): Promise<Client> {
  const made = await connect(server.url, token, 'modern');
  clients.push(made);
  return made;
}

function reportState(device: AttachedDevice, values: Record<string, unknown>) {
  return server.api.post(`/v1/device/${device.id}/state`, { token: device.token, body: { values } });
}

async function world(subject: string, capabilities: string[]) {
  const owner = await server.ownerToken(subject);
  const device = await attachDevice(server.api, owner);
  const agent = await createAgent(server.api, owner, { name: subject });
  const grants = capabilities.length > 0 ? await grant(server.api, owner, agent.principal, device.id, capabilities) : [];
  return { owner, device, agent, grants };
}

describe('the device state resource', () => {
  it('is listed for a device with a granted read function, not for one with control grants only', async () => {
    const { owner, device, agent } = await world('mcp-state-list', ['get_state']);
    const controlled = await attachDevice(server.api, owner, { name: 'Switch', manifest: lampManifest });
    await grant(server.api, owner, agent.principal, controlled.id, ['set_power']);
    const mcp = await client(agent.token);
    const uris = (await mcp.listResources()).resources.map((r) => r.uri);
    expect(uris).toContain(`device://${device.id}/state`);
    expect(uris).not.toContain(`device://${controlled.id}/state`);
  });

  it('reads as the data of GET /v1/devices/{deviceId}/state, as get_device_state answers', async () => {
    const { device, agent } = await world('mcp-state-read', ['get_state']);
    await reportState(device, { get_state: { on: true } });
    const rest = await server.api.get(`/v1/devices/${device.id}/state`, { token: agent.token });
    expect(rest.status).toBe(200);
    const mcp = await client(agent.token);
    const read = await mcp.readResource({ uri: `device://${device.id}/state` });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toEqual(rest.body.data);
    const called = await mcp.callTool({ name: 'get_device_state', arguments: { deviceId: device.id } });
    expect(called.isError).toBeFalsy();
    expect(called.structuredContent).toEqual(rest.body.data);
  });

  it('reads as not found for a device the agent holds no grant on', async () => {
    const { device } = await world('mcp-state-hidden', []);
    const { agent } = await world('mcp-state-other', ['get_state']);
    const mcp = await client(agent.token);
    await expect(mcp.readResource({ uri: `device://${device.id}/state` })).rejects.toThrow();
  });
});

describe('notifications/resources/updated on subscriptions/listen', () => {
  it('tells a subscriber that the state changed, coalesced to one a second per device', async () => {
    const { device, agent } = await world('mcp-state-listen', ['get_state']);
    const mcp = await client(agent.token);
    const updated: { uri: string; at: number }[] = [];
    mcp.setNotificationHandler('notifications/resources/updated', (n) => void updated.push({ uri: n.params.uri, at: performance.now() }));
    const uri = `device://${device.id}/state`;
    const subscription = await mcp.listen({ resourceSubscriptions: [uri, 'device://not-a-device/state'] });
    expect(subscription.honoredFilter.resourceSubscriptions).toEqual([uri]);

    const sent = performance.now();
    expect((await reportState(device, { get_state: { on: true, level: 0 } })).status).toBe(200);
    await expect.poll(() => updated.length, { timeout: 5000 }).toBe(1);
    expect(updated[0]!.uri).toBe(uri);
    console.info(`state notification after ${Math.round(updated[0]!.at - sent)} ms`);

    const burst = performance.now();
    for (let level = 1; level <= 5; level++) await reportState(device, { get_state: { on: true, level } });
    const burstMs = performance.now() - burst;
    // The burst's changes are told once its second has passed, in one notification.
    await expect.poll(() => updated.length, { timeout: 5000 }).toBeGreaterThanOrEqual(2);
    expect(updated.length - 1).toBeLessThanOrEqual(Math.floor(burstMs / 1000) + 1);
    await subscription.close();
  });

  it('ends when the grant that let the agent read the device is revoked', async () => {
    const { owner, device, agent, grants } = await world('mcp-state-revoked', ['get_state']);
    const mcp = await client(agent.token);
    const subscription = await mcp.listen({ resourceSubscriptions: [`device://${device.id}/state`] });
    const revoked = await server.api.post('/v1/grants/revoke', { token: owner, body: { grantId: grants[0]!.id } });
    expect(revoked.status).toBe(200);
    expect(await subscription.closed).toBe('graceful');
  });
});

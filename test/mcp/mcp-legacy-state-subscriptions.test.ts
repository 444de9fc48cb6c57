import { afterAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { initializeLegacy, legacyHeaders } from '../helpers/legacy-prompts.js';
import { connectLegacyWatched, type LegacyStateClient } from '../helpers/legacy-streams.js';
import { useTestServer } from '../helpers/server.js';
import { listenRequest } from '../helpers/tasks-client.js';

// 2025-era resources/subscribe of device://{deviceId}/state (docs/agents/state.md): the
// official client SDK in its 2025 handshake subscribes, and is told on its session's GET stream.

const server = useTestServer();
/** One open stream per agent connection: a session's GET stream and a listen stream share it. */
const capped = useTestServer({ env: { MCP_LISTEN_PER_CONNECTION: '1' } });
const clients: LegacyStateClient[] = [];
afterAll(async () => {
  for (const { client } of clients) await client.close().catch(() => {});
});

async function legacy(token: string): Promise<LegacyStateClient> {
  const made = await connectLegacyWatched(() => server.url, token);
  clients.push(made);
  return made;
}

function reportState(device: AttachedDevice, values: Record<string, unknown>) {
  return server.api.post(`/v1/device/${device.id}/state`, { token: device.token, body: { values } });
}

async function world(subject: string) {
  const owner = await server.ownerToken(subject);
  const device = await attachDevice(server.api, owner);
  const agent = await createAgent(server.api, owner, { name: subject, access: 'read' });
  const grants = await grant(server.api, owner, agent.principal, device.id, ['get_state']);
  return { owner, device, agent, grants };
}

/** Records each notifications/resources/updated with when it came. */
function updates(watched: LegacyStateClient) {
  const seen: { uri: string; at: number }[] = [];
  watched.client.setNotificationHandler('notifications/resources/updated', (n) => void seen.push({ uri: n.params.uri, at: performance.now() }));
  return seen;
}

/** Subscribes and waits until the session's GET stream follows `count` resources. */
async function subscribed(watched: LegacyStateClient, uri: string, count: number) {
  expect(await watched.client.subscribeResource({ uri })).toEqual({});
  await expect.poll(() => watched.following.at(-1), { timeout: 10_000 }).toBe(count);
}

describe('resources/subscribe on a 2025-era session', () => {
  it('is advertised to a 2025-era client, which opens its session stream', async () => {
    const { agent } = await world('legacy-state-capability');
    const watched = await legacy(agent.token);
    expect(watched.client.getServerCapabilities()?.resources?.subscribe).toBe(true);
    await expect.poll(() => watched.streamsOpened(), { timeout: 10_000 }).toBe(1);
    expect(watched.following).toEqual([0]);
  });

  it('tells the subscriber on its GET stream that the state changed, coalesced to one a second', async () => {
    const { device, agent } = await world('legacy-state-told');
    const watched = await legacy(agent.token);
    const seen = updates(watched);
    const uri = `device://${device.id}/state`;
    await subscribed(watched, uri, 1);

    const sent = performance.now();
    expect((await reportState(device, { get_state: { on: true, level: 0 } })).status).toBe(200);
    await expect.poll(() => seen.length, { timeout: 5000 }).toBe(1);
    expect(seen[0]!.uri).toBe(uri);
    console.info(`2025-era state notification after ${Math.round(seen[0]!.at - sent)} ms`);

    const burst = performance.now();
    for (let level = 1; level <= 5; level++) await reportState(device, { get_state: { on: true, level } });
    const burstMs = performance.now() - burst;
    await expect.poll(() => seen.length, { timeout: 5000 }).toBeGreaterThanOrEqual(2);
    expect(seen.length - 1).toBeLessThanOrEqual(Math.floor(burstMs / 1000) + 1);
    // The client reads the resource it was told of: the last value reported.
    const read = await watched.client.readResource({ uri });
    expect(JSON.parse((read.contents[0] as { text: string }).text).values[0].value).toEqual({ on: true, level: 5 });
  });

  it('tells nothing more after resources/unsubscribe', async () => {
    const { owner, device, agent } = await world('legacy-state-unsubscribe');
    const other = await attachDevice(server.api, owner, { name: 'Second lamp' });
    await grant(server.api, owner, agent.principal, other.id, ['get_state']);
    const watched = await legacy(agent.token);
    const seen = updates(watched);
    await subscribed(watched, `device://${device.id}/state`, 1);
    await subscribed(watched, `device://${other.id}/state`, 2);
    expect(await watched.client.unsubscribeResource({ uri: `device://${device.id}/state` })).toEqual({});
    await expect.poll(() => watched.following.at(-1), { timeout: 10_000 }).toBe(1);

    // Told in order on one stream: had the first device been told, it would come first.
    await reportState(device, { get_state: { on: true } });
    await reportState(other, { get_state: { on: true } });
    await expect.poll(() => seen.length, { timeout: 5000 }).toBe(1);
    expect(seen.map((n) => n.uri)).toEqual([`device://${other.id}/state`]);
  });

  it('refuses a resource the agent may not read, and one that sends no updates', async () => {
    const owner = await server.ownerToken('legacy-state-refused');
    const hidden = await attachDevice(server.api, owner);
    const { agent, device } = await world('legacy-state-refused-agent');
    const watched = await legacy(agent.token);
    await expect(watched.client.subscribeResource({ uri: `device://${hidden.id}/state` })).rejects.toThrow(/not found/i);
    await expect(watched.client.subscribeResource({ uri: `device://${device.id}` })).rejects.toThrow(/sends no updates/);
  });

  it('refuses a subscribe that carries no session id: there is no stream to tell it on', async () => {
    const { agent, device } = await world('legacy-state-no-session');
    await initializeLegacy(server.url, agent.token, {});
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: legacyHeaders(agent.token),
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'resources/subscribe', params: { uri: `device://${device.id}/state` } }),
    });
    const text = await res.text();
    const body = JSON.parse(
      text.startsWith('{')
        ? text
        : text
            .split('\n')
            .find((l) => l.startsWith('data:'))!
            .slice(5),
    ) as { error?: { message: string } };
    expect(body.error?.message).toContain('needs a session');
  });

  it('forgets the subscription when its grant is revoked', async () => {
    const { owner, device, agent, grants } = await world('legacy-state-grant-revoked');
    const watched = await legacy(agent.token);
    await subscribed(watched, `device://${device.id}/state`, 1);
    expect((await server.api.post('/v1/grants/revoke', { token: owner, body: { grantId: grants[0]!.id } })).status).toBe(200);
    await expect.poll(() => watched.following.at(-1), { timeout: 10_000 }).toBe(0);
  });

  it('ends the session stream when the agent connection is revoked', async () => {
    const { owner, device, agent } = await world('legacy-state-token-revoked');
    const watched = await legacy(agent.token);
    await subscribed(watched, `device://${device.id}/state`, 1);
    expect((await server.api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner })).status).toBe(200);
    await expect.poll(() => watched.streamsEnded(), { timeout: 10_000 }).toBeGreaterThanOrEqual(1);
  });
});

describe('GET /mcp', () => {
  it('answers an unknown session id 404 and a request that does not accept an event stream 406', async () => {
    const { agent } = await world('legacy-state-get');
    const unknown = await server.api.request('GET', '/mcp', {
      token: agent.token,
      headers: { 'mcp-session-id': 's1.1.AAAAAAAAAAAAAAAA.xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx', accept: 'text/event-stream' },
    });
    expect(unknown.status).toBe(404);
    const watched = await legacy(agent.token);
    const json = await server.api.request('GET', '/mcp', {
      token: agent.token,
      headers: { 'mcp-session-id': watched.sessionId()!, accept: 'application/json' },
    });
    expect(json.status).toBe(406);
  });

  it("answers another connection's session id 404", async () => {
    const { agent } = await world('legacy-state-get-owner');
    const { agent: other } = await world('legacy-state-get-other');
    const watched = await legacy(agent.token);
    const res = await server.api.request('GET', '/mcp', {
      token: other.token,
      headers: { 'mcp-session-id': watched.sessionId()!, accept: 'text/event-stream' },
    });
    expect(res.status).toBe(404);
  });

  it('takes a place among the open streams of the agent connection (MCP_LISTEN_PER_CONNECTION)', async () => {
    const owner = await capped.ownerToken('legacy-state-capped');
    const agent = await createAgent(capped.api, owner, { name: 'capped', access: 'read' });
    const watched = await connectLegacyWatched(() => capped.url, agent.token);
    clients.push(watched);
    await expect.poll(() => watched.following.at(-1), { timeout: 10_000 }).toBe(0);
    const refused = await listenRequest(capped.url, agent.token, { toolsListChanged: true });
    expect(refused.status).toBe(429);
    expect(((await refused.json()) as { error: { message: string } }).error.message).toContain('MCP_LISTEN_PER_CONNECTION');
  });
});

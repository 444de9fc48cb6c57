import type { Client as McpClient } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { connectLegacyWatched, type LegacyStateClient } from '../helpers/legacy-streams.js';
import { connect } from '../helpers/mcp-client.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';

/**
 * Device state across instances (docs/devices/state.md): a device reports to instance A, and an
 * agent listening on instance B is told, through the shared bus (ids only; B reads nothing
 * from the message but which device to announce). Both on a real sqld and a real redis-server.
 */
let sqld: TestSqld;
let redis: TestRedis;
let a: TestServer;
let b: TestServer;
let apiA: Client;
let owner: string;
const clients: McpClient[] = [];
const legacyClients: LegacyStateClient[] = [];

beforeAll(async () => {
  [sqld, redis] = await Promise.all([startSqld(), startRedis()]);
  const env = { DATABASE_URL: sqld.url, REDIS_URL: redis.url };
  a = await startTestServer({ env });
  b = await startTestServer({ env });
  apiA = client(a.url);
  owner = await a.ownerToken('owner-state-bus');
}, 60_000);
afterAll(async () => {
  for (const mcp of clients) await mcp.close().catch(() => {});
  for (const { client: mcp } of legacyClients) await mcp.close().catch(() => {});
  await Promise.all([a?.close(), b?.close()]);
  await Promise.all([sqld?.stop(), redis?.stop()]);
});

describe('state notifications across instances', () => {
  it('tells a listen stream on one instance of a report made to another, and reads the same state on both', async () => {
    const lamp = await attachDevice(apiA, owner, { name: 'Bus lamp' });
    const agent = await createAgent(apiA, owner, { name: 'state-bus', access: 'read', principal: 'agent:state-bus' });
    await grant(apiA, owner, agent.principal, lamp.id, ['get_state']);
    const mcp = await connect(b.url, agent.token, 'modern');
    clients.push(mcp);
    const updated: { uri: string; at: number }[] = [];
    mcp.setNotificationHandler('notifications/resources/updated', (n) => void updated.push({ uri: n.params.uri, at: performance.now() }));
    const uri = `device://${lamp.id}/state`;
    const subscription = await mcp.listen({ resourceSubscriptions: [uri] });
    expect(subscription.honoredFilter.resourceSubscriptions).toEqual([uri]);

    const sent = performance.now();
    const reported = await apiA.post(`/v1/device/${lamp.id}/state`, { token: lamp.token, body: { values: { get_state: { on: true } } } });
    expect(reported.status).toBe(200);
    await expect.poll(() => updated.length, { timeout: 10_000 }).toBe(1);
    expect(updated[0]!.uri).toBe(uri);
    console.info(`state notification across instances after ${Math.round(updated[0]!.at - sent)} ms`);

    const read = await mcp.readResource({ uri });
    const rest = await apiA.get(`/v1/devices/${lamp.id}/state`, { token: agent.token });
    expect(JSON.parse((read.contents[0] as { text: string }).text)).toEqual(rest.body.data);
    expect(rest.body.data.values).toMatchObject([{ capability: 'get_state', value: { on: true }, source: 'report' }]);
    await subscription.close();
  });

  it('tells a 2025-era session whose subscribe reached one instance on its GET stream on the other', async () => {
    const lamp = await attachDevice(apiA, owner, { name: 'Bus lamp, 2025' });
    const agent = await createAgent(apiA, owner, { name: 'state-bus-2025', access: 'read', principal: 'agent:state-bus-2025' });
    await grant(apiA, owner, agent.principal, lamp.id, ['get_state']);
    // Every POST (initialize, subscribe, read) to A; the session's GET stream to B.
    const watched = await connectLegacyWatched((method) => (method === 'GET' ? b.url : a.url), agent.token);
    legacyClients.push(watched);
    const updated: { uri: string; at: number }[] = [];
    watched.client.setNotificationHandler('notifications/resources/updated', (n) => void updated.push({ uri: n.params.uri, at: performance.now() }));
    await expect.poll(() => watched.following.at(-1), { timeout: 10_000 }).toBe(0);
    const uri = `device://${lamp.id}/state`;
    expect(await watched.client.subscribeResource({ uri })).toEqual({});
    // The subscription, stored by A, reached the stream on B over the bus.
    await expect.poll(() => watched.following.at(-1), { timeout: 10_000 }).toBe(1);

    const sent = performance.now();
    const reported = await apiA.post(`/v1/device/${lamp.id}/state`, { token: lamp.token, body: { values: { get_state: { on: true } } } });
    expect(reported.status).toBe(200);
    await expect.poll(() => updated.length, { timeout: 10_000 }).toBe(1);
    expect(updated[0]!.uri).toBe(uri);
    console.info(`2025-era state notification across instances after ${Math.round(updated[0]!.at - sent)} ms`);
  });
});

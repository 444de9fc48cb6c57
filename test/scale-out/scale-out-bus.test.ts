import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceWorkListeners, type ServiceEvent } from '../../src/domain/event-hub.js';
import { client, type Client } from '../helpers/api.js';
import { grant, next, queue, report, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { connect, rawMcp, toolName } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/oauth.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { connectDevice } from '../helpers/ws.js';

/**
 * Several instances share one libSQL server and one Redis (docs/operators/scale-out.md "What instances share"):
 * whatever one instance commits reaches the wake sockets and MCP calls held by another, and
 * a cancellation or a rate limit holds for the whole service. Two in-process instances, A and
 * B, on a real sqld and a real redis-server. Owner requests go to A (its test identity
 * provider signs them); agent and device credentials live in the database and work on both.
 */
let sqld: TestSqld;
let redis: TestRedis;
let a: TestServer;
let b: TestServer;
let apiA: Client;
let apiB: Client;
let owner: string;

const METRICS_TOKEN = 'metrics-token-for-the-bus-tests';

beforeAll(async () => {
  [sqld, redis] = await Promise.all([startSqld(), startRedis()]);
  const env = { DATABASE_URL: sqld.url, REDIS_URL: redis.url, METRICS_TOKEN };
  // One after the other: both run the migrations at start.
  a = await startTestServer({ env });
  b = await startTestServer({ env });
  apiA = client(a.url);
  apiB = client(b.url);
  owner = await a.ownerToken('owner-bus');
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await Promise.all([sqld?.stop(), redis?.stop()]);
});

/** A lamp granted to a fresh agent: each test works on its own device. */
async function world(name: string) {
  const lamp = await attachDevice(apiA, owner, { name });
  const agent = await createAgent(apiA, owner, { name, access: 'act', principal: `agent:${name}` });
  await grant(apiA, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
  const setPower = toolName('set_power', lamp.id);
  return { lamp, agent, setPower };
}

async function actionOf(id: string): Promise<Record<string, any>> {
  return (await apiA.get(`/v1/actions/${id}`, { token: owner })).body.data;
}

async function metric(server: TestServer, line: string): Promise<number | undefined> {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  const found = (await res.text()).split('\n').find((l) => l.startsWith(`${line} `));
  return found === undefined ? undefined : Number(found.split(' ').at(-1));
}

describe('an action requested on one instance, the device’s wake socket on another', () => {
  it('sends the wake frame on the socket held by the other instance', async () => {
    const { lamp, agent } = await world('wake-across');
    const socket = await connectDevice(apiB, b.url, lamp);
    const action = await queue(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: lamp.id, actionId: action.id });
    socket.ws.close();
  });

  it('delivers each event once on the instance that published it, though Redis echoes it back', async () => {
    const { lamp, agent } = await world('wake-once');
    const socket = await connectDevice(apiA, a.url, lamp);
    const first = await queue(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const second = await queue(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
    expect(await socket.nextFrame()).toMatchObject({ actionId: first.id });
    expect(await socket.nextFrame()).toMatchObject({ actionId: second.id });
    // A round trip through Redis later: any echo of the first two would have arrived by now.
    const third = await queue(apiB, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(await socket.nextFrame()).toMatchObject({ actionId: third.id });
    expect(socket.frames).toHaveLength(3);
    socket.ws.close();
  });
});

describe('an action scheduled on one instance', () => {
  it('reaches the other instance as a hint carrying its due time, for the scheduler there', async () => {
    const { lamp, agent } = await world('scheduled-hint');
    const heard: ServiceEvent[] = [];
    const stop = b.service.events.subscribe((event, origin) => {
      if (origin === 'another-instance') heard.push(event);
    });
    try {
      const notBefore = Date.now() + 3_600_000;
      const res = await requestAction(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, notBefore });
      expect(res.body.data.status, JSON.stringify(res.body)).toBe('scheduled');
      await expect
        .poll(() => heard.find((event) => event.type === 'action-hint' && event.actionId === res.body.data.id))
        .toEqual({ type: 'action-hint', workspaceId: expect.any(String), targetId: lamp.id, actionId: res.body.data.id, signal: false, dueAt: notBefore });
    } finally {
      stop();
    }
  });
});

describe('an action requested on one instance, the device’s long poll held by another', () => {
  it('answers the held poll with the command queued on the other instance', async () => {
    const { lamp, agent } = await world('long-poll-across');
    const poll = apiB.post(`/v1/device/${lamp.id}/next?waitSeconds=30`, { token: lamp.token, headers: { 'x-service-workspace': lamp.workspace } });
    await expect.poll(() => deviceWorkListeners(b.service.events, lamp.id)).toBe(1);
    const action = await queue(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const res = await poll;
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: action.id, capability: 'set_power', args: { on: true } });
  });

  it('ends the held poll with 401 when the device is revoked on the other instance', async () => {
    const { lamp } = await world('long-poll-revoked');
    const poll = apiB.post(`/v1/device/${lamp.id}/next?waitSeconds=30`, { token: lamp.token, headers: { 'x-service-workspace': lamp.workspace } });
    await expect.poll(() => deviceWorkListeners(b.service.events, lamp.id)).toBe(1);
    expect((await apiA.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    expect((await poll).status).toBe(401);
  });
});

describe('an MCP device tool call on one instance, the device answering on another', () => {
  it('ends with the result the device reported to the other instance', async () => {
    const { lamp, agent, setPower } = await world('mcp-across');
    const mcp = await connect(a.url, agent.token, 'modern');
    try {
      // The wait is longer than the test's timeout: only the bus can end it in time.
      const answer = mcp.callTool({ name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 60 } });
      let command: Record<string, any> | null = null;
      await expect.poll(async () => (command = (await next(apiB, lamp)).body.data)).not.toBeNull();
      expect((await report(apiB, lamp, { actionId: command!.id, ok: true, result: { on: true } })).status).toBe(200);
      expect((await answer).structuredContent).toMatchObject({ id: command!.id, status: 'succeeded', result: { on: true } });
    } finally {
      await mcp.close();
    }
  });
});

describe('a device revoked on one instance, its wake socket open on another', () => {
  it('closes the socket with 4401', async () => {
    const { lamp } = await world('revoke-across');
    const socket = await connectDevice(apiB, b.url, lamp);
    expect((await apiA.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    expect(await socket.closed).toEqual({ code: 4401, reason: 'device revoked' });
  });
});

describe('a command recalled on one instance, fetched by a device whose socket is on another', () => {
  it('sends the cancel frame on the other instance’s socket', async () => {
    const { lamp, agent } = await world('recall-across');
    const socket = await connectDevice(apiB, b.url, lamp);
    const action = await queue(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(await socket.nextFrame()).toMatchObject({ type: 'wake', actionId: action.id });
    expect((await next(apiB, lamp)).body.data.id).toBe(action.id);
    const revoked = await apiA.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id } });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect(await socket.nextFrame()).toEqual({ type: 'cancel', deviceId: lamp.id, actionId: action.id, reason: 'grant_revoked' });
    socket.ws.close();
  });
});

describe('a 2025-era notifications/cancelled sent to another instance than the call', () => {
  it('withdraws the call’s action with client_cancelled', async () => {
    const { lamp, agent, setPower } = await world('cancel-across');
    const legacy = { 'mcp-protocol-version': '2025-06-18', 'mcp-method': undefined, 'mcp-name': undefined };
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 91,
      method: 'tools/call',
      params: { name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 60 } },
    });
    const call = rawMcp(a.url, { token: agent.token, method: 'tools/call', headers: legacy, body }).catch(() => undefined);
    let queued: { id: string } | undefined;
    await expect
      .poll(async () => (queued = ((await apiA.get('/v1/actions', { token: owner })).body.data as any[]).find((x) => x.deviceId === lamp.id)))
      .toBeDefined();
    const cancel = await rawMcp(b.url, {
      token: agent.token,
      method: 'notifications/cancelled',
      headers: legacy,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 91, reason: 'stopped on B' } }),
    });
    expect(cancel.status).toBe(202);
    await expect.poll(() => actionOf(queued!.id)).toMatchObject({ status: 'cancelled', cancelReason: 'client_cancelled' });
    await call;
  });
});

describe('rate limits and failure budgets with REDIS_URL', () => {
  let c: TestServer;
  let d: TestServer;
  beforeAll(async () => {
    // Two more instances with small budgets and almost no refill, so a count is exact.
    const env = {
      DATABASE_URL: sqld.url,
      REDIS_URL: redis.url,
      RATE_LIMIT_AGENT_BURST: '10',
      RATE_LIMIT_AGENT_PER_SECOND: '0.001',
      AUTH_FAILURES_PER_MINUTE: '4',
    };
    c = await startTestServer({ env });
    d = await startTestServer({ env });
  });
  afterAll(() => Promise.all([c?.close(), d?.close()]));

  it('draws one agent’s burst spread over two instances from one bucket', async () => {
    const { agent } = await world('limit-across');
    const statuses: number[] = [];
    for (let i = 0; i < 20; i += 1) {
      const server = i % 2 === 0 ? c : d;
      statuses.push((await client(server.url).get('/v1/functions', { token: agent.token })).status);
    }
    expect(statuses.filter((s) => s === 200)).toHaveLength(10);
    expect(statuses.slice(10).every((s) => s === 429)).toBe(true);
  });

  it('counts failed authentications from one address on every instance against one budget', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 6; i += 1) {
      const server = i % 2 === 0 ? c : d;
      statuses.push((await client(server.url).get('/v1/functions', { token: `dfc_agent_${'x'.repeat(43)}${i}` })).status);
    }
    expect(statuses).toEqual([401, 401, 401, 401, 429, 429]);
  });
});

describe('REDIS_URL unset or Redis absent at start', () => {
  it('runs in one process without REDIS_URL: no Redis check, no Redis metrics', async () => {
    const alone = await startTestServer({ env: { METRICS_TOKEN } });
    try {
      expect((await client(alone.url).get('/readyz')).body).toEqual({ status: 'ready', dependencies: [{ name: 'database', state: 'up' }] });
      expect(await metric(alone, 'dfc_redis_up')).toBeUndefined();
      expect(alone.logs.some((l) => l.includes('redis'))).toBe(false);
    } finally {
      await alone.close();
    }
  });

  it('starts and serves while Redis cannot be reached, says so once, and its readiness check fails', async () => {
    const nowhere = await startTestServer({ env: { REDIS_URL: `redis://127.0.0.1:${await freePort()}`, METRICS_TOKEN } });
    try {
      await expect.poll(() => nowhere.logs.filter((l) => l.includes('"redis is down')).length).toBe(1);
      expect((await client(nowhere.url).get('/healthz')).status).toBe(200);
      expect(await metric(nowhere, 'dfc_redis_up')).toBe(0);
      await expect(nowhere.service.readiness.find((r) => r.name === 'redis')!.check()).rejects.toThrow(/not connected/);
      // Reconnect attempts go on quietly: still one line.
      await new Promise((resolve) => setTimeout(resolve, 1200));
      expect(nowhere.logs.filter((l) => l.includes('redis')).length).toBe(1);
      const ready = await client(nowhere.url).get('/readyz');
      expect(ready.status).toBe(503);
      expect(ready.body.error.issues).toEqual([{ path: 'redis', message: 'not answering' }]);
    } finally {
      await nowhere.close();
    }
  });
});

// Last: it stops the Redis every instance above shares.
describe('Redis stopped and started again', () => {
  it('keeps serving from the database, leaves wakes to polling, and shares again once Redis is back, without a restart', async () => {
    const { lamp, agent } = await world('redis-down');
    expect(await a.service.readiness.find((r) => r.name === 'redis')!.check()).toBeUndefined();
    const socket = await connectDevice(apiB, b.url, lamp);

    await redis.stop();
    await expect.poll(() => metric(a, 'dfc_redis_up')).toBe(0);
    await expect(a.service.readiness.find((r) => r.name === 'redis')!.check()).rejects.toThrow(/Redis at redis:\/\/127\.0\.0\.1:\d+/);
    await expect.poll(() => a.logs.filter((l) => l.includes('"redis is down')).length).toBe(1);
    expect(JSON.parse(a.logs.find((l) => l.includes('"redis is down'))!)).toMatchObject({ level: 'warn', redis: redis.url });

    // Requests keep working (rate limits from this instance's buckets), and the device finds
    // its command by polling: the wake could not cross.
    const action = await queue(apiA, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await next(apiB, lamp)).body.data.id).toBe(action.id);
    expect(await metric(a, 'dfc_redis_fallbacks_total{what="rate_limit"}')).toBeGreaterThan(0);
    expect(await metric(a, 'dfc_redis_fallbacks_total{what="event"}')).toBeGreaterThan(0);
    expect(socket.frames).toEqual([]);

    await redis.start();
    await expect.poll(() => metric(a, 'dfc_redis_up'), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => metric(b, 'dfc_redis_up'), { timeout: 10_000 }).toBe(1);
    await expect.poll(() => a.logs.filter((l) => l.includes('"redis is back')).length).toBe(1);
    expect(JSON.parse(a.logs.find((l) => l.includes('"redis is back'))!)).toMatchObject({ level: 'info' });
    expect(a.logs.filter((l) => l.includes('"redis is down')).length).toBe(1);
    await a.service.readiness.find((r) => r.name === 'redis')!.check();

    const again = await queue(apiA, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: lamp.id, actionId: again.id });
    socket.ws.close();
  });
});

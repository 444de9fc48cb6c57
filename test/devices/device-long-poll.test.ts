import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { deviceWorkListeners } from '../../src/domain/event-hub.js';
import { client } from '../helpers/api.js';
import { childrenOf, grant, hubManifest, next, queue } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, useTestServer, type TestServer } from '../helpers/server.js';

const server = useTestServer();
const api = server.api;

let owner: string;
let agent: { token: string; principal: string };

beforeAll(async () => {
  owner = await server.ownerToken('long-poll-owner');
  agent = await createAgent(api, owner, { access: 'act' });
});

async function grantedLamp(): Promise<AttachedDevice> {
  const lamp = await attachDevice(api, owner, { name: 'Lamp' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state']);
  return lamp;
}

function longPoll(target: TestServer | typeof server, device: AttachedDevice, wait: string) {
  return (target === server ? api : client(target.url)).post(`/v1/device/${device.id}/next?waitSeconds=${wait}`, {
    token: device.token,
    headers: { 'x-service-workspace': device.workspace },
  });
}

/** Until the poll is held on the server: listening for the device's work. */
async function held(target: TestServer, deviceId: string) {
  await expect.poll(() => deviceWorkListeners(target.service.events, deviceId)).toBe(1);
}

describe('POST /v1/device/{deviceId}/next?waitSeconds=N: the long poll', () => {
  it('answers a command queued while the poll is held', async () => {
    const lamp = await grantedLamp();
    const poll = longPoll(server, lamp, '30');
    await held(server, lamp.id);
    const queued = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const res = await poll;
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: queued.id, capability: 'get_state', args: {}, status: 'received' });
    expect(deviceWorkListeners(server.service.events, lamp.id)).toBe(0);
  });

  it('answers at once when a command is already queued', async () => {
    const lamp = await grantedLamp();
    const queued = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const res = await longPoll(server, lamp, '30');
    expect(res.body.data.id).toBe(queued.id);
  });

  it("wakes a gateway's poll for a command queued for one of its children", async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb } = await childrenOf(api, owner, hub.id);
    await grant(api, owner, agent.principal, bulb!, ['get_state']);
    const poll = longPoll(server, hub, '30');
    await held(server, hub.id);
    const queued = await queue(api, agent.token, bulb!, { capability: 'get_state', arguments: {} });
    expect((await poll).body.data).toMatchObject({ id: queued.id, deviceId: bulb });
  });

  it('answers { data: null } once the wait passes with nothing queued', async () => {
    const lamp = await grantedLamp();
    const res = await longPoll(server, lamp, '1');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: null });
  });

  it('takes waitSeconds=0 as a plain next', async () => {
    const lamp = await grantedLamp();
    expect((await longPoll(server, lamp, '0')).body).toEqual({ data: null });
    expect((await next(api, lamp)).body).toEqual({ data: null });
  });

  it('ends a held poll with 401 when the device is revoked', async () => {
    const lamp = await grantedLamp();
    const poll = longPoll(server, lamp, '30');
    await held(server, lamp.id);
    expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    expect((await poll).status).toBe(401);
  });

  it('hands nothing out for a poll whose client went away', async () => {
    const lamp = await grantedLamp();
    const gone = new AbortController();
    const poll = fetch(`${server.url}/v1/device/${lamp.id}/next?waitSeconds=30`, {
      method: 'POST',
      headers: { authorization: `Bearer ${lamp.token}`, 'x-service-workspace': lamp.workspace },
      signal: gone.signal,
    }).catch((error: unknown) => error);
    await held(server, lamp.id);
    gone.abort();
    await poll;
    await expect.poll(() => deviceWorkListeners(server.service.events, lamp.id)).toBe(0);
    const queued = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect((await next(api, lamp)).body.data.id).toBe(queued.id);
  });

  it.each(['31', '-1', '1.5', 'ten', '', '05'])('refuses waitSeconds=%j with 400 at the query parameter', async (wait) => {
    const lamp = await grantedLamp();
    const res = await longPoll(server, lamp, wait);
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([expect.objectContaining({ path: 'waitSeconds' })]);
  });
});

describe('the held polls of one device', () => {
  it('are at most four: past them next answers at once, as without waitSeconds', async () => {
    const lamp = await grantedLamp();
    const polls = Array.from({ length: 4 }, () => longPoll(server, lamp, '30'));
    await expect.poll(() => deviceWorkListeners(server.service.events, lamp.id)).toBe(4);
    const fifth = await longPoll(server, lamp, '30');
    expect(fifth.status).toBe(200);
    expect(fifth.body.data).toBeNull();
    expect(deviceWorkListeners(server.service.events, lamp.id)).toBe(4);
    // Four commands end the four held polls, one each.
    const queued = [];
    for (const _ of polls) queued.push((await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} })).id);
    const answered = (await Promise.all(polls)).map((res) => res.body.data.id);
    expect(answered.sort()).toEqual(queued.sort());
  });
});

describe('a held poll and shutdown', () => {
  let own: TestServer;
  let closed = false;
  beforeAll(async () => {
    own = await startTestServer();
  });
  afterAll(async () => {
    if (!closed) await own.close();
  });

  // A shutdown that waited for the held poll would cut it at the end of its grace period: the
  // poll would get no answer at all, not the 200 below.
  it('answers { data: null } at once when the service shuts down', async () => {
    const ownApi = client(own.url);
    const ownOwner = await own.ownerToken('long-poll-shutdown');
    const lamp = await attachDevice(ownApi, ownOwner, { name: 'Lamp' });
    const poll = longPoll(own, lamp, '30');
    await held(own, lamp.id);
    closed = true;
    await own.close();
    const res = await poll;
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ data: null });
  });
});

describe('a held poll and the device rate limit', () => {
  let limited: TestServer;
  beforeAll(async () => {
    // A burst of three and a refill far slower than the test: every request is counted.
    limited = await startTestServer({ env: { RATE_LIMIT_DEVICE_BURST: '3', RATE_LIMIT_DEVICE_PER_SECOND: '0.001' } });
  });
  afterAll(async () => {
    await limited.close();
  });

  it('counts one request however long it is held, and wakes on a command', async () => {
    const limitedApi = client(limited.url);
    const limitedOwner = await limited.ownerToken('long-poll-limits');
    const limitedAgent = await createAgent(limitedApi, limitedOwner, { access: 'act' });
    const lamp = await attachDevice(limitedApi, limitedOwner, { name: 'Lamp' });
    await grant(limitedApi, limitedOwner, limitedAgent.principal, lamp.id, ['get_state']);
    const poll = longPoll(limited, lamp, '30');
    await held(limited, lamp.id);
    const queued = await queue(limitedApi, limitedAgent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect((await poll).body.data.id).toBe(queued.id);
    // The attach's manifest, the poll: two of three. One more passes, the next is refused.
    expect((await next(limitedApi, lamp)).status).toBe(200);
    expect((await next(limitedApi, lamp)).status).toBe(429);
  });
});

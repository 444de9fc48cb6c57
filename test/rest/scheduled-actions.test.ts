import { beforeAll, describe, expect, it } from 'vitest';
import { next, requestAction } from '../helpers/actions.js';
import { client, type Client } from '../helpers/api.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, useTestServer } from '../helpers/server.js';

// A Wednesday, 12:00 UTC. The scheduler runs on the service's clock, which the tests move.
const WEDNESDAY_NOON = Date.UTC(2026, 11, 2, 12, 0);
const clock = manualClock(WEDNESDAY_NOON);
const server = useTestServer({ clock });
const api = server.api;
let owner: string;

beforeAll(async () => {
  owner = await server.ownerToken('scheduled-owner');
});

interface World {
  lamp: AttachedDevice;
  agent: Agent;
  grantId: string;
}

async function world(
  options: { conditions?: unknown; approval?: 'owner'; ttlSeconds?: number } = {},
  on: { api: Client; owner: string } = { api, owner },
): Promise<World> {
  const lamp = await attachDevice(on.api, on.owner);
  const agent = await createAgent(on.api, on.owner);
  const res = await on.api.post('/v1/grants', {
    token: on.owner,
    body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'], ...options },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { lamp, agent, grantId: res.body.data[0].id };
}

const schedule = (w: World, notBefore: number, extra: Record<string, unknown> = {}, on: Client = api) =>
  requestAction(on, w.agent.token, w.lamp.id, { capability: 'set_brightness', arguments: { level: 20 }, notBefore, ttlSeconds: 60, ...extra });

const action = async (id: string) => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;

/** Runs `body` with the clock at `at`, and puts it back at noon afterwards. */
async function at<T>(ms: number, body: () => Promise<T>): Promise<T> {
  clock.set(ms);
  try {
    return await body();
  } finally {
    clock.set(WEDNESDAY_NOON);
  }
}

describe('notBefore on a single action', () => {
  it('creates it scheduled, with its deadline counted from notBefore, and hands nothing out before then', async () => {
    const w = await world();
    const due = WEDNESDAY_NOON + 3_600_000;
    const res = await schedule(w, due);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data).toMatchObject({ status: 'scheduled', notBefore: due, expiresAt: due + 60_000, createdAt: WEDNESDAY_NOON });
    expect((await next(api, w.lamp)).body.data).toBeNull();
    expect(await action(res.body.data.id)).toMatchObject({ status: 'scheduled' });
  });

  it('queues it once notBefore comes, and the device then fetches it', async () => {
    const w = await world();
    const due = WEDNESDAY_NOON + 60_000;
    const { body } = await schedule(w, due);
    await at(due, async () => {
      await expect.poll(async () => (await action(body.data.id)).status).toBe('queued');
      expect((await next(api, w.lamp)).body.data).toMatchObject({ id: body.data.id, args: { level: 20 } });
    });
  });

  it('queues at once for a time in the past or absent, with notBefore null', async () => {
    const w = await world();
    const res = await schedule(w, WEDNESDAY_NOON - 1000);
    expect(res.body.data).toMatchObject({ status: 'queued', notBefore: null, expiresAt: WEDNESDAY_NOON + 60_000 });
  });

  it('refuses a time more than 7 days ahead with 400 at notBefore', async () => {
    const w = await world();
    const res = await schedule(w, WEDNESDAY_NOON + 7 * 24 * 3_600_000 + 1);
    expect(res.status).toBe(400);
    expect(res.body.error).toMatchObject({ code: 'validation_failed', issues: [{ path: 'notBefore' }] });
    expect((await schedule(w, WEDNESDAY_NOON + 7 * 24 * 3_600_000)).status).toBe(201);
  });

  it('can be cancelled by the requesting agent while scheduled', async () => {
    const w = await world();
    const { body } = await schedule(w, WEDNESDAY_NOON + 3_600_000);
    const cancelled = await api.post(`/v1/actions/${body.data.id}/cancel`, { token: w.agent.token });
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body.data).toMatchObject({ status: 'cancelled', cancelReason: 'agent' });
  });

  it('counts against the grant budget when created', async () => {
    const w = await world({ conditions: { budget: { max: 1, perSeconds: 3600 } } });
    expect((await schedule(w, WEDNESDAY_NOON + 3_600_000)).status).toBe(201);
    const refused = await schedule(w, WEDNESDAY_NOON + 1_800_000);
    expect(refused.body.error.code).toBe('grant_budget_exhausted');
  });
});

describe('withdrawn and checked again', () => {
  it('is cancelled at once when its grant is revoked (grant_revoked)', async () => {
    const w = await world();
    const { body } = await schedule(w, WEDNESDAY_NOON + 3_600_000);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: w.grantId } })).status).toBe(200);
    expect(await action(body.data.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_revoked' });
  });

  it('is cancelled at once when its device is revoked (device_revoked)', async () => {
    const w = await world();
    const { body } = await schedule(w, WEDNESDAY_NOON + 3_600_000);
    const revoked = await api.post(`/v1/devices/${w.lamp.id}/revoke`, { token: owner });
    expect(revoked.status, JSON.stringify(revoked.body)).toBeLessThan(300);
    expect(await action(body.data.id)).toMatchObject({ status: 'cancelled', cancelReason: 'device_revoked' });
  });

  it('is cancelled with conditions_changed when tightened bounds no longer allow its arguments', async () => {
    const w = await world({ conditions: { arguments: { level: { maximum: 80 } } } });
    const { body } = await schedule(w, WEDNESDAY_NOON + 3_600_000);
    await api.post(`/v1/grants/${w.grantId}/update`, { token: owner, body: { conditions: { arguments: { level: { maximum: 10 } } } } });
    expect(await action(body.data.id)).toMatchObject({ status: 'cancelled', cancelReason: 'conditions_changed' });
  });

  it('is cancelled with outside_schedule when its grant schedule is closed at the due time', async () => {
    const w = await world({ conditions: { schedule: { windows: [{ days: ['wed'], from: '12:00', to: '13:00' }] } } });
    const due = WEDNESDAY_NOON + 1_800_000;
    const { body } = await schedule(w, due);
    expect(body.data.status).toBe('scheduled');
    // Moved to a window the due time is outside of: it waits, and is refused when it is due.
    await api.post(`/v1/grants/${w.grantId}/update`, {
      token: owner,
      body: { conditions: { schedule: { windows: [{ days: ['wed'], from: '14:00', to: '15:00' }] } } },
    });
    expect(await action(body.data.id)).toMatchObject({ status: 'scheduled' });
    await at(due, async () => {
      await expect.poll(async () => (await action(body.data.id)).status).toBe('cancelled');
    });
    expect(await action(body.data.id)).toMatchObject({ cancelReason: 'outside_schedule' });
  });

  it('refuses at request time a due time outside the grant schedule', async () => {
    const w = await world({ conditions: { schedule: { windows: [{ days: ['wed'], from: '12:00', to: '13:00' }] } } });
    const refused = await schedule(w, WEDNESDAY_NOON + 2 * 3_600_000);
    expect(refused.body.error.code).toBe('outside_schedule');
  });

  it('waits for the owner when due under an owner approval grant, its window counted from then', async () => {
    const w = await world({ approval: 'owner' });
    const due = WEDNESDAY_NOON + 60_000;
    const { body } = await schedule(w, due, { approvalTtlSeconds: 600 });
    expect(body.data).toMatchObject({ status: 'scheduled', approval: { mode: 'owner', expiresAt: due + 600_000 } });
    await at(due, async () => {
      await expect.poll(async () => (await action(body.data.id)).status).toBe('awaiting_approval');
      expect(await action(body.data.id)).toMatchObject({ expiresAt: due + 600_000 });
      const inbox = await api.get('/v1/actions?status=awaiting_approval', { token: owner });
      expect(inbox.body.data.map((a: { id: string }) => a.id)).toContain(body.data.id);
    });
  });

  it('is cancelled with grant_expired when its grant has expired by the due time', async () => {
    const w = await world({ ttlSeconds: 1800 });
    const due = WEDNESDAY_NOON + 3_600_000;
    const { body } = await schedule(w, due);
    expect(body.data.status).toBe('scheduled');
    await at(due, async () => {
      await expect.poll(async () => (await action(body.data.id)).status).toBe('cancelled');
    });
    expect(await action(body.data.id)).toMatchObject({ cancelReason: 'grant_expired' });
  });

  it('is queued but held when due while the owner has paused device control, and handed out once resumed', async () => {
    const pausingOwner = await server.ownerToken('scheduled-pausing-owner');
    const w = await world({}, { api, owner: pausingOwner });
    const due = WEDNESDAY_NOON + 60_000;
    const { body } = await schedule(w, due);
    expect((await api.post('/v1/device-controls', { token: pausingOwner, body: { paused: true } })).status).toBe(200);
    await at(due, async () => {
      // Held as a queued command is held: in the queue, handed to no device, not cancelled.
      await expect.poll(async () => (await api.get(`/v1/actions/${body.data.id}`, { token: pausingOwner })).body.data.status).toBe('queued');
      expect((await next(api, w.lamp)).body.data).toBeNull();
      expect((await api.get(`/v1/actions/${body.data.id}`, { token: pausingOwner })).body.data.status).toBe('queued');
      expect((await api.post('/v1/device-controls', { token: pausingOwner, body: { paused: false } })).status).toBe(200);
      expect((await next(api, w.lamp)).body.data).toMatchObject({ id: body.data.id });
    });
  });

  it('expires a scheduled action whose deadline passed before it could become due', async () => {
    const w = await world();
    const due = WEDNESDAY_NOON + 60_000;
    const { body } = await schedule(w, due);
    await at(due + 120_000, async () => {
      await expect.poll(async () => (await action(body.data.id)).status).toBe('expired');
    });
  });
});

describe('notBefore on a broadcast', () => {
  it('schedules every action of the broadcast', async () => {
    const w = await world();
    const due = WEDNESDAY_NOON + 3_600_000;
    const res = await api.post('/v1/broadcasts', {
      token: w.agent.token,
      body: { deviceIds: [w.lamp.id], capability: 'set_brightness', arguments: { level: 20 }, idempotencyKey: 'b-1', notBefore: due },
    });
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    expect(res.body.data.results[0]).toMatchObject({ ok: true, action: { status: 'scheduled', notBefore: due } });
  });
});

describe('due under the kill switch', () => {
  it('is queued but handed to no device while DEVICE_CONTROLS_ENABLED is false, and handed out once it is on again', async () => {
    const killClock = manualClock(WEDNESDAY_NOON);
    const on = await startTestServer({ clock: killClock });
    const dir = on.dir;
    const onApi = client(on.url);
    const killOwner = await on.ownerToken('scheduled-kill-switch-owner');
    const w = await world({}, { api: onApi, owner: killOwner });
    const due = WEDNESDAY_NOON + 60_000;
    const { body } = await schedule(w, due, {}, onApi);
    expect(body.data.status).toBe('scheduled');
    await on.close();

    // The operator throws the switch; the service restarts and the action becomes due under it.
    killClock.set(due);
    const off = await startTestServer({ dir, clock: killClock, env: { DEVICE_CONTROLS_ENABLED: 'false' } });
    try {
      const offApi = client(off.url);
      await expect.poll(async () => (await offApi.get(`/v1/actions/${body.data.id}`, { token: w.agent.token })).body.data.status).toBe('queued');
      expect((await next(offApi, w.lamp)).body.data).toBeNull();
      expect((await offApi.get(`/v1/actions/${body.data.id}`, { token: w.agent.token })).body.data.status).toBe('queued');
    } finally {
      await off.close();
    }
    const again = await startTestServer({ dir, clock: killClock });
    try {
      expect((await next(client(again.url), w.lamp)).body.data).toMatchObject({ id: body.data.id });
    } finally {
      await again.close();
    }
  }, 60_000);
});

describe('the workspace limit of scheduled actions', () => {
  const limited = useTestServer({ clock, env: { WORKSPACE_MAX_SCHEDULED_ACTIONS: '2', WORKSPACE_MAX_STORED_ACTIONS: '4' } });

  it('refuses one more with 429 capacity_exceeded, while actions queued now are not affected', async () => {
    const limitedOwner = await limited.ownerToken('scheduled-limit-owner');
    const w = await world({}, { api: limited.api, owner: limitedOwner });
    const first = await schedule(w, WEDNESDAY_NOON + 3_600_000, {}, limited.api);
    expect((await schedule(w, WEDNESDAY_NOON + 3_600_000, {}, limited.api)).status).toBe(201);
    const refused = await schedule(w, WEDNESDAY_NOON + 3_600_000, {}, limited.api);
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('capacity_exceeded');
    expect(refused.headers.get('retry-after')).toBe('60');
    // Scheduled actions take no place in the queue until due: one queued now still fits.
    expect((await requestAction(limited.api, w.agent.token, w.lamp.id, { capability: 'set_brightness', arguments: { level: 1 } })).status).toBe(201);
    const usage = await limited.api.get('/v1/usage', { token: limitedOwner });
    expect(usage.body.data.capacity.scheduledActions).toEqual({ used: 2, limit: 2 });
    // A cancelled one frees its place.
    expect((await limited.api.post(`/v1/actions/${first.body.data.id}/cancel`, { token: w.agent.token })).status).toBe(200);
    expect((await schedule(w, WEDNESDAY_NOON + 3_600_000, {}, limited.api)).status).toBe(201);
  });

  it('counts scheduled actions in the storage budget of stored actions from the start', async () => {
    const storingOwner = await limited.ownerToken('scheduled-storage-owner');
    const w = await world({}, { api: limited.api, owner: storingOwner });
    const cancel = async (id: string) => expect((await limited.api.post(`/v1/actions/${id}/cancel`, { token: w.agent.token })).status).toBe(200);
    const scheduledIds: string[] = [];
    for (let i = 0; i < 2; i++) {
      const res = await schedule(w, WEDNESDAY_NOON + 3_600_000, {}, limited.api);
      expect(res.status).toBe(201);
      scheduledIds.push(res.body.data.id);
    }
    expect((await requestAction(limited.api, w.agent.token, w.lamp.id, { capability: 'set_brightness', arguments: { level: 1 } })).status).toBe(201);
    await cancel(scheduledIds[0]!);
    expect((await schedule(w, WEDNESDAY_NOON + 3_600_000, {}, limited.api)).status).toBe(201);
    // Four stored: a cancelled and two scheduled ones, and the one queued now.
    const usage = (await limited.api.get('/v1/usage', { token: storingOwner })).body.data;
    expect(usage.storage.actions).toEqual({ used: 4, limit: 4 });
    expect(usage.capacity.scheduledActions.used).toBe(2);
    await cancel(scheduledIds[1]!);
    const refused = await schedule(w, WEDNESDAY_NOON + 7_200_000, {}, limited.api);
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('quota_exceeded');
  });
});

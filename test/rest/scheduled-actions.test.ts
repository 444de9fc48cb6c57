import { beforeAll, describe, expect, it } from 'vitest';
import { next, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

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

async function world(options: { conditions?: unknown; approval?: 'owner' } = {}): Promise<World> {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  const res = await api.post('/v1/grants', {
    token: owner,
    body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'], ...options },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { lamp, agent, grantId: res.body.data[0].id };
}

const schedule = (w: World, notBefore: number, extra: Record<string, unknown> = {}) =>
  requestAction(api, w.agent.token, w.lamp.id, { capability: 'set_brightness', arguments: { level: 20 }, notBefore, ttlSeconds: 60, ...extra });

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

import { beforeAll, describe, expect, it } from 'vitest';
import { toWorkspaceEvent, type WorkspaceEvent } from '../../src/domain/event-catalogue.js';
import { eventIds } from '../../src/domain/event-ids.js';
import { insideSchedule, nextWindowAt, type Schedule } from '../../src/domain/grant-conditions.js';
import { listWorkspaceEvents } from '../../src/store/event-journal.js';
import { grant, next, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

// A Wednesday, 12:00 UTC (13:00 in Berlin).
const WEDNESDAY_NOON = Date.UTC(2026, 11, 2, 12, 0);
const clock = manualClock(WEDNESDAY_NOON);
const server = useTestServer({ clock });
const api = server.api;
let owner: string;

beforeAll(async () => {
  owner = await server.ownerToken('conditions-owner');
});

async function world(conditions: unknown, capabilities = ['set_brightness']): Promise<{ lamp: AttachedDevice; agent: Agent; grantId: string }> {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  const res = await api.post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capabilities, conditions } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { lamp, agent, grantId: res.body.data[0].id };
}

/** The journal of the workspace a device was attached to, as the owner's stream and webhooks render it. */
async function journal(routingId: string): Promise<WorkspaceEvent[]> {
  const workspace = await server.service.db.get<{ id: string }>('SELECT id FROM workspaces WHERE routing_id = ?', [routingId]);
  const ids = await eventIds({ db: server.service.db, clock: { now: Date.now } });
  return (await listWorkspaceEvents(server.service.db, workspace!.id, 0, 1000)).map((row) => toWorkspaceEvent(row, ids));
}

const brightness = (agent: Agent, lamp: AttachedDevice, level: number) =>
  requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level } });

describe('conditions on grant records', () => {
  it('are set by POST /v1/grants, shown by GET /v1/grants, and default to null', async () => {
    const conditions = {
      arguments: { level: { minimum: 10, maximum: 60 } },
      schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '07:00', to: '22:00' }] },
      budget: { max: 10, perSeconds: 3600 },
    };
    const { lamp, agent } = await world(conditions);
    const listed = await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner });
    expect(listed.body.data).toHaveLength(1);
    expect(listed.body.data[0]).toMatchObject({ principal: agent.principal, capability: 'set_brightness', conditions });
    const [plain] = await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    expect(plain).toMatchObject({ conditions: null });
  });

  it('echo a schedule without a zone as UTC, and treat {} as null', async () => {
    const { lamp } = await world({ schedule: { windows: [{ days: ['sat'], from: '10:00', to: '10:00' }] } });
    const listed = await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner });
    expect(listed.body.data[0].conditions).toEqual({ schedule: { timeZone: 'UTC', windows: [{ days: ['sat'], from: '10:00', to: '10:00' }] } });
    const empty = await world({});
    const again = await api.get(`/v1/grants?deviceId=${empty.lamp.id}`, { token: owner });
    expect(again.body.data[0].conditions).toBeNull();
  });

  it('are replaced by POST /v1/grants/{id}/update, cleared by null, kept when absent, and journalled', async () => {
    const { lamp, grantId } = await world({ budget: { max: 5, perSeconds: 60 } });
    const changed = await api.post(`/v1/grants/${grantId}/update`, { token: owner, body: { conditions: { arguments: { level: { maximum: 30 } } } } });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);
    expect(changed.body.data.conditions).toEqual({ arguments: { level: { maximum: 30 } } });
    const kept = await api.post(`/v1/grants/${grantId}/update`, { token: owner, body: { approval: 'owner' } });
    expect(kept.body.data.conditions).toEqual({ arguments: { level: { maximum: 30 } } });
    const cleared = await api.post(`/v1/grants/${grantId}/update`, { token: owner, body: { conditions: null } });
    expect(cleared.body.data.conditions).toBeNull();
    const mine = (await journal(lamp.workspace)).filter((e) => e.data.grant?.deviceId === lamp.id);
    expect(mine.find((e) => e.type === 'grant.created')!.data.grant!.conditions).toEqual({ budget: { max: 5, perSeconds: 60 } });
    const updates = mine.filter((e) => e.type === 'grant.updated');
    expect(updates[0]!.data.grant!.conditions).toEqual({ arguments: { level: { maximum: 30 } } });
    expect(updates[0]!.data.grant!.previous!.conditions).toEqual({ budget: { max: 5, perSeconds: 60 } });
  });
});

describe('conditions that do not fit are 400 validation_failed at the field', () => {
  // Each kind of refusal is in test/service/grant-condition-rules.test.ts, without HTTP; this is the answer on the wire.
  it('refuses an unknown argument with the envelope, its issue at conditions.arguments.colour', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post('/v1/grants', {
      token: owner,
      body: { principal: 'agent:v', deviceId: lamp.id, capabilities: ['set_brightness'], conditions: { arguments: { colour: { enum: ['red'] } } } },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain('conditions.arguments.colour');
  });
});

describe('argument bounds', () => {
  it('refuse a value outside them with 403 arguments_not_allowed, issues and details.allowed', async () => {
    const { lamp, agent } = await world({ arguments: { level: { minimum: 10, maximum: 60 } } });
    const refused = await brightness(agent, lamp, 80);
    expect(refused.status, JSON.stringify(refused.body)).toBe(403);
    expect(refused.body.error).toMatchObject({
      code: 'arguments_not_allowed',
      issues: [{ path: 'arguments.level', message: expect.stringContaining('level 10 to 60') }],
      details: { allowed: { level: { minimum: 10, maximum: 60 } } },
    });
    expect(refused.body.error.message).toContain('allowed: level 10 to 60');
    expect((await brightness(agent, lamp, 60)).status).toBe(201);
    expect((await brightness(agent, lamp, 10)).status).toBe(201);
  });

  it('still leave the schema its own say: a value the schema refuses is validation_failed', async () => {
    const { lamp, agent } = await world({ arguments: { level: { maximum: 60 } } });
    const res = await brightness(agent, lamp, 101);
    expect(res.body.error.code).toBe('validation_failed');
  });

  it('apply to each device of a broadcast', async () => {
    const agent = await createAgent(api, owner);
    const bounded = await attachDevice(api, owner);
    const free = await attachDevice(api, owner);
    await api.post('/v1/grants', {
      token: owner,
      body: { principal: agent.principal, deviceId: bounded.id, capabilities: ['set_brightness'], conditions: { arguments: { level: { maximum: 20 } } } },
    });
    await grant(api, owner, agent.principal, free.id, ['set_brightness']);
    const res = await api.post('/v1/broadcasts', {
      token: agent.token,
      body: { deviceIds: [bounded.id, free.id], capability: 'set_brightness', arguments: { level: 50 }, idempotencyKey: 'bounded-broadcast' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.results.map((r: any) => [r.deviceId, r.ok, r.error?.code])).toEqual([
      [bounded.id, false, 'arguments_not_allowed'],
      [free.id, true, undefined],
    ]);
  });
});

describe('schedules', () => {
  const berlinWeekdays: Schedule = { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '07:00', to: '19:00' }] };

  it('refuse outside a window with 403 outside_schedule, nextWindowAt and the zone', async () => {
    const { lamp, agent } = await world({ schedule: berlinWeekdays });
    // Wednesday 12:00 UTC is 13:00 in Berlin: inside.
    expect((await brightness(agent, lamp, 5)).status).toBe(201);
    // Friday 18:30 UTC is 19:30 in Berlin: the next window opens Monday 07:00 Berlin = 06:00 UTC.
    clock.set(Date.UTC(2026, 11, 4, 18, 30));
    try {
      const refused = await brightness(agent, lamp, 5);
      expect(refused.status, JSON.stringify(refused.body)).toBe(403);
      expect(refused.body.error).toMatchObject({
        code: 'outside_schedule',
        details: { nextWindowAt: Date.UTC(2026, 11, 7, 6, 0), timeZone: 'Europe/Berlin' },
      });
      expect(refused.body.error.message).toContain('next window opens Mon 07:00 Europe/Berlin');
    } finally {
      clock.set(WEDNESDAY_NOON);
    }
  });

  it('run past midnight when to is earlier than from, counted from the day they start', () => {
    const nights: Schedule = { timeZone: 'UTC', windows: [{ days: ['fri'], from: '22:00', to: '02:00' }] };
    expect(insideSchedule(nights, Date.UTC(2026, 11, 4, 23, 0))).toBe(true); // Fri 23:00
    expect(insideSchedule(nights, Date.UTC(2026, 11, 5, 1, 59))).toBe(true); // Sat 01:59
    expect(insideSchedule(nights, Date.UTC(2026, 11, 5, 2, 0))).toBe(false); // Sat 02:00, excluded
    expect(insideSchedule(nights, Date.UTC(2026, 11, 5, 23, 0))).toBe(false); // Sat 23:00
    expect(insideSchedule(nights, Date.UTC(2026, 11, 4, 21, 59))).toBe(false);
    expect(nextWindowAt(nights, Date.UTC(2026, 11, 5, 3, 0))).toBe(Date.UTC(2026, 11, 11, 22, 0));
  });

  it('treat from equal to to as the whole day', () => {
    const saturday: Schedule = { timeZone: 'UTC', windows: [{ days: ['sat'], from: '08:00', to: '08:00' }] };
    expect(insideSchedule(saturday, Date.UTC(2026, 11, 5, 0, 0))).toBe(true);
    expect(insideSchedule(saturday, Date.UTC(2026, 11, 5, 23, 59))).toBe(true);
    expect(insideSchedule(saturday, Date.UTC(2026, 11, 6, 0, 0))).toBe(false);
    expect(nextWindowAt(saturday, Date.UTC(2026, 11, 2, 12, 0))).toBe(Date.UTC(2026, 11, 5, 0, 0));
  });

  it('read windows on the wall clock across a daylight-saving change', async () => {
    // Berlin springs forward on Sunday 2026-03-29 (02:00 CET → 03:00 CEST) and falls back on Sunday 2026-10-25.
    const sundayMorning: Schedule = { timeZone: 'Europe/Berlin', windows: [{ days: ['sun'], from: '07:00', to: '09:00' }] };
    expect(nextWindowAt(sundayMorning, Date.UTC(2026, 2, 28, 12, 0))).toBe(Date.UTC(2026, 2, 29, 5, 0)); // 07:00 CEST
    expect(insideSchedule(sundayMorning, Date.UTC(2026, 2, 29, 5, 30))).toBe(true);
    expect(insideSchedule(sundayMorning, Date.UTC(2026, 2, 29, 4, 30))).toBe(false); // 06:30 CEST
    expect(nextWindowAt(sundayMorning, Date.UTC(2026, 9, 24, 12, 0))).toBe(Date.UTC(2026, 9, 25, 6, 0)); // 07:00 CET
    // A window opening inside the skipped hour opens when the clock jumps to 03:00.
    const inTheGap: Schedule = { timeZone: 'Europe/Berlin', windows: [{ days: ['sun'], from: '02:30', to: '04:00' }] };
    expect(nextWindowAt(inTheGap, Date.UTC(2026, 2, 28, 12, 0))).toBe(Date.UTC(2026, 2, 29, 1, 0)); // 03:00 CEST
    expect(nextWindowAt(inTheGap, Date.UTC(2026, 2, 29, 0, 30))).toBe(Date.UTC(2026, 2, 29, 1, 0));

    // The same through the API, on the server's fixed clock: Saturday before the change, then inside the window after it.
    const { lamp, agent } = await world({ schedule: sundayMorning });
    clock.set(Date.UTC(2026, 2, 29, 0, 30)); // 01:30 CET
    try {
      const refused = await brightness(agent, lamp, 5);
      expect(refused.body.error).toMatchObject({ code: 'outside_schedule', details: { nextWindowAt: Date.UTC(2026, 2, 29, 5, 0) } });
      expect(refused.body.error.message).toContain('next window opens Sun 07:00 Europe/Berlin');
      clock.set(Date.UTC(2026, 2, 29, 5, 0)); // 07:00 CEST
      expect((await brightness(agent, lamp, 5)).status).toBe(201);
    } finally {
      clock.set(WEDNESDAY_NOON);
    }
  });

  it('are checked after the arguments', async () => {
    const { lamp, agent } = await world({ arguments: { level: { maximum: 10 } }, schedule: { windows: [{ days: ['sun'], from: '07:00', to: '08:00' }] } });
    expect((await brightness(agent, lamp, 50)).body.error.code).toBe('arguments_not_allowed');
    expect((await brightness(agent, lamp, 5)).body.error.code).toBe('outside_schedule');
  });
});

describe('budgets', () => {
  it('refuse past max in a sliding window with 429 grant_budget_exhausted, Retry-After and details', async () => {
    const { lamp, agent } = await world({ budget: { max: 2, perSeconds: 60 } });
    const start = clock.now();
    try {
      expect((await brightness(agent, lamp, 1)).status).toBe(201);
      clock.advance(30_000);
      expect((await brightness(agent, lamp, 2)).status).toBe(201);
      const refused = await brightness(agent, lamp, 3);
      expect(refused.status, JSON.stringify(refused.body)).toBe(429);
      expect(refused.headers.get('retry-after')).toBe('30');
      expect(refused.body.error).toMatchObject({ code: 'grant_budget_exhausted', details: { max: 2, perSeconds: 60, used: 2, retryAt: start + 60_000 } });
      expect(refused.body.error.message).toMatch(/2 of 2 used .*; next at \d\d:\d\d UTC/);
      // The refused request did not count: one slot frees when the first action leaves the window.
      clock.set(start + 60_000);
      expect((await brightness(agent, lamp, 4)).status).toBe(201);
      expect((await brightness(agent, lamp, 5)).status).toBe(429);
    } finally {
      clock.set(WEDNESDAY_NOON);
    }
  });

  it('count cancelled actions, and keep the count when the grant is updated', async () => {
    const { lamp, agent, grantId } = await world({ budget: { max: 1, perSeconds: 3600 } });
    const first = await brightness(agent, lamp, 1);
    expect(first.status).toBe(201);
    expect((await api.post(`/v1/actions/${first.body.data.id}/cancel`, { token: agent.token })).status).toBe(200);
    await api.post(`/v1/grants/${grantId}/update`, { token: owner, body: { conditions: { budget: { max: 1, perSeconds: 3600 } } } });
    expect((await brightness(agent, lamp, 2)).body.error.code).toBe('grant_budget_exhausted');
  });

  it('give each function its own count', async () => {
    const { lamp, agent } = await world({ budget: { max: 1, perSeconds: 3600 } }, ['set_brightness', 'set_power']);
    expect((await brightness(agent, lamp, 1)).status).toBe(201);
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } })).status).toBe(201);
    expect((await brightness(agent, lamp, 1)).status).toBe(429);
  });

  it('are exact under concurrency: 40 concurrent requests against max 10 create exactly 10', async () => {
    const { lamp, agent } = await world({ budget: { max: 10, perSeconds: 3600 } });
    const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => brightness(agent, lamp, i)));
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(10);
    expect(statuses.filter((s) => s === 429)).toHaveLength(30);
    expect(answers.filter((a) => a.status === 429).every((a) => a.body.error.code === 'grant_budget_exhausted')).toBe(true);
    const exported = await api.get('/v1/actions/export', { token: owner });
    expect((exported.body.data.actions as any[]).filter((a) => a.deviceId === lamp.id)).toHaveLength(10);
  });
});

describe('conditions checked again at hand-out and approval', () => {
  const action = async (id: string) => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;

  it('cancel a queued action whose schedule window closed before next, with outside_schedule, and hand out nothing', async () => {
    // Wednesday 12:00–12:05 UTC; the action is queued at 12:04:30 and fetched at 12:05.
    const { lamp, agent } = await world({ schedule: { windows: [{ days: ['wed'], from: '12:00', to: '12:05' }] } });
    clock.set(WEDNESDAY_NOON + 270_000);
    try {
      const queued = await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 5 }, ttlSeconds: 120 });
      expect(queued.status, JSON.stringify(queued.body)).toBe(201);
      clock.set(WEDNESDAY_NOON + 300_000);
      const fetched = await next(api, lamp);
      expect(fetched.body.data).toBeNull();
      expect(await action(queued.body.data.id)).toMatchObject({ status: 'cancelled', cancelReason: 'outside_schedule' });
    } finally {
      clock.set(WEDNESDAY_NOON);
    }
  });

  it('cancel queued actions that tightened bounds no longer allow, with conditions_changed', async () => {
    const { lamp, agent, grantId } = await world({ arguments: { level: { maximum: 80 } } });
    const high = await brightness(agent, lamp, 70);
    const low = await brightness(agent, lamp, 20);
    const tightened = await api.post(`/v1/grants/${grantId}/update`, { token: owner, body: { conditions: { arguments: { level: { maximum: 50 } } } } });
    expect(tightened.status).toBe(200);
    expect(await action(high.body.data.id)).toMatchObject({ status: 'cancelled', cancelReason: 'conditions_changed' });
    const fetched = await next(api, lamp);
    expect(fetched.body.data).toMatchObject({ id: low.body.data.id, args: { level: 20 } });
  });

  it('answer an approval the conditions no longer allow with 409 and cancel the action with the reason', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    const given = await api.post('/v1/grants', {
      token: owner,
      body: {
        principal: agent.principal,
        deviceId: lamp.id,
        capabilities: ['set_brightness'],
        approval: 'owner',
        conditions: { schedule: { windows: [{ days: ['wed'], from: '11:00', to: '13:00' }] } },
      },
    });
    expect(given.status).toBe(201);
    const waiting = await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 5 }, approvalTtlSeconds: 7200 });
    expect(waiting.body.data.status).toBe('awaiting_approval');
    const inBounds = await brightness(agent, lamp, 6);
    clock.set(WEDNESDAY_NOON + 3_600_000); // 13:00: the window has closed
    try {
      const approved = await api.post(`/v1/actions/${waiting.body.data.id}/approve`, { token: owner, body: {} });
      expect(approved.status, JSON.stringify(approved.body)).toBe(409);
      expect(approved.body.error.action).toMatchObject({ status: 'cancelled', cancelReason: 'outside_schedule' });
    } finally {
      clock.set(WEDNESDAY_NOON);
    }
    // Inside the window an approval queues it, and its limit is the window's end.
    const ok = await api.post(`/v1/actions/${inBounds.body.data.id}/approve`, { token: owner, body: {} });
    expect(ok.status, JSON.stringify(ok.body)).toBe(200);
    expect(ok.body.data.status).toBe('queued');
  });
});

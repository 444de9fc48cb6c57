import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next, queue, report, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

// The state machine of docs/reference/rules.md "Actions":
//   queued → received → succeeded | failed;  queued → cancelled;  queued | received → expired.
// A hand-moved clock drives the deadlines, so no test sleeps.

const clock = manualClock();
let owner: string;
let lamp: AttachedDevice;
let otherLamp: AttachedDevice;
let agent: { token: string; principal: string };

const server = useTestServer({ clock });
const http = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('alice');
  lamp = await attachDevice(http, owner);
  otherLamp = await attachDevice(http, owner, { name: 'Other lamp' });
  agent = await createAgent(http, owner, { access: 'act' });
  await grant(http, owner, agent.principal, lamp.id, ['get_state', 'set_power', 'set_brightness']);
  await grant(http, owner, agent.principal, otherLamp.id, ['set_power']);
});

const getAction = (id: string, token = agent.token) => http.get(`/v1/actions/${id}`, { token });
const cancel = (id: string, token = agent.token) => http.post(`/v1/actions/${id}/cancel`, { token });

/** Drains the lamp's queue so each test starts from an empty one. */
async function drain(device: AttachedDevice) {
  for (;;) if ((await next(http, device)).body.data === null) return;
}

describe('request → next → result', () => {
  it('moves an action queued → received → succeeded and shows it to the agent and the owner', async () => {
    const requested = await requestAction(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(requested.status, JSON.stringify(requested.body)).toBe(201);
    const action = requested.body.data;
    expect(action).toMatchObject({
      status: 'queued',
      deviceId: lamp.id,
      capability: 'set_power',
      arguments: { on: true },
      principal: agent.principal,
      dispatchedAt: null,
      completedAt: null,
      result: null,
      error: null,
      broadcastId: null,
    });
    expect(action.expiresAt - action.createdAt).toBe(30_000);

    const fetched = await next(http, lamp);
    expect(fetched.status).toBe(200);
    expect(fetched.body.data).toEqual({
      id: action.id,
      deviceId: lamp.id,
      capability: 'set_power',
      args: { on: true },
      status: 'received',
      createdAt: action.createdAt,
      expiresAt: action.expiresAt,
      dispatchedAt: clock.now(),
    });
    expect((await getAction(action.id)).body.data).toMatchObject({ status: 'received', dispatchedAt: clock.now() });
    expect((await next(http, lamp)).body).toEqual({ data: null });

    const reported = await report(http, lamp, { actionId: action.id, ok: true, result: { on: true } });
    expect(reported.status, JSON.stringify(reported.body)).toBe(200);
    expect(reported.body.data).toMatchObject({ status: 'succeeded', result: { on: true }, error: null, completedAt: clock.now() });

    const seen = await getAction(action.id);
    expect(seen.body.data).toMatchObject({ status: 'succeeded', result: { on: true }, error: null });
    const history = await http.get('/v1/actions', { token: owner });
    expect(history.body.data[0].id).toBe(action.id);
  });

  it('moves received → failed with the reported error', async () => {
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
    expect((await next(http, lamp)).body.data.id).toBe(action.id);
    const failed = await report(http, lamp, { actionId: action.id, ok: false, error: { code: 'relay_stuck', message: 'The relay did not move.' } });
    expect(failed.status, JSON.stringify(failed.body)).toBe(200);
    expect(failed.body.data).toMatchObject({ status: 'failed', result: null, error: { code: 'relay_stuck', message: 'The relay did not move.' } });
    expect((await getAction(action.id)).body.data.status).toBe('failed');
  });

  it('hands out commands oldest first', async () => {
    await drain(lamp);
    const first = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const second = await queue(http, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 5 } });
    const third = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const ids = [];
    for (let i = 0; i < 3; i++) ids.push((await next(http, lamp)).body.data.id);
    expect(ids).toEqual([first.id, second.id, third.id]);
  });

  it('rejects arguments that do not match the function schema with issues pointing at the field', async () => {
    const res = await requestAction(http, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 101 } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues).toEqual([{ path: 'arguments.level', message: expect.stringContaining('100') }]);
  });

  it('rejects a ttlSeconds outside 1..300 and accepts both bounds', async () => {
    for (const ttlSeconds of [0, 301, 1.5]) {
      const res = await requestAction(http, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds });
      expect(res.status, String(ttlSeconds)).toBe(400);
      expect(res.body.error.issues[0].path).toBe('ttlSeconds');
    }
    for (const ttlSeconds of [1, 300]) {
      const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds });
      expect(action.expiresAt - action.createdAt).toBe(ttlSeconds * 1000);
    }
  });

  it('rejects a failed result without an error and a successful one with an error (400)', async () => {
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const noError = await report(http, lamp, { actionId: action.id, ok: false });
    expect(noError.status).toBe(400);
    expect(noError.body.error.issues[0].path).toBe('error');
    const withError = await report(http, lamp, { actionId: action.id, ok: true, error: { code: 'x', message: 'y' } });
    expect(withError.status).toBe(400);
  });
});

describe('queued → cancelled', () => {
  it('lets the requesting agent cancel a queued action; the device never receives it', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const cancelled = await cancel(action.id);
    expect(cancelled.status, JSON.stringify(cancelled.body)).toBe(200);
    expect(cancelled.body.data).toMatchObject({ id: action.id, status: 'cancelled', completedAt: clock.now(), dispatchedAt: null });
    expect((await next(http, lamp)).body).toEqual({ data: null });
  });

  it('lets the owner cancel a queued action', async () => {
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const cancelled = await cancel(action.id, owner);
    expect(cancelled.status).toBe(200);
    expect(cancelled.body.data.status).toBe('cancelled');
  });

  it('answers 409 conflict to a second cancel and to a result for the cancelled action', async () => {
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await cancel(action.id)).status).toBe(200);
    const again = await cancel(action.id);
    expect(again.status).toBe(409);
    expect(again.body.error.code).toBe('conflict');
    const late = await report(http, lamp, { actionId: action.id, ok: true });
    expect(late.status).toBe(409);
    expect(late.body.error.code).toBe('conflict');
    expect((await getAction(action.id)).body.data.status).toBe('cancelled');
  });

  it('answers 409 conflict to a cancel of a received action, which stays received', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await next(http, lamp);
    const res = await cancel(action.id);
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conflict');
    expect((await getAction(action.id)).body.data.status).toBe('received');
    expect((await report(http, lamp, { actionId: action.id, ok: true })).body.data.status).toBe('succeeded');
  });

  it('answers 409 conflict to a cancel of a finished action', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(http, lamp);
    await report(http, lamp, { actionId: action.id, ok: true, result: { on: false } });
    expect((await cancel(action.id)).status).toBe(409);
  });

  it("answers 404 to another principal's agent: it cannot see or cancel the action", async () => {
    const stranger = await createAgent(http, owner, { access: 'act' });
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect((await getAction(action.id, stranger.token)).status).toBe(404);
    expect((await cancel(action.id, stranger.token)).status).toBe(404);
    expect((await getAction(action.id)).body.data.status).toBe('queued');
  });
});

describe('queued | received → expired', () => {
  it('expires a queued action at its deadline: next skips it, result and cancel answer 409', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 1 });
    clock.advance(1000); // expiresAt is exclusive: at the deadline the action is already due
    expect((await next(http, lamp)).body).toEqual({ data: null });
    const seen = await getAction(action.id);
    expect(seen.body.data).toMatchObject({ status: 'expired', completedAt: action.expiresAt, dispatchedAt: null });
    expect((await report(http, lamp, { actionId: action.id, ok: true })).status).toBe(409);
    expect((await cancel(action.id)).status).toBe(409);
  });

  it('keeps a result that comes after the deadline: 200, stays expired, shows what the device reported and when', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 2 });
    expect((await next(http, lamp)).body.data.id).toBe(action.id);
    clock.advance(2001);
    const arrived = clock.now();
    const late = await report(http, lamp, { actionId: action.id, ok: true, result: { on: true } });
    expect(late.status, JSON.stringify(late.body)).toBe(200);
    const stored = { status: 'expired', completedAt: action.expiresAt, result: { on: true }, error: null, reportedLateAt: arrived };
    expect(late.body.data).toMatchObject(stored);
    expect((await getAction(action.id)).body.data).toMatchObject(stored);
    expect((await http.get(`/v1/actions/${action.id}`, { token: owner })).body.data).toMatchObject(stored);
  });

  it('answers a repeated late report with the stored action, and a conflicting one with 409', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 2 });
    await next(http, lamp);
    clock.advance(2001);
    const failure = { actionId: action.id, ok: false, error: { code: 'jammed', message: 'relay stuck' } };
    const first = await report(http, lamp, failure);
    expect(first.body.data).toMatchObject({ status: 'expired', error: { code: 'jammed', message: 'relay stuck' }, result: null });
    clock.advance(10);
    const repeat = await report(http, lamp, failure);
    expect(repeat.status).toBe(200);
    expect(repeat.body.data).toEqual(first.body.data);
    const conflicting = await report(http, lamp, { actionId: action.id, ok: true, result: { on: true } });
    expect(conflicting.status).toBe(409);
    expect(conflicting.body.error.code).toBe('conflict');
  });

  it('still answers 409 to a report for an action that expired before any device fetched it', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 2 });
    clock.advance(2001);
    expect((await report(http, lamp, { actionId: action.id, ok: true })).status).toBe(409);
    expect((await getAction(action.id)).body.data).toMatchObject({ status: 'expired', reportedLateAt: null, result: null });
  });

  it('accepts a result one millisecond before the deadline', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 1 });
    await next(http, lamp);
    clock.advance(999);
    expect((await report(http, lamp, { actionId: action.id, ok: true })).body.data.status).toBe('succeeded');
    clock.advance(10);
    expect((await getAction(action.id)).body.data.status).toBe('succeeded');
  });
});

describe('POST /v1/device/{deviceId}/result: forbidden transitions', () => {
  it('answers 409 to a result for an action still queued (the device never fetched it)', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const res = await report(http, lamp, { actionId: action.id, ok: true });
    expect(res.status).toBe(409);
    expect(res.body.error.code).toBe('conflict');
    expect((await getAction(action.id)).body.data.status).toBe('queued');
  });

  it('answers a repeat of the same report with the stored action (200), also for failures', async () => {
    await drain(lamp);
    const ok = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const bad = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(http, lamp);
    await next(http, lamp);
    const first = await report(http, lamp, { actionId: ok.id, ok: true, result: { b: 1, a: [1, 2] } });
    clock.advance(5);
    const repeat = await report(http, lamp, { actionId: ok.id, ok: true, result: { a: [1, 2], b: 1 } });
    expect(repeat.status).toBe(200);
    expect(repeat.body.data).toEqual(first.body.data);

    const failure = { actionId: bad.id, ok: false, error: { code: 'offline', message: 'no answer' } };
    const firstFailure = await report(http, lamp, failure);
    expect((await report(http, lamp, failure)).body).toEqual(firstFailure.body);
  });

  it('answers 409 to a different report for a finished action and keeps the first', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(http, lamp);
    await report(http, lamp, { actionId: action.id, ok: true, result: { on: true } });
    for (const conflicting of [
      { actionId: action.id, ok: true, result: { on: false } },
      { actionId: action.id, ok: true },
      { actionId: action.id, ok: false, error: { code: 'e', message: 'm' } },
    ]) {
      const res = await report(http, lamp, conflicting);
      expect(res.status, JSON.stringify(conflicting)).toBe(409);
      expect(res.body.error.code).toBe('conflict');
    }
    expect((await getAction(action.id)).body.data).toMatchObject({ status: 'succeeded', result: { on: true } });
  });

  it('answers 409 to a repeated failure report with another error message or code, and keeps the first', async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(http, lamp);
    const first = await report(http, lamp, { actionId: action.id, ok: false, error: { code: 'offline', message: 'no answer' } });
    expect(first.status).toBe(200);
    for (const error of [
      { code: 'offline', message: 'no answer after 3 tries' },
      { code: 'jammed', message: 'no answer' },
      { code: 'jammed', message: 'relay stuck' },
    ]) {
      const res = await report(http, lamp, { actionId: action.id, ok: false, error });
      expect(res.status, JSON.stringify(error)).toBe(409);
      expect(res.body.error.code).toBe('conflict');
    }
    expect((await report(http, lamp, { actionId: action.id, ok: false, error: { code: 'offline', message: 'no answer' } })).body).toEqual(first.body);
    expect((await getAction(action.id)).body.data).toMatchObject({ status: 'failed', error: { code: 'offline', message: 'no answer' } });
  });

  it("answers 404 to a device reporting another device's action, which stays untouched", async () => {
    await drain(lamp);
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(http, lamp);
    const res = await report(http, otherLamp, { actionId: action.id, ok: true });
    expect(res.status).toBe(404);
    expect(res.body.error.code).toBe('not_found');
    expect((await getAction(action.id)).body.data.status).toBe('received');
  });

  it('answers 403 to a device using its credential on another device path', async () => {
    const action = await queue(http, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const res = await http.post(`/v1/device/${lamp.id}/result`, { token: otherLamp.token, body: { actionId: action.id, ok: true } });
    expect(res.status).toBe(403);
    const poll = await http.post(`/v1/device/${lamp.id}/next`, { token: otherLamp.token, headers: { 'x-service-workspace': lamp.workspace } });
    expect(poll.status).toBe(403);
  });

  it('answers 404 to a result for an unknown action', async () => {
    const res = await report(http, lamp, { actionId: '3f1e2d3c-4b5a-4697-8877-665544332211', ok: true });
    expect(res.status).toBe(404);
  });
});

import fs from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runHousekeeping } from '../../src/domain/housekeeping.js';
import { EVENT_TYPES } from '../../src/domain/event-catalogue.js';
import { client } from '../helpers/api.js';
import { grant, next, queue, report } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { journalIdOf } from '../helpers/event-ids.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { openSse, type SseEvent, type SseStream } from '../helpers/sse.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

// GET /v1/events, the owner's live event stream (docs/reference/events.md "Owner events"), read with a real
// Server-Sent Events client over fetch (test/helpers/sse.ts).

const open: SseStream[] = [];

/** Opens the stream and keeps it for closing after the test. */
async function stream(token: string, options: { lastEventId?: string; query?: string } = {}): Promise<SseStream> {
  const sse = await openSse(`${server.url}/v1/events${options.query ?? ''}`, { token, ...(options.lastEventId ? { lastEventId: options.lastEventId } : {}) });
  open.push(sse);
  return sse;
}

const parsed = (event: SseEvent) =>
  JSON.parse(event.data) as { id: string; type: string; data: { action?: { id: string; status: string }; grant?: { id: string } } };
const aboutAction = (actionId: string) => (event: SseEvent) => parsed(event).data.action?.id === actionId;

/** Event hub subscriptions held now: every open stream holds one, and must give it back. */
let subscribed = 0;

const server = useTestServer({ env: { EVENTS_HEARTBEAT_SECONDS: '0.2', EVENTS_POLL_SECONDS: '0.5', EVENTS_MAX_STREAMS_PER_WORKSPACE: '3' } });
const api = server.api;

beforeAll(async () => {
  const hub = server.service.events;
  const subscribe = hub.subscribe.bind(hub);
  hub.subscribe = (listener) => {
    subscribed += 1;
    const unsubscribe = subscribe(listener);
    return () => {
      subscribed -= 1;
      unsubscribe();
    };
  };
});
afterAll(async () => {
  for (const sse of open) sse.close();
});

describe('GET /v1/events', () => {
  it('streams text/event-stream: each event with its id, its type and the event as JSON', async () => {
    const owner = await server.ownerToken('events-format');
    const lamp = await attachDevice(api, owner);
    const sse = await stream(owner);
    expect(sse.status).toBe(200);
    expect(sse.headers.get('content-type')).toMatch(/^text\/event-stream/);
    expect(sse.headers.get('cache-control')).toBe('no-store');

    const [given] = await grant(api, owner, 'agent:format', lamp.id, ['set_power'], null, 'owner');
    const event = await sse.next();
    expect(event.event).toBe('grant.created');
    const body = parsed(event);
    expect(body).toMatchObject({ id: event.id, type: 'grant.created', data: { grant: { id: given!.id, approval: 'owner' } } });
    expect(Object.keys(body).sort()).toEqual(['createdAt', 'data', 'id', 'type']);
  });

  it("delivers an action's events in order as a device runs it: created, received, succeeded", async () => {
    const owner = await server.ownerToken('events-order');
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'] });
    const sse = await stream(owner);

    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await next(api, lamp)).status).toBe(200);
    expect((await report(api, lamp, { actionId: action.id, ok: true, result: { on: true } })).status).toBe(200);

    const events = [await sse.nextWhere(aboutAction(action.id)), await sse.nextWhere(aboutAction(action.id)), await sse.nextWhere(aboutAction(action.id))];
    expect(events.map((e) => [e.event, parsed(e).data.action!.status])).toEqual([
      ['action.created', 'queued'],
      ['action.updated', 'received'],
      ['action.updated', 'succeeded'],
    ]);
    const ids = await Promise.all(events.map((e) => journalIdOf(server, lamp.workspace, e.id!)));
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it('tells the owner at once that an action waits for their approval, then that it was approved', async () => {
    const owner = await server.ownerToken('events-approval');
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
    const sse = await stream(owner);

    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await api.post(`/v1/actions/${action.id}/approve`, { token: owner, body: {} })).status).toBe(200);

    const events = [await sse.nextWhere(aboutAction(action.id)), await sse.nextWhere(aboutAction(action.id)), await sse.nextWhere(aboutAction(action.id))];
    expect(events.map((e) => [e.event, parsed(e).data.action!.status])).toEqual([
      ['action.created', 'awaiting_approval'],
      ['approval.requested', 'awaiting_approval'],
      ['action.updated', 'queued'],
    ]);
  });

  it('starts a fresh connection now: nothing from before it is replayed', async () => {
    const owner = await server.ownerToken('events-fresh');
    const lamp = await attachDevice(api, owner);
    await grant(api, owner, 'agent:before', lamp.id, ['set_power']);
    const sse = await stream(owner);
    const [after] = await grant(api, owner, 'agent:after', lamp.id, ['get_state']);
    const event = await sse.next();
    expect(parsed(event).data.grant!.id).toBe(after!.id);
  });

  it('only ever shows the owner their own workspace', async () => {
    const ownerA = await server.ownerToken('events-a');
    const ownerB = await server.ownerToken('events-b');
    const lampA = await attachDevice(api, ownerA);
    const lampB = await attachDevice(api, ownerB);
    const sseA = await stream(ownerA);
    const sseB = await stream(ownerB);

    // B's grant is journalled before A's: were it leaked to A, it would come first.
    const [grantB] = await grant(api, ownerB, 'agent:b', lampB.id, ['set_power']);
    const [grantA] = await grant(api, ownerA, 'agent:a', lampA.id, ['set_power']);
    expect(parsed(await sseA.next()).data.grant!.id).toBe(grantA!.id);
    expect(parsed(await sseB.next()).data.grant!.id).toBe(grantB!.id);
  });

  it('refuses agents and devices (403) and callers without a credential (401)', async () => {
    const owner = await server.ownerToken('events-refused');
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    for (const [token, status] of [
      [agent.token, 403],
      [lamp.token, 403],
      [undefined, 401],
    ] as const) {
      const res = await api.get('/v1/events', { token });
      expect(res.status).toBe(status);
      expect(res.body.error.code).toBe(status === 401 ? 'unauthorized' : 'forbidden');
    }
  });
});

describe('resumption with Last-Event-ID', () => {
  it('after a dropped connection, replays exactly the missed events, then continues live without duplicates', async () => {
    const owner = await server.ownerToken('events-resume');
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    const first = await stream(owner);
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const seen = await first.next();
    expect(seen.event).toBe('grant.created');
    first.close();

    const missed = [
      await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } }),
      await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: false } }),
    ];
    const resumed = await stream(owner, { lastEventId: seen.id! });
    const replayed = [await resumed.next(), await resumed.next()];
    expect(replayed.map((e) => [e.event, parsed(e).data.action!.id])).toEqual(missed.map((a) => ['action.created', a.id]));

    const live = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const after = await resumed.next();
    expect([after.event, parsed(after).data.action!.id]).toEqual(['action.created', live.id]);
    expect(new Set([seen, ...replayed, after].map((e) => e.id)).size).toBe(4);
  });

  it('takes the id from the lastEventId query parameter when the client cannot set the header', async () => {
    const owner = await server.ownerToken('events-query');
    const lamp = await attachDevice(api, owner);
    const first = await stream(owner);
    await grant(api, owner, 'agent:q1', lamp.id, ['set_power']);
    const seen = await first.next();
    first.close();
    const [missed] = await grant(api, owner, 'agent:q2', lamp.id, ['set_power']);
    const resumed = await stream(owner, { query: `?lastEventId=${seen.id}` });
    expect(parsed(await resumed.next()).data.grant!.id).toBe(missed!.id);
  });

  it("never replays another workspace's events, whatever id it resumes from", async () => {
    const ownerA = await server.ownerToken('events-resume-a');
    const ownerB = await server.ownerToken('events-resume-b');
    const lampA = await attachDevice(api, ownerA);
    const lampB = await attachDevice(api, ownerB);
    const sseB = await stream(ownerB);
    await grant(api, ownerB, 'agent:b', lampB.id, ['set_power']);
    const ofB = (await sseB.next()).id!;
    await grant(api, ownerB, 'agent:b2', lampB.id, ['set_power']);
    // B's id means nothing in A's workspace: A starts afresh, and sees its own events only.
    const resumed = await stream(ownerA, { lastEventId: ofB });
    expect(parsed(await resumed.next())).toMatchObject({ type: 'reset', data: { reason: 'unknown_event_id' } });
    await grant(api, ownerB, 'agent:b3', lampB.id, ['set_power']);
    const [own] = await grant(api, ownerA, 'agent:a', lampA.id, ['set_power']);
    expect(parsed(await resumed.next()).data.grant!.id).toBe(own!.id);
  });

  it('answers a Last-Event-ID older than the replay window with a reset event first, then goes on live', async () => {
    const owner = await server.ownerToken('events-window');
    const lamp = await attachDevice(api, owner);
    const first = await stream(owner);
    await grant(api, owner, 'agent:w1', lamp.id, ['set_power']);
    const seen = await first.next();
    first.close();
    await grant(api, owner, 'agent:w2', lamp.id, ['set_power']);
    // A day and more later, housekeeping prunes the window's whole content.
    const later = Date.now() + 25 * 3_600_000;
    const pruned = await runHousekeeping({ db: server.service.db, clock: { now: () => later } });
    expect(pruned.workspaceEvents).toBeGreaterThan(0);

    const resumed = await stream(owner, { lastEventId: seen.id! });
    const reset = await resumed.next();
    expect(reset.event).toBe('reset');
    expect(JSON.parse(reset.data)).toMatchObject({ type: 'reset', id: reset.id, data: { reason: 'events_lost' } });
    const [live] = await grant(api, owner, 'agent:w3', lamp.id, ['set_power']);
    const event = await resumed.next();
    expect(parsed(event).data.grant!.id).toBe(live!.id);
    expect(await journalIdOf(server, lamp.workspace, event.id!)).toBeGreaterThan(await journalIdOf(server, lamp.workspace, reset.id!));
  });

  it('answers an id the service never gave with a reset event (unknown_event_id)', async () => {
    const owner = await server.ownerToken('events-unknown');
    const sse = await stream(owner, { lastEventId: '999999999999' });
    const reset = await sse.next();
    expect(reset.event).toBe('reset');
    expect(JSON.parse(reset.data).data.reason).toBe('unknown_event_id');
  });

  it('refuses a Last-Event-ID that is not an event id (400)', async () => {
    const owner = await server.ownerToken('events-bad-id');
    const res = await api.get('/v1/events', { token: owner, headers: { 'last-event-id': 'yesterday' } });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].path).toBe('lastEventIdHeader');
  });
});

describe('heartbeats (EVENTS_HEARTBEAT_SECONDS)', () => {
  it('sends a comment line while nothing happens', async () => {
    const owner = await server.ownerToken('events-heartbeat');
    const sse = await stream(owner);
    await vi.waitFor(() => expect(sse.comments).toContain('heartbeat'), { timeout: 10_000, interval: 50 });
  });
});

describe('open streams per workspace (EVENTS_MAX_STREAMS_PER_WORKSPACE)', () => {
  it('answers 429 capacity_exceeded beyond the limit, and frees the place and the subscription when a client goes away', async () => {
    const owner = await server.ownerToken('events-limit');
    const base = subscribed;
    const streams = [await stream(owner), await stream(owner), await stream(owner)];
    await vi.waitFor(() => expect(subscribed).toBe(base + 3), { timeout: 10_000, interval: 50 });
    expect(streams.map((s) => s.status)).toEqual([200, 200, 200]);
    const refused = await api.get('/v1/events', { token: owner });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('capacity_exceeded');
    expect(refused.headers.get('retry-after')).toBe('5');
    // Another workspace has places of its own.
    const other = await stream(await server.ownerToken('events-limit-other'));
    expect(other.status).toBe(200);
    other.close();
    await vi.waitFor(() => expect(subscribed).toBe(base + 3), { timeout: 10_000, interval: 50 });

    streams[0]!.close();
    // Its subscription to the event hub goes with it.
    await vi.waitFor(() => expect(subscribed).toBe(base + 2), { timeout: 10_000, interval: 50 });
    await vi.waitFor(
      async () => {
        const again = await openSse(`${server.url}/v1/events`, { token: owner });
        open.push(again);
        expect(again.status).toBe(200);
      },
      { timeout: 10_000, interval: 100 },
    );
  });
});

describe('device online and offline', () => {
  it('reports each transition once: online when it calls in, offline when it goes quiet for 60 s, online again', async () => {
    const clock = manualClock();
    const own = await startTestServer({ clock, env: { EXPIRY_SWEEP_SECONDS: '1', EVENTS_POLL_SECONDS: '0.2' } });
    const ownApi = client(own.url);
    try {
      const owner = await own.ownerToken('events-presence');
      const sse = await openSse(`${own.url}/v1/events`, { token: owner });
      open.push(sse);
      const lamp = await attachDevice(ownApi, owner);
      const isLamp = (event: SseEvent) => event.event.startsWith('device.') && JSON.parse(event.data).data.device.id === lamp.id;

      const online = await sse.nextWhere(isLamp);
      expect(online.event).toBe('device.online');
      expect(JSON.parse(online.data).data.device).toMatchObject({ id: lamp.id, name: 'Lamp', lastSeenAt: clock.now() });

      clock.advance(61_000);
      expect((await sse.nextWhere(isLamp)).event).toBe('device.offline');
      // Several sweeps pass while it stays quiet; then it calls in again.
      clock.advance(61_000);
      expect((await next(ownApi, lamp)).status).toBe(200);
      expect((await sse.nextWhere(isLamp)).event).toBe('device.online');
      // Calling in again while online journals nothing: the next lamp event is the revocation.
      clock.advance(10_000);
      expect((await next(ownApi, lamp)).status).toBe(200);
      expect((await ownApi.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
      expect((await sse.nextWhere(isLamp)).event).toBe('device.revoked');
    } finally {
      await own.close();
    }
  });
});

describe('several instances on one database', () => {
  it('serves on one instance what another journalled, without a shared bus, and reports a transition once though both sweep', async () => {
    const clock = manualClock();
    const env = { EXPIRY_SWEEP_SECONDS: '1', EVENTS_POLL_SECONDS: '0.2' };
    const first = await startTestServer({ clock, env });
    const second = await startTestServer({ clock, env, dir: first.dir });
    try {
      // Workspaces are named by the session's claim: both instances' owners are the same workspace.
      const viaFirst = client(first.url);
      const lamp = await attachDevice(viaFirst, await first.ownerToken('events-instances'));
      const sse = await openSse(`${second.url}/v1/events`, { token: await second.ownerToken('events-instances') });
      open.push(sse);
      const isLamp = (event: SseEvent) => event.event.startsWith('device.') && JSON.parse(event.data).data.device.id === lamp.id;

      clock.advance(61_000);
      expect((await sse.nextWhere(isLamp)).event).toBe('device.offline');
      // Both instances sweep every second: only one of them changes the device's reported state.
      await new Promise((resolve) => setTimeout(resolve, 2_500));
      clock.advance(1_000);
      expect((await next(viaFirst, lamp)).status).toBe(200);
      expect((await sse.nextWhere(isLamp)).event).toBe('device.online');
      expect(sse.skipped.filter(isLamp)).toEqual([]);
    } finally {
      await second.close();
      await first.close();
    }
  });
});

describe('shutdown', () => {
  it('ends an open stream cleanly when the service closes, without waiting for the grace period', async () => {
    const own = await startTestServer();
    const owner = await own.ownerToken('events-shutdown');
    const sse = await openSse(`${own.url}/v1/events`, { token: owner });
    expect(sse.status).toBe(200);
    await own.close();
    // Had close() waited for its cut-off, the connection would have been destroyed, not ended.
    expect(await sse.ended).toEqual({ clean: true });
  });
});

describe('docs/reference/events.md "Owner events"', () => {
  it('lists exactly the event types the service emits, with their meaning', () => {
    const page = fs.readFileSync(path.resolve(import.meta.dirname, '../..', 'docs', 'reference', 'events.md'), 'utf8');
    const start = page.indexOf('# Owner events\n');
    expect(start).toBeGreaterThanOrEqual(0);
    const section = page.slice(start, page.indexOf('\n## ', start + 1));
    const rows = [...section.matchAll(/^\| `([a-z._]+)` \| (.+) \|$/gm)].map((m) => [m[1], m[2]]);
    expect(rows).toEqual([...Object.entries(EVENT_TYPES), ['reset', expect.any(String)]]);
  });
});

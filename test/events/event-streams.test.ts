import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { grant } from '../helpers/actions.js';
import { client, type Client } from '../helpers/api.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice } from '../helpers/fixtures.js';
import { ownerCookie, startOAuthTestServer } from '../helpers/oauth.js';
import { openSse, type SseStream } from '../helpers/sse.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * How long an owner event stream lives (docs/reference/event-streams.md): it ends with the credential
 * that opened it (the token's expiry, the console session's sign-out or expiry, on any
 * instance), the instance bounds its streams, and a client going away is no error. Streams
 * are read with a real Server-Sent Events client over fetch (test/helpers/sse.ts).
 */

const clock = manualClock();
/** Two instances on one database, without a shared bus: only the database links them. */
let first: TestServer & { issuer: string };
let second: TestServer;
let api: Client;
const open: SseStream[] = [];
/** Event hub subscriptions held on the first instance: every open stream holds one until its end has run. */
let subscribed = 0;

/** Wide enough for a slow shared machine, short enough that a stream that never ends fails the test. */
const WITHIN = { timeout: 10_000, interval: 50 };

beforeAll(async () => {
  // A heartbeat follows at least one re-check of the credential (one per poll), so a stream
  // that sent heartbeats has passed that many re-checks, however slowly the machine runs.
  const env = { EVENTS_POLL_SECONDS: '0.2', EVENTS_HEARTBEAT_SECONDS: '0.5' };
  first = await startOAuthTestServer({ clock, env });
  second = await startTestServer({ clock, env, dir: first.dir });
  api = client(first.url);
  const hub = first.service.events;
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
  await second?.close();
  await first?.close();
});

async function keep(sse: Promise<SseStream>): Promise<SseStream> {
  const opened = await sse;
  open.push(opened);
  return opened;
}

const consoleFeed = (base: string, cookie: string) => keep(openSse(`${base}/console/events`, { headers: { cookie } }));

/** Resolves with the last comment once the server has ended the stream; rejects if it has not ended in time. */
async function endedWith(sse: SseStream): Promise<string> {
  const ended = await Promise.race([sse.ended, new Promise<undefined>((resolve) => setTimeout(() => resolve(undefined), WITHIN.timeout))]);
  expect(ended, 'the stream is still open').toEqual({ clean: true });
  return sse.comments.at(-1)!;
}

describe('a stream ends when its credential expires', () => {
  it('ends GET /v1/events once the owner token expires, its last line saying why', async () => {
    const shortLived = await first.ownerToken('streams-token-expiry', { expiresIn: '60s' });
    const sse = await keep(openSse(`${first.url}/v1/events`, { token: shortLived }));
    expect(sse.status).toBe(200);
    // Past `exp` and the 5 s of clock skew the verifier allows.
    clock.set(Date.now() + 66_000);
    try {
      expect(await endedWith(sse)).toMatch(/^end credential_expired: /);
    } finally {
      clock.set(Date.now());
    }
  });

  it("ends the console's live feed when the console session expires", async () => {
    const cookie = await ownerCookie(first.issuer, await first.ownerToken('streams-session-expiry'));
    const sse = await consoleFeed(first.issuer, cookie);
    expect(sse.status).toBe(200);
    // The session lasts as long as the token it came from (one hour here).
    clock.set(Date.now() + 3_600_000);
    try {
      expect(await endedWith(sse)).toMatch(/^end credential_expired: /);
      expect((await fetch(`${first.issuer}/console/events`, { headers: { cookie } })).status).toBe(401);
    } finally {
      clock.set(Date.now());
    }
  });
});

describe('a stream ends when its console session is signed out', () => {
  it('ends the live feed on this instance when the console signs out', async () => {
    const cookie = await ownerCookie(first.issuer, await first.ownerToken('streams-sign-out'));
    const sse = await consoleFeed(first.issuer, cookie);
    expect(sse.status).toBe(200);
    const out = await fetch(`${first.issuer}/console/sign-out`, { method: 'POST', redirect: 'manual', headers: { cookie, origin: first.issuer } });
    expect(out.status).toBe(303);
    expect(await endedWith(sse)).toMatch(/^end session_ended: /);
  });

  it('ends the live feed on every instance when the session is revoked on another one', async () => {
    const cookie = await ownerCookie(first.issuer, await first.ownerToken('streams-revoked'));
    const here = await consoleFeed(first.issuer, cookie);
    const there = await consoleFeed(second.url, cookie);
    expect([here.status, there.status]).toEqual([200, 200]);
    // The consent page's sign-out, on the second instance: the first hears of it from the database alone.
    const out = await fetch(`${second.url}/oauth/sign-out`, { method: 'POST', headers: { cookie } });
    expect(out.status).toBe(204);
    expect(await endedWith(here)).toMatch(/^end session_ended: /);
    expect(await endedWith(there)).toMatch(/^end session_ended: /);
  });

  it('keeps streaming for a session that is still signed in', async () => {
    const cookie = await ownerCookie(first.issuer, await first.ownerToken('streams-still-signed-in'));
    const sse = await consoleFeed(first.issuer, cookie);
    let ended = false;
    void sse.ended.then(() => (ended = true));
    // Several re-checks of the session pass: each heartbeat comes after at least one.
    await vi.waitFor(() => expect(sse.comments.filter((line) => line === 'heartbeat').length).toBeGreaterThanOrEqual(3), WITHIN);
    expect(ended).toBe(false);
    expect(new Set(sse.comments)).toEqual(new Set(['stream open', 'heartbeat']));
  });
});

describe('open streams per instance (EVENTS_MAX_STREAMS)', () => {
  it('answers 503 unavailable with Retry-After beyond the limit, whichever workspaces hold the places, and frees a place when a client goes away', async () => {
    const small = await startTestServer({ env: { EVENTS_MAX_STREAMS: '2', EVENTS_MAX_STREAMS_PER_WORKSPACE: '2' } });
    const streams: SseStream[] = [];
    try {
      streams.push(await openSse(`${small.url}/v1/events`, { token: await small.ownerToken('streams-cap-a') }));
      streams.push(await openSse(`${small.url}/v1/events`, { token: await small.ownerToken('streams-cap-b') }));
      expect(streams.map((s) => s.status)).toEqual([200, 200]);
      const refused = await client(small.url).get('/v1/events', { token: await small.ownerToken('streams-cap-c') });
      expect(refused.status).toBe(503);
      expect(refused.headers.get('retry-after')).toBe('5');
      expect(refused.body.error.code).toBe('unavailable');
      expect(refused.body.error.message).toContain('EVENTS_MAX_STREAMS');
      expect(refused.body.error.requestId).toEqual(expect.any(String));

      streams[0]!.close();
      await vi.waitFor(async () => {
        const again = await openSse(`${small.url}/v1/events`, { token: await small.ownerToken('streams-cap-c') });
        streams.push(again);
        expect(again.status).toBe(200);
      }, WITHIN);
    } finally {
      for (const sse of streams) sse.close();
      await small.close();
    }
  });
});

describe('a client going away is not an error', () => {
  it('logs nothing at warn or error when clients drop their streams, idle or just after an event', async () => {
    const owner = await first.ownerToken('streams-disconnect');
    const lamp = await attachDevice(api, owner);
    const lines = first.logs.length;
    const subscribedBefore = subscribed;
    const idle = await keep(openSse(`${first.url}/v1/events`, { token: owner }));
    const feed = await consoleFeed(first.issuer, await ownerCookie(first.issuer, owner));
    const busy = await keep(openSse(`${first.url}/v1/events`, { token: owner }));
    expect([idle.status, feed.status, busy.status]).toEqual([200, 200, 200]);
    await vi.waitFor(() => expect(subscribed).toBe(subscribedBefore + 3), WITHIN);
    await grant(api, owner, 'agent:dropped', lamp.id, ['set_power']);
    expect((await busy.next()).event).toBe('grant.created');
    idle.close();
    feed.close();
    busy.close();
    // Each stream's end has run: its subscription to the event hub is given back.
    await vi.waitFor(() => expect(subscribed).toBe(subscribedBefore), WITHIN);
    // What a pull under way does once its read returns into a closed stream.
    await new Promise((resolve) => setTimeout(resolve, 500));
    const written = first.logs.slice(lines).map((line) => JSON.parse(line) as { level: string; msg: string });
    expect(written.filter((line) => line.level === 'error' || line.level === 'warn')).toEqual([]);
    expect(first.logs.slice(lines).join('\n')).not.toContain('already closed');
  });
});

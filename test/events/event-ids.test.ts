import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { EVENT_ID_PATTERN } from '../../src/domain/event-ids.js';
import { grant } from '../helpers/actions.js';
import { client } from '../helpers/api.js';
import { journalIdOf } from '../helpers/event-ids.js';
import { attachDevice, type AttachedDevice } from '../helpers/fixtures.js';
import { openSse, type SseEvent, type SseStream } from '../helpers/sse.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Event ids reveal nothing about other workspaces (docs/reference/event-ids.md): the ids an owner sees
 * on the event stream and in each event are opaque, unrelated to the journal's service-wide
 * numbering, and mean nothing in another workspace; they resume across instances sharing a
 * database; plain numeric ids shown before the change resume up to where they ended.
 */

let sqld: TestSqld;
/** Two instances of the service on one libSQL server. */
let one: TestServer;
let two: TestServer;
const streams: SseStream[] = [];

beforeAll(async () => {
  sqld = await startSqld();
  one = await startTestServer({ env: { DATABASE_URL: sqld.url } });
  two = await startTestServer({ env: { DATABASE_URL: sqld.url } });
}, 60_000);
afterAll(async () => {
  for (const sse of streams) sse.close();
  await one?.close();
  await two?.close();
  await sqld?.stop();
});

async function stream(server: TestServer, token: string, lastEventId?: string): Promise<SseStream> {
  const sse = await openSse(`${server.url}/v1/events`, { token, ...(lastEventId !== undefined ? { lastEventId } : {}) });
  expect(sse.status).toBe(200);
  streams.push(sse);
  return sse;
}

/** Grants `principal` on the device and returns the grant.created event the owner's stream shows for it. */
async function granted(sse: SseStream, server: TestServer, owner: string, device: AttachedDevice, principal: string): Promise<SseEvent> {
  const [given] = await grant(client(server.url), owner, principal, device.id, ['set_power']);
  return sse.nextWhere((e) => e.event === 'grant.created' && JSON.parse(e.data).data.grant.id === given!.id);
}

describe("an owner's event ids do not advance with another workspace's writes", () => {
  it('shows opaque ids, the same on the stream and in the event, that say nothing of the 40 events written elsewhere in between', async () => {
    const alice = await one.ownerToken('ids-alice');
    const bob = await one.ownerToken('ids-bob');
    const lampA = await attachDevice(client(one.url), alice);
    const lampB = await attachDevice(client(one.url), bob);
    const sse = await stream(one, alice);

    const first = await granted(sse, one, alice, lampA, 'agent:a1');
    for (let i = 0; i < 40; i++) await grant(client(one.url), bob, `agent:b${i}`, lampB.id, ['set_power']);
    const second = await granted(sse, one, alice, lampA, 'agent:a2');

    for (const event of [first, second]) {
      expect(event.id).toMatch(EVENT_ID_PATTERN);
      expect(JSON.parse(event.data).id).toBe(event.id);
      expect(event.id).not.toMatch(/^\d+$/);
    }
    // Behind them, the journal counted bob's writes; what alice was shown does not.
    const behind = (await journalIdOf(one, lampA.workspace, second.id!)) - (await journalIdOf(one, lampA.workspace, first.id!));
    expect(behind).toBeGreaterThan(40);
  });

  it("treats another workspace's event id as unknown: a reset, then only its own events", async () => {
    const alice = await one.ownerToken('ids-alice-2');
    const bob = await one.ownerToken('ids-bob-2');
    const lampA = await attachDevice(client(one.url), alice);
    const lampB = await attachDevice(client(one.url), bob);
    const ofBob = await granted(await stream(one, bob), one, bob, lampB, 'agent:b');

    const resumed = await stream(one, alice, ofBob.id);
    const reset = await resumed.next();
    expect(JSON.parse(reset.data)).toMatchObject({ type: 'reset', data: { reason: 'unknown_event_id' } });
    expect(reset.id).toMatch(EVENT_ID_PATTERN);
    await grant(client(one.url), bob, 'agent:b2', lampB.id, ['set_power']);
    const [own] = await grant(client(one.url), alice, 'agent:a', lampA.id, ['set_power']);
    expect(JSON.parse((await resumed.next()).data).data.grant.id).toBe(own!.id);
  });
});

describe('resuming by event id', () => {
  it('resumes on another instance sharing the database with an id the first one sent', async () => {
    const onOne = await one.ownerToken('ids-resume');
    const onTwo = await two.ownerToken('ids-resume');
    const lamp = await attachDevice(client(one.url), onOne);
    const seen = await granted(await stream(one, onOne), one, onOne, lamp, 'agent:seen');
    const [missed] = await grant(client(one.url), onOne, 'agent:missed', lamp.id, ['set_power']);

    const resumed = await stream(two, onTwo, seen.id);
    const event = await resumed.next();
    expect(event.event).toBe('grant.created');
    expect(JSON.parse(event.data).data.grant.id).toBe(missed!.id);
  });

  it('honours a plain numeric id shown before ids were encrypted, up to the last one given then; one past it is unknown', async () => {
    const owner = await one.ownerToken('ids-legacy');
    const lamp = await attachDevice(client(one.url), owner);
    const sse = await stream(one, owner);
    const old = await granted(sse, one, owner, lamp, 'agent:old');
    const oldId = await journalIdOf(one, lamp.workspace, old.id!);
    // As if the service was upgraded right after this event: it was shown as a plain number.
    await one.service.db.run('UPDATE legacy_event_ids SET last_id = ?', [oldId]);
    const [missed] = await grant(client(one.url), owner, 'agent:missed', lamp.id, ['set_power']);

    const resumed = await stream(one, owner, String(oldId));
    const event = await resumed.next();
    expect(JSON.parse(event.data).data.grant.id).toBe(missed!.id);
    expect(event.id).toMatch(EVENT_ID_PATTERN);

    const probing = await stream(one, owner, String(oldId + 1));
    expect(JSON.parse((await probing.next()).data)).toMatchObject({ type: 'reset', data: { reason: 'unknown_event_id' } });
  });
});

describe('event ids in webhooks', () => {
  it("carries the stream's opaque id in the payload and in the delivery record", async () => {
    const bodies: string[] = [];
    const receiver = http.createServer((request, response) => {
      const chunks: Buffer[] = [];
      request.on('data', (chunk: Buffer) => chunks.push(chunk));
      request.on('end', () => {
        bodies.push(Buffer.concat(chunks).toString('utf8'));
        response.writeHead(200).end();
      });
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const server = await startTestServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05' } });
    try {
      const api = client(server.url);
      const owner = await server.ownerToken('ids-webhook');
      const lamp = await attachDevice(api, owner);
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const hook = await api.post('/v1/webhooks', { token: owner, body: { url, events: ['grant.created'] } });
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
      const shown = await granted(await stream(server, owner), server, owner, lamp, 'agent:hooked');

      await vi.waitFor(() => expect(bodies).toHaveLength(1), { timeout: 15_000, interval: 50 });
      expect(JSON.parse(bodies[0]!).id).toBe(shown.id);
      expect(shown.id).toMatch(EVENT_ID_PATTERN);
      const deliveries = await api.get(`/v1/webhooks/${hook.body.data.id}/deliveries`, { token: owner });
      expect(deliveries.body.data[0].eventId).toBe(shown.id);
    } finally {
      await server.close();
      receiver.closeAllConnections();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});

import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runHousekeeping } from '../../src/domain/housekeeping.js';
import type { Db } from '../../src/store/driver.js';
import { EmbeddedDb } from '../../src/store/embedded.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { RemoteDb } from '../../src/store/remote.js';
import { appendWorkspaceEvent, journalBounds, listWorkspaceEvents } from '../../src/store/event-journal.js';
import { client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { journalIdOf } from '../helpers/event-ids.js';
import { attachDevice } from '../helpers/fixtures.js';
import { openSse, type SseStream } from '../helpers/sse.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// Journal ids without AUTOINCREMENT (migration 0022, docs/contributors/performance-history.md "Journal ids without
// AUTOINCREMENT"): an event id is never given twice, even after pruning removed every event
// and the service restarted, so a stale Last-Event-ID or the webhook dispatcher's cursor can
// never name a newer event (docs/reference/events.md "Owner events", "Webhooks"). On both drivers: the embedded
// file and a real libSQL server (sqld).

let sqld: TestSqld;
beforeAll(async () => {
  sqld = await startSqld();
});
afterAll(async () => {
  await sqld?.stop();
});

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-journal-ids-'));
const A_DAY_LATER = { now: () => Date.now() + 25 * 3_600_000 };

/** A day and more later: housekeeping prunes the whole replay window. */
const pruneEverything = (db: Db) => runHousekeeping({ db, clock: A_DAY_LATER });

const streams: SseStream[] = [];
afterAll(() => {
  for (const sse of streams) sse.close();
});

async function stream(server: TestServer, token: string, lastEventId?: string): Promise<SseStream> {
  const sse = await openSse(`${server.url}/v1/events`, { token, ...(lastEventId ? { lastEventId } : {}) });
  streams.push(sse);
  return sse;
}

/** The workspace a device was attached to (devices name it by routing id). */
async function workspaceId(server: TestServer, routingId: string): Promise<string> {
  return (await server.service.db.get<{ id: string }>('SELECT id FROM workspaces WHERE routing_id = ?', [routingId]))!.id;
}

/** The journal id of the event a new grant writes, read from the owner's stream. */
async function grantEventId(server: TestServer, owner: string, device: { id: string; workspace: string }, principal: string): Promise<number> {
  const sse = await stream(server, owner);
  const [given] = await grant(client(server.url), owner, principal, device.id, ['set_power']);
  const event = await sse.nextWhere((e) => e.event === 'grant.created' && JSON.parse(e.data).data.grant.id === given!.id);
  sse.close();
  return journalIdOf(server, device.workspace, event.id!);
}

describe.each([
  { driver: 'embedded', env: (): Record<string, string> => ({}) },
  { driver: 'sqld', env: (): Record<string, string> => ({ DATABASE_URL: sqld.url }) },
])('journal ids after pruning everything and a restart ($driver)', ({ driver, env }) => {
  it('are never given again: the next event after the restart has a greater id than every earlier one', async () => {
    const dir = tempDir();
    const first = await startTestServer({ dir, env: env() });
    let before: number;
    let lamp: Awaited<ReturnType<typeof attachDevice>>;
    try {
      const owner = await first.ownerToken(`ids-${driver}`);
      lamp = await attachDevice(client(first.url), owner);
      before = await grantEventId(first, owner, lamp, 'agent:before');
      expect((await pruneEverything(first.service.db)).workspaceEvents).toBeGreaterThan(0);
      expect(await listWorkspaceEvents(first.service.db, await workspaceId(first, lamp.workspace), 0, 100)).toEqual([]);
      // A second pass finds nothing more to prune: the newest id's tombstone stays where it is.
      expect((await pruneEverything(first.service.db)).workspaceEvents).toBe(0);
    } finally {
      await first.close();
    }

    const second = await startTestServer({ dir, env: env() });
    try {
      const owner = await second.ownerToken(`ids-${driver}`);
      expect(await journalBounds(second.service.db)).toEqual({ first: before + 1, last: before });
      const after = await grantEventId(second, owner, lamp!, 'agent:after');
      expect(after).toBeGreaterThan(before);
    } finally {
      await second.close();
    }
  });
});

describe('a Last-Event-ID older than the replay window, after pruning everything and a restart', () => {
  it('still begins with a reset event (events_lost), and the stream goes on with newer ids', async () => {
    const dir = tempDir();
    const first = await startTestServer({ dir });
    let seen: string;
    let lamp: Awaited<ReturnType<typeof attachDevice>>;
    try {
      const owner = await first.ownerToken('ids-window');
      lamp = await attachDevice(client(first.url), owner);
      const sse = await stream(first, owner);
      const [given] = await grant(client(first.url), owner, 'agent:w1', lamp.id, ['set_power']);
      seen = (await sse.nextWhere((e) => e.event === 'grant.created' && JSON.parse(e.data).data.grant.id === given!.id)).id!;
      sse.close();
      await grant(client(first.url), owner, 'agent:w2', lamp.id, ['set_power']);
      await pruneEverything(first.service.db);
    } finally {
      await first.close();
    }

    const second = await startTestServer({ dir });
    try {
      const owner = await second.ownerToken('ids-window');
      const resumed = await stream(second, owner, seen);
      const reset = await resumed.next();
      expect(reset.event).toBe('reset');
      expect(JSON.parse(reset.data)).toMatchObject({ type: 'reset', id: reset.id, data: { reason: 'events_lost' } });
      expect(await journalIdOf(second, lamp!.workspace, reset.id!)).toBeGreaterThan(await journalIdOf(second, lamp!.workspace, seen));
      const [live] = await grant(client(second.url), owner, 'agent:w3', lamp!.id, ['set_power']);
      const event = await resumed.next();
      expect(JSON.parse(event.data).data.grant.id).toBe(live!.id);
      expect(await journalIdOf(second, lamp!.workspace, event.id!)).toBeGreaterThan(await journalIdOf(second, lamp!.workspace, reset.id!));

      // The id the tombstone keeps is where a stream that saw it goes on from: nothing was lost after it.
      const fromReset = await stream(second, owner, reset.id);
      expect((await fromReset.next()).id).toBe(event.id);
    } finally {
      await second.close();
    }
  });
});

/** Events 1 to 5 of one workspace written at migration 0021, as its AUTOINCREMENT gave them. */
async function journalAt0021(db: Db): Promise<void> {
  await migrate(
    db,
    loadMigrations().filter((m) => m.version <= 21),
  );
  for (let i = 1; i <= 5; i++) {
    await db.run(`INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at) VALUES ('w', 'grant.created', ?, '{}', ?)`, [`g${i}`, i]);
  }
}

/** Migration 0022 and every later one: the journal is checked on the schema the service runs. */
const fromMigration22 = loadMigrations()
  .filter((m) => m.version >= 22)
  .map((m) => m.version);

const kept = async (db: Db) => (await listWorkspaceEvents(db, 'w', 0, 100)).map((row) => [row.id, row.subjectId]);
const nextId = (db: Db) => appendWorkspaceEvent(db, { workspaceId: 'w', type: 'grant.created', subjectId: 'next', data: {}, createdAt: 10 });

/** sqld holds one database per server: each migration case gets a server of its own. */
const extraSqld: TestSqld[] = [];
async function startSqldFor(): Promise<TestSqld> {
  const server = await startSqld();
  extraSqld.push(server);
  return server;
}
afterAll(async () => {
  await Promise.all(extraSqld.map((server) => server.stop()));
});

describe.each([
  { driver: 'embedded', open: () => new EmbeddedDb(path.join(tempDir(), 'service.db')) },
  { driver: 'sqld', open: async () => new RemoteDb((await startSqldFor()).url, undefined) },
])('migration 0022 on a journal written at 0021 ($driver)', ({ open }) => {
  it('keeps every id and event, and continues after the newest', async () => {
    const db = await open();
    try {
      await journalAt0021(db);
      await db.run('DELETE FROM workspace_events WHERE id <= 2');
      expect(await migrate(db)).toEqual(fromMigration22);
      expect(await kept(db)).toEqual([
        [3, 'g3'],
        [4, 'g4'],
        [5, 'g5'],
      ]);
      expect(await journalBounds(db)).toEqual({ first: 3, last: 5 });
      expect(await nextId(db)).toBe(6);
    } finally {
      await db.close();
    }
  });

  it('continues above the old sequence when pruning had removed every event', async () => {
    const db = await open();
    try {
      await journalAt0021(db);
      await db.run('DELETE FROM workspace_events');
      expect(await migrate(db)).toEqual(fromMigration22);
      expect(await kept(db)).toEqual([]);
      expect(await journalBounds(db)).toEqual({ first: 6, last: 5 });
      expect(await nextId(db)).toBe(6);
      expect(await journalBounds(db)).toEqual({ first: 6, last: 6 });
    } finally {
      await db.close();
    }
  });

  it('keeps the newest id taken whatever deletes it afterwards, not only the pruning', async () => {
    const db = await open();
    try {
      await journalAt0021(db);
      await migrate(db);
      await db.run('DELETE FROM workspace_events');
      expect(await journalBounds(db)).toEqual({ first: 6, last: 5 });
      expect(await nextId(db)).toBe(6);
    } finally {
      await db.close();
    }
  });
});

/** A webhook endpoint that records the bodies it is sent. */
function receiver() {
  const bodies: string[] = [];
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      bodies.push(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(200).end();
    });
  });
  return {
    bodies,
    async start() {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

describe('the webhook dispatcher cursor across migration 0022', () => {
  it('delivers the first event after the migration, though every earlier event was pruned and the cursor stood at the old sequence', async () => {
    const dir = tempDir();
    const db = new EmbeddedDb(path.join(dir, 'service.db'));
    await journalAt0021(db);
    // Everything dispatched, then pruned: the cursor names the newest id ever given.
    await db.run('UPDATE webhook_dispatch SET last_event_id = 5 WHERE id = 1');
    await db.run('DELETE FROM workspace_events');
    await db.close();

    const hooks = receiver();
    const url = await hooks.start();
    const server = await startTestServer({ dir, env: { OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05' } });
    try {
      const api = client(server.url);
      const owner = await server.ownerToken('ids-webhooks');
      const lamp = await attachDevice(api, owner);
      const registered = await api.post('/v1/webhooks', { token: owner, body: { url: `${url}/hook`, events: ['grant.created'] } });
      expect(registered.status, JSON.stringify(registered.body)).toBe(201);
      const [given] = await grant(api, owner, 'agent:hooked', lamp.id, ['set_power']);

      await vi.waitFor(() => expect(hooks.bodies).toHaveLength(1), { timeout: 15_000, interval: 50 });
      const delivered = JSON.parse(hooks.bodies[0]!) as { id: string; type: string; data: { grant: { id: string } } };
      expect(delivered).toMatchObject({ type: 'grant.created', data: { grant: { id: given!.id } } });
      const deliveredId = await journalIdOf(server, lamp.workspace, delivered.id);
      expect(deliveredId).toBeGreaterThan(5);
      const cursor = await server.service.db.get<{ last: number }>('SELECT last_event_id AS last FROM webhook_dispatch WHERE id = 1');
      expect(cursor!.last).toBeGreaterThanOrEqual(deliveredId);
    } finally {
      await server.close();
      await hooks.close();
    }
  });
});

import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { EmbeddedDb } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';
import { claimDueDeliveries, recordAttempt } from '../../src/store/webhook-claims.js';
import { grant } from '../helpers/actions.js';
import { client, type Client } from '../helpers/api.js';
import { attachDevice } from '../helpers/fixtures.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// Webhook delivery is fair across workspaces whatever their number (docs/owners/webhooks.md
// "Fair delivery between workspaces"): many workspaces whose endpoints are slow but answer 200,
// so that nothing fails and nothing is backed off, hold the sender's slots; a bystander's
// delivery still goes out at the next free slot. The receivers are real HTTP servers on loopback.

/** An endpoint that answers 200 after `delayMs` on every path but `/fast`, which answers at once. */
class SlowReceiver {
  open = 0;
  /** Slow attempts begun so far. */
  started = 0;
  readonly arrived = new Map<string, number>();
  readonly server = http.createServer((request, response) => {
    request.resume();
    const at = request.url ?? '/';
    this.arrived.set(at, (this.arrived.get(at) ?? 0) + 1);
    if (at.startsWith('/fast')) {
      response.writeHead(200).end();
      return;
    }
    this.open++;
    this.started++;
    const timer = setTimeout(() => response.writeHead(200).end(), this.delayMs);
    response.on('close', () => {
      clearTimeout(timer);
      this.open--;
    });
  });
  url = '';

  constructor(readonly delayMs: number) {}

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// Small slots and deadlines, so the test is quick: 8 attempts at once per instance, 4 per
// workspace, and a receiver 1.5 s slow (well inside the 5 s deadline: every attempt succeeds).
const ENV = {
  OAUTH_CIMD_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_SECONDS: '0.05',
  WEBHOOK_TIMEOUT_SECONDS: '5',
  WEBHOOK_MAX_IN_FLIGHT: '8',
  WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '4',
};
const SLOW_MS = 1500;
const WORKSPACES = 20;
const WEBHOOKS = 20;
const EVENTS = 3;

async function registerAt(target: Client, owner: string, url: string): Promise<void> {
  const res = await target.post('/v1/webhooks', { token: owner, body: { url, events: ['grant.created'] } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

/**
 * `WORKSPACES` workspaces of `WEBHOOKS` slow webhooks each, with `EVENTS` events each: about
 * 1,200 deliveries of 1.5 s, minutes of work for 8 slots, every one of them older than what the
 * bystander does next.
 */
async function hammer(instances: readonly TestServer[], receiver: SlowReceiver): Promise<void> {
  await Promise.all(
    Array.from({ length: WORKSPACES }, async (_, w) => {
      const instance = instances[w % instances.length]!;
      const target = client(instance.url);
      const owner = await instance.ownerToken(`webhooks-crowd-${w}`);
      const lamp = await attachDevice(target, owner);
      for (let i = 0; i < WEBHOOKS; i++) await registerAt(target, owner, `${receiver.url}/crowd-${w}-${i}`);
      for (let i = 0; i < EVENTS; i++) await grant(target, owner, `agent:crowd-${w}-${i}`, lamp.id, ['set_power']);
    }),
  );
}

/**
 * A fresh workspace's one event reaches its (fast) endpoint at one of the next free slots: shown
 * by how many of the crowd's older attempts began before it, not by a time, so a loaded machine
 * cannot fail it. Claimed in age order it would wait behind the whole backlog (about 1,200).
 */
async function bystanderArrivesPromptly(instance: TestServer, receiver: SlowReceiver): Promise<void> {
  const target = client(instance.url);
  const owner = await instance.ownerToken(`webhooks-bystander-${randomUUID()}`);
  const lamp = await attachDevice(target, owner);
  const at = `/fast-${randomUUID()}`;
  await registerAt(target, owner, `${receiver.url}${at}`);
  const before = receiver.started;
  await grant(target, owner, 'agent:bystander', lamp.id, ['set_power']);
  await vi.waitFor(() => expect(receiver.arrived.get(at)).toBe(1), { timeout: 45_000, interval: 50 });
  // The slots free about five times a second; the dispatcher writes the delivery within a poll
  // or a few on a loaded machine, and the next free slot is the bystander's.
  expect(receiver.started - before).toBeLessThan(100);
}

describe('webhook delivery is fair across workspaces whatever their number', () => {
  it('delivers a bystander’s event within seconds while 20 workspaces of slow endpoints that answer 200 fill every slot (one instance)', async () => {
    const receiver = new SlowReceiver(SLOW_MS);
    await receiver.start();
    const instance = await startTestServer({ env: ENV });
    try {
      await hammer([instance], receiver);
      await vi.waitFor(() => expect(receiver.open).toBe(8), { timeout: 15_000, interval: 50 });

      await bystanderArrivesPromptly(instance, receiver);
      // The crowd keeps the slots busy meanwhile: its backlog is minutes long.
      expect(receiver.open).toBeGreaterThan(0);
    } finally {
      await instance.close();
      await receiver.close();
    }
  }, 90_000);

  describe('with two instances on one libSQL server', () => {
    let sqld: TestSqld;
    beforeAll(async () => {
      sqld = await startSqld();
    }, 30_000);
    afterAll(() => sqld?.stop());

    it('delivers a bystander’s event within seconds, the claim fair in the database for both instances', async () => {
      const receiver = new SlowReceiver(SLOW_MS);
      await receiver.start();
      const env = { ...ENV, DATABASE_URL: sqld.url };
      // One after another: the first brings the schema up to date.
      const first = await startTestServer({ env });
      const second = await startTestServer({ env });
      try {
        await hammer([first, second], receiver);
        await vi.waitFor(() => expect(receiver.open).toBe(16), { timeout: 20_000, interval: 50 });

        await bystanderArrivesPromptly(second, receiver);
        expect(receiver.open).toBeGreaterThan(0);
      } finally {
        await Promise.all([first.close(), second.close()]);
        await receiver.close();
      }
    }, 120_000);
  });
});

describe('claims charge each workspace for the sender time its deliveries take', () => {
  // A database of its own for each test: what one claims is no candidate of the next.
  let dir: string;
  let db: EmbeddedDb;
  beforeEach(async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-webhook-shares-'));
    db = new EmbeddedDb(path.join(dir, 'service.db'));
    await migrate(db);
  });
  afterEach(async () => {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  let nextEvent = 1;
  /** A webhook of `workspaceId` whose attempts have been taking `attemptMs`, with `count` due deliveries. */
  async function webhookWithDue(workspaceId: string, attemptMs: number, count: number): Promise<string> {
    const webhookId = randomUUID();
    await db.run(
      `INSERT INTO webhooks (id, workspace_id, url, events, secret, after_event_id, created_by, created_at, attempt_ms)
       VALUES (?, ?, 'https://hooks.test.invalid/', '["grant.created"]', 'whsec_', 0, 'owner', 0, ?)`,
      [webhookId, workspaceId, attemptMs],
    );
    for (let i = 0; i < count; i++) {
      const eventId = nextEvent++;
      await db.run('INSERT INTO webhook_payloads (event_id, payload) VALUES (?, ?)', [eventId, `{"id":"${eventId}"}`]);
      await db.run(
        `INSERT INTO webhook_deliveries (id, webhook_id, workspace_id, event_id, event_type, next_attempt_at, created_at)
         VALUES (?, ?, ?, ?, 'grant.created', ?, 0)`,
        [randomUUID(), webhookId, workspaceId, eventId, eventId],
      );
    }
    return webhookId;
  }

  const caps = { perWebhook: 20, perWorkspace: 20 };
  const byWorkspace = (claimed: { workspaceId: string }[]) =>
    claimed.reduce<Record<string, number>>((counts, delivery) => ({ ...counts, [delivery.workspaceId]: (counts[delivery.workspaceId] ?? 0) + 1 }), {});

  it('gives a workspace whose endpoint is slow fewer of the slots than one whose endpoint is fast', async () => {
    await webhookWithDue('slow-endpoints', 1_000, 10);
    await webhookWithDue('fast-endpoints', 10, 10);
    const claimed = await claimDueDeliveries(db, 'lease-a', 1_000, 60_000, 10, caps);
    // Both start level; then the fast workspace's next nine cost less than the slow one's second.
    expect(byWorkspace(claimed)).toEqual({ 'slow-endpoints': 1, 'fast-endpoints': 9 });
  });

  it('charges the time an attempt really took: an endpoint that turned slow costs its workspace its next slots', async () => {
    const webhookA = await webhookWithDue('turned-slow', 0, 6);
    await webhookWithDue('stayed-fast', 0, 6);
    const [first] = (await claimDueDeliveries(db, 'lease-b', 2_000, 60_000, 2, caps)).filter((d) => d.webhookId === webhookA);
    await recordAttempt(
      db,
      { ...first!, leaseToken: 'lease-b' },
      { status: 'delivered', statusCode: 200, error: null, nextAttemptAt: null, now: 2_000, tookMs: 9_000 },
    );
    const claimed = await claimDueDeliveries(db, 'lease-c', 2_000, 60_000, 5, caps);
    expect(byWorkspace(claimed)).toEqual({ 'stayed-fast': 5 });
  });

  it('claims a newcomer’s delivery first, however many workspaces have been served and however old their deliveries', async () => {
    for (let w = 0; w < 30; w++) await webhookWithDue(`crowd-${w}`, 2_000, 5);
    // The crowd takes the slots, one round after another, and is charged for them.
    for (let round = 0; round < 4; round++) await claimDueDeliveries(db, `lease-crowd-${round}`, 3_000 + round, 1, 8, caps);
    await webhookWithDue('newcomer', 0, 1);
    const [next] = await claimDueDeliveries(db, 'lease-d', 10_000, 60_000, 1, caps);
    expect(next!.workspaceId).toBe('newcomer');
  });
});

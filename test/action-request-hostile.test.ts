import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchWebhookEvents } from '../src/domain/webhook-delivery.js';
import type { Db } from '../src/store/driver.js';
import { openDb } from '../src/store/open.js';
import { startSqld, type TestSqld } from './helpers/sqld.js';

/**
 * Hostile review of the round-trip cuts on a libSQL server (docs/performance.md "On a libSQL
 * server (sqld)"): the action request decided outside a transaction, the one-read access
 * check, the webhook dispatcher's one read and one batch. Each test makes the situation the
 * cut could get wrong and checks what the database holds afterwards.
 */

let sqld: TestSqld;
beforeAll(async () => {
  sqld = await startSqld();
}, 30_000);
afterAll(() => sqld?.stop());

const clock = { now: () => Date.now() };

/** A workspace with `webhooks` live webhooks subscribed to `action.updated`, and `events` such events of `bytes` data each. */
async function journal(
  db: Db,
  shape: { webhooks: number; events: number; bytes: number },
): Promise<{ workspaceId: string; webhookIds: string[]; eventIds: number[] }> {
  const workspaceId = randomUUID();
  const now = Date.now();
  const after = (await db.get<{ id: number | null }>('SELECT max(id) AS id FROM workspace_events'))?.id ?? 0;
  const webhookIds = Array.from({ length: shape.webhooks }, () => randomUUID());
  await db.batch(
    webhookIds.map((id) => ({
      sql: `INSERT INTO webhooks (id, workspace_id, url, events, secret, after_event_id, created_by, created_at) VALUES (?, ?, 'https://hooks.test.invalid/', '["action.updated"]', 's', ?, 'owner', ?)`,
      args: [id, workspaceId, after, now],
    })),
  );
  // An action's snapshot as the journal trigger writes it, with a large result.
  const data = JSON.stringify({
    id: randomUUID(),
    workspaceId,
    deviceId: randomUUID(),
    targetId: randomUUID(),
    capability: 'read_log',
    arguments: '{}',
    status: 'succeeded',
    principal: 'agent:hostile',
    broadcastId: null,
    createdAt: now,
    expiresAt: now + 30_000,
    dispatchedAt: now,
    completedAt: now,
    result: JSON.stringify({ log: 'x'.repeat(shape.bytes) }),
    errorCode: null,
    errorMessage: null,
    approval: 'none',
  });
  await db.batch(
    Array.from({ length: shape.events }, () => ({
      sql: `INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at) VALUES (?, 'action.updated', ?, ?, ?)`,
      args: [workspaceId, randomUUID(), data, now],
    })),
  );
  const eventIds = (await db.all<{ id: number }>('SELECT id FROM workspace_events WHERE workspace_id = ? ORDER BY id', [workspaceId])).map((row) => row.id);
  return { workspaceId, webhookIds, eventIds };
}

describe('the webhook dispatcher on a libSQL server', () => {
  it.each(['http', 'ws'])(
    'delivers a full window of large events to many webhooks over %s, each pair once, with two instances dispatching',
    async (scheme) => {
      const url = sqld.url.replace(/^http/, scheme);
      const [a, b] = [await openDb(url), await openDb(url)];
      try {
        // Move the cursor past whatever earlier tests left, so only this journal is dispatched.
        await Promise.all([dispatchWebhookEvents({ db: a, clock }), dispatchWebhookEvents({ db: b, clock })]);
        // 250 events of 6 KB to 20 webhooks: each event's data repeated per webhook would be 30 MB in one answer.
        const { workspaceId, webhookIds, eventIds } = await journal(a, { webhooks: 20, events: 250, bytes: 6000 });
        await Promise.all([dispatchWebhookEvents({ db: a, clock }), dispatchWebhookEvents({ db: b, clock })]);
        const pairs = await a.all<{ webhookId: string; eventId: number; count: number; payloadBytes: number }>(
          `SELECT webhook_id AS webhookId, event_id AS eventId, count(*) AS count, length(payload) AS payloadBytes
           FROM webhook_deliveries WHERE workspace_id = ? GROUP BY webhook_id, event_id`,
          [workspaceId],
        );
        expect(pairs.length).toBe(webhookIds.length * eventIds.length);
        expect(pairs.every((pair) => pair.count === 1 && pair.payloadBytes > 6000)).toBe(true);
        const cursor = await a.get<{ id: number }>('SELECT last_event_id AS id FROM webhook_dispatch WHERE id = 1');
        expect(cursor!.id).toBe(eventIds[eventIds.length - 1]);
      } finally {
        await Promise.all([a.close(), b.close()]);
      }
    },
    120_000,
  );
});

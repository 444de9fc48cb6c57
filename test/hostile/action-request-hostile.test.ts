import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dispatchWebhookEvents } from '../../src/domain/webhook-delivery.js';
import { readDispatchWindow } from '../../src/store/webhooks.js';
import type { Db } from '../../src/store/driver.js';
import { openDb } from '../../src/store/open.js';
import { childrenOf, grant, hubManifest, next, requestAction } from '../helpers/actions.js';
import { client, type Client } from '../helpers/api.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';

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

/** `db` with its `batch` replaced: to watch or race the dispatcher's one write. */
function withBatch(db: Db, batch: Db['batch']): Db {
  return {
    mode: db.mode,
    all: (sql, args) => db.all(sql, args),
    get: (sql, args) => db.get(sql, args),
    run: (sql, args) => db.run(sql, args),
    transaction: (fn) => db.transaction(fn),
    batch,
    script: (sql) => db.script(sql),
    connectionSettings: () => db.connectionSettings(),
    close: () => db.close(),
  };
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
        // A poll writes at most ten batches of a thousand statements: dispatch until the window is empty.
        for (let poll = 0; poll < 5 && (await readDispatchWindow(a, 1)).length > 0; poll++)
          await Promise.all([dispatchWebhookEvents({ db: a, clock }), dispatchWebhookEvents({ db: b, clock })]);
        const pairs = await a.all<{ webhookId: string; eventId: number; count: number; payloadBytes: number }>(
          `SELECT d.webhook_id AS webhookId, d.event_id AS eventId, count(*) AS count, length(p.payload) AS payloadBytes
           FROM webhook_deliveries d JOIN webhook_payloads p ON p.event_id = d.event_id WHERE d.workspace_id = ? GROUP BY d.webhook_id, d.event_id`,
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

  it('cuts a window into batches of about a thousand statements, between events', async () => {
    const db = await openDb(sqld.url);
    try {
      await dispatchWebhookEvents({ db, clock });
      // 200 events to 20 webhooks: 8,200 statements in one batch would outlast a loaded server's request deadline.
      const { workspaceId, webhookIds, eventIds } = await journal(db, { webhooks: 20, events: 200, bytes: 10 });
      const sizes: number[] = [];
      const recording = withBatch(db, (statements) => (sizes.push(statements.length), db.batch(statements)));
      await dispatchWebhookEvents({ db: recording, clock });
      // Each event is 41 statements (its payload, and a delivery and a skip count per webhook); the cursor's move is one more.
      expect(Math.max(...sizes)).toBeLessThanOrEqual(1000 + 41);
      expect(sizes.every((size) => (size - 1) % 41 === 0)).toBe(true);
      const delivered = await db.get<{ count: number }>('SELECT count(*) AS count FROM webhook_deliveries WHERE workspace_id = ?', [workspaceId]);
      expect(delivered!.count).toBe(webhookIds.length * eventIds.length);
    } finally {
      await db.close();
    }
  }, 60_000);

  it('writes nothing for a webhook revoked between the window read and the write, and passes events no webhook wants', async () => {
    const db = await openDb(sqld.url.replace(/^http/, 'ws'));
    try {
      await dispatchWebhookEvents({ db, clock });
      const { workspaceId, webhookIds, eventIds } = await journal(db, { webhooks: 2, events: 3, bytes: 10 });
      // Events of a workspace without webhooks, after them.
      await db.run(`INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at) VALUES (?, 'action.updated', ?, '{}', ?)`, [
        randomUUID(),
        randomUUID(),
        Date.now(),
      ]);
      expect((await readDispatchWindow(db, 200)).filter((row) => row.webhookId !== null).length).toBe(6);
      const [revoked, kept] = webhookIds as [string, string];
      // The revocation lands after the dispatcher read its window, before its batch.
      const racing = withBatch(db, async (statements) => {
        await db.run('UPDATE webhooks SET revoked_at = ? WHERE id = ?', [Date.now(), revoked]);
        return db.batch(statements);
      });
      expect(await dispatchWebhookEvents({ db: racing, clock })).toBe(eventIds.length);
      const delivered = await db.all<{ webhookId: string }>('SELECT webhook_id AS webhookId FROM webhook_deliveries WHERE workspace_id = ?', [workspaceId]);
      expect(delivered.map((row) => row.webhookId)).toEqual(eventIds.map(() => kept));
      expect(await readDispatchWindow(db, 200)).toEqual([]);
    } finally {
      await db.close();
    }
  }, 60_000);
});

const PER_PRINCIPAL = 3;
const WORKSPACE_QUEUE = 5;

/**
 * Two instances of the service on this file's sqld, over ws:// (what libsql:// takes), started
 * before the calling describe's tests and closed after them.
 */
function twoInstances(env: Record<string, string> = {}): { a: TestServer; b: TestServer; apiA: Client; apiB: Client } {
  const two = {} as { a: TestServer; b: TestServer; apiA: Client; apiB: Client };
  beforeAll(async () => {
    const full = { DATABASE_URL: sqld.url.replace(/^http/, 'ws'), ...env };
    two.a = await startTestServer({ env: full });
    two.b = await startTestServer({ env: full });
    two.apiA = client(two.a.url);
    two.apiB = client(two.b.url);
  }, 60_000);
  afterAll(async () => {
    await Promise.all([two.a?.close(), two.b?.close()]);
  });
  return two;
}

describe('the action request on two instances of one libSQL server', () => {
  const two = twoInstances({ DEVICE_QUEUE_PER_PRINCIPAL: String(PER_PRINCIPAL), WORKSPACE_MAX_QUEUED_ACTIONS: String(WORKSPACE_QUEUE) });
  let owner: string;
  let agent: { id: string; token: string; principal: string };
  let lamp: AttachedDevice;

  async function freshWorkspace() {
    owner = await two.a.ownerToken(`hostile-${randomUUID()}`);
    agent = await createAgent(two.apiA, owner, { access: 'act', principal: 'agent:hostile' });
    lamp = await attachDevice(two.apiA, owner, { name: 'Lamp' });
    await grant(two.apiA, owner, agent.principal, lamp.id, ['set_power']);
  }

  const pending = async (deviceId: string) =>
    (await two.a.service.db.all<{ id: string }>(`SELECT id FROM actions WHERE device_id = ? AND status IN ('queued', 'awaiting_approval')`, [deviceId])).length;

  it('keeps a principal’s share of the device queue when 24 requests race over both instances', async () => {
    await freshWorkspace();
    const answers = await Promise.all(
      Array.from({ length: 24 }, (_, i) =>
        requestAction(i % 2 ? two.apiA : two.apiB, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } }),
      ),
    );
    const created = answers.filter((answer) => answer.status === 201);
    expect(created.length).toBe(PER_PRINCIPAL);
    for (const answer of answers.filter((answer) => answer.status !== 201)) expect(answer.body.error.code).toBe('capacity_exceeded');
    expect(await pending(lamp.id)).toBe(PER_PRINCIPAL);
  }, 60_000);

  it('keeps the workspace queue when four principals race on one device over both instances', async () => {
    await freshWorkspace();
    const others = await Promise.all([1, 2, 3].map((n) => createAgent(two.apiA, owner, { access: 'act', principal: `agent:hostile-${n}` })));
    for (const other of others) await grant(two.apiA, owner, other.principal, lamp.id, ['set_power']);
    const answers = await Promise.all(
      [agent, ...others].flatMap((who, n) =>
        Array.from({ length: 4 }, (_, i) =>
          requestAction((n + i) % 2 ? two.apiA : two.apiB, who.token, lamp.id, { capability: 'set_power', arguments: { on: true } }),
        ),
      ),
    );
    expect(answers.filter((answer) => answer.status === 201).length).toBe(WORKSPACE_QUEUE);
    expect(await pending(lamp.id)).toBe(WORKSPACE_QUEUE);
  }, 60_000);

  it('creates one action for one key raced over both instances, and every answer is the action as stored', async () => {
    await freshWorkspace();
    const body = { capability: 'set_power', arguments: { on: false }, idempotencyKey: `race-${randomUUID()}` };
    const answers = await Promise.all(Array.from({ length: 10 }, (_, i) => requestAction(i % 2 ? two.apiA : two.apiB, agent.token, lamp.id, body)));
    for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    const ids = new Set(answers.map((answer) => answer.body.data.id as string));
    expect(ids.size).toBe(1);
    const stored = await two.apiB.get(`/v1/actions/${[...ids][0]}`, { token: agent.token });
    for (const answer of answers) expect(answer.body.data).toEqual(stored.body.data);
    expect(await pending(lamp.id)).toBe(1);
  }, 60_000);

  it.each(['owner', 'user'] as const)(
    'answers a keyed request under an %s-approval grant with the waiting action as stored, and queues nothing',
    async (approval) => {
      await freshWorkspace();
      await grant(two.apiA, owner, agent.principal, lamp.id, ['set_power'], undefined, approval);
      const body = { capability: 'set_power', arguments: { on: true }, idempotencyKey: `wait-${randomUUID()}` };
      const answers = await Promise.all([requestAction(two.apiA, agent.token, lamp.id, body), requestAction(two.apiB, agent.token, lamp.id, body)]);
      const stored = await two.apiA.get(`/v1/actions/${answers[0]!.body.data.id}`, { token: agent.token });
      expect(stored.body.data).toMatchObject({ status: 'awaiting_approval', approval: { mode: approval, decision: null } });
      for (const answer of answers) expect(answer.body.data).toEqual(stored.body.data);
      const queued = await two.a.service.db.all(`SELECT id FROM actions WHERE device_id = ? AND status = 'queued'`, [lamp.id]);
      expect(queued).toEqual([]);
    },
    60_000,
  );

  it.each(['the agent connection', 'the grant', 'the device'])(
    'hands out nothing requested around the moment %s is revoked, with requests racing over both instances',
    async (what) => {
      await freshWorkspace();
      const revoke = () =>
        what === 'the agent connection'
          ? two.apiA.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner })
          : what === 'the grant'
            ? two.apiA.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } })
            : two.apiA.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
      const requests = Array.from({ length: 12 }, (_, i) =>
        requestAction(i % 2 ? two.apiA : two.apiB, agent.token, lamp.id, {
          capability: 'set_power',
          arguments: { on: true },
          ...(i % 3 ? { idempotencyKey: `around-${i}-${randomUUID()}` } : {}),
        }),
      );
      const [revoked] = await Promise.all([revoke(), ...requests]);
      expect(revoked.status).toBeLessThan(300);
      // Whatever was accepted before or after the revocation, the device is never handed it.
      if (what !== 'the device') {
        for (let i = 0; i < 4; i++) expect((await next(i % 2 ? two.apiA : two.apiB, lamp)).body.data).toBeNull();
      }
      // And none is left waiting to run: the revocation withdrew what was queued before it, the
      // hand-out cancels what a request that had passed its checks queued after it.
      const left = await two.a.service.db.all<{ status: string }>(`SELECT status FROM actions WHERE device_id = ? AND status NOT IN ('cancelled')`, [lamp.id]);
      expect(left).toEqual([]);
    },
    60_000,
  );

  it('replaces a key record older than 24 hours: the new request creates its action and the key replays it', async () => {
    await freshWorkspace();
    const key = `expired-${randomUUID()}`;
    const workspaceId = (await two.a.service.db.get<{ id: string }>('SELECT workspace_id AS id FROM devices WHERE id = ?', [lamp.id]))!.id;
    await two.a.service.db.run('INSERT INTO idempotency_keys (workspace_id, principal, key, request_hash, response, created_at) VALUES (?, ?, ?, ?, ?, ?)', [
      workspaceId,
      agent.principal,
      key,
      'another request',
      '{"stale":true}',
      Date.now() - 25 * 3600_000,
    ]);
    const body = { capability: 'set_power', arguments: { on: true }, idempotencyKey: key };
    const first = await requestAction(two.apiA, agent.token, lamp.id, body);
    expect(first.status, JSON.stringify(first.body)).toBe(201);
    const again = await requestAction(two.apiB, agent.token, lamp.id, body);
    expect(again.body.data).toEqual(first.body.data);
    expect(await pending(lamp.id)).toBe(1);
  }, 60_000);

  it('leaves the key free after a refusal: the same key works once the grant is given', async () => {
    await freshWorkspace();
    const body = { capability: 'set_power', arguments: { on: true }, idempotencyKey: `refused-${randomUUID()}` };
    expect(
      (await two.apiA.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } })).status,
    ).toBeLessThan(300);
    const refused = await Promise.all([requestAction(two.apiA, agent.token, lamp.id, body), requestAction(two.apiB, agent.token, lamp.id, body)]);
    for (const answer of refused) expect(answer.body.error.code).toBe('grant_required');
    await grant(two.apiA, owner, agent.principal, lamp.id, ['set_power']);
    const created = await requestAction(two.apiB, agent.token, lamp.id, body);
    expect(created.status, JSON.stringify(created.body)).toBe(201);
  }, 60_000);
});

describe('the one-read access check on gateway children (two instances, one libSQL server)', () => {
  const two = twoInstances();

  it('targets the gateway for a child and a service, refuses a detached child, a revoked gateway’s children and another workspace’s device', async () => {
    const owner = await two.a.ownerToken(`access-${randomUUID()}`);
    const agent = await createAgent(two.apiA, owner, { access: 'act', principal: 'agent:access' });
    const hub = await attachDevice(two.apiA, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const { Bulb: bulb, Cloud: cloud } = (await childrenOf(two.apiA, owner, hub.id)) as { Bulb: string; Cloud: string };
    await grant(two.apiA, owner, agent.principal, bulb, ['set_power']);
    await grant(two.apiA, owner, agent.principal, cloud, ['cloud_sync']);
    const onBulb = await requestAction(two.apiB, agent.token, bulb, { capability: 'set_power', arguments: { on: true } });
    const onCloud = await requestAction(two.apiA, agent.token, cloud, { capability: 'cloud_sync', arguments: {} });
    expect([onBulb.status, onCloud.status]).toEqual([201, 201]);
    const targets = await two.a.service.db.all<{ targetId: string }>('SELECT target_id AS targetId FROM actions WHERE id IN (?, ?)', [
      onBulb.body.data.id,
      onCloud.body.data.id,
    ]);
    expect(targets).toEqual([{ targetId: hub.id }, { targetId: hub.id }]);

    // Another workspace's agent naming this workspace's device: answered as an unknown device is.
    const stranger = await createAgent(two.apiA, await two.a.ownerToken(`stranger-${randomUUID()}`), { access: 'act', principal: agent.principal });
    const strangers = await requestAction(two.apiB, stranger.token, bulb, { capability: 'set_power', arguments: { on: true } });
    const unknown = await requestAction(two.apiB, stranger.token, randomUUID(), { capability: 'set_power', arguments: { on: true } });
    expect(strangers.body.error.code).toBe('grant_required');
    expect(strangers.body.error.message).toBe(unknown.body.error.message);

    // The bulb leaves the manifest: detached, so no device it may call.
    const withoutBulb = { ...hubManifest, children: hubManifest.children.filter((child) => child.key !== 'bulb') };
    expect((await two.apiA.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: withoutBulb })).status).toBe(200);
    expect((await requestAction(two.apiB, agent.token, bulb, { capability: 'set_power', arguments: { on: true } })).body.error.code).toBe('grant_required');

    // The gateway revoked: its service child moves nothing.
    expect((await two.apiA.post(`/v1/devices/${hub.id}/revoke`, { token: owner })).status).toBe(200);
    const refused = await requestAction(two.apiB, agent.token, cloud, { capability: 'cloud_sync', arguments: {} });
    expect(refused.body.error.code).toBe('grant_required');
    const created = await two.a.service.db.all('SELECT id FROM actions WHERE device_id IN (?, ?)', [bulb, cloud]);
    expect(created.length).toBe(2);
  }, 60_000);
});

describe('the kill switch on the keyed request', () => {
  it('refuses a keyed request and its replay with controls off, creating nothing', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-kill-'));
    const on = await startTestServer({ dir });
    const api = client(on.url);
    const owner = await on.ownerToken(`kill-${randomUUID()}`);
    const agent = await createAgent(api, owner, { access: 'act', principal: 'agent:kill' });
    const lamp = await attachDevice(api, owner, { name: 'Lamp' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const body = { capability: 'set_power', arguments: { on: true }, idempotencyKey: `kill-${randomUUID()}` };
    expect((await requestAction(api, agent.token, lamp.id, body)).status).toBe(201);
    await on.close();
    const off = await startTestServer({ dir, env: { DEVICE_CONTROLS_ENABLED: 'false' } });
    try {
      const offApi = client(off.url);
      const replay = await requestAction(offApi, agent.token, lamp.id, body);
      expect(replay.body.error.code).toBe('device_controls_disabled');
      const fresh = await requestAction(offApi, agent.token, lamp.id, { ...body, idempotencyKey: `kill-${randomUUID()}` });
      expect(fresh.body.error.code).toBe('device_controls_disabled');
      expect((await off.service.db.all('SELECT id FROM actions WHERE device_id = ?', [lamp.id])).length).toBe(1);
    } finally {
      await off.close();
    }
  }, 60_000);
});

import http from 'node:http';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runHousekeeping } from '../../src/domain/housekeeping.js';
import { EmbeddedDb } from '../../src/store/embedded.js';
import { migrate } from '../../src/store/migrate.js';
import { ACTION_RESERVED_BYTES } from '../../src/store/usage.js';
import { grant, next, report, requestAction } from '../helpers/actions.js';
import { client, type ApiResponse, type Client } from '../helpers/api.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, type Era } from '../helpers/mcp-client.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

/**
 * Storage budgets per workspace (docs/operators/budgets.md): what one workspace can make the service
 * store is bounded, a write that would exceed a budget is refused whole with 429
 * `quota_exceeded` naming it, on REST and MCP alike, nothing accepted earlier is lost, and
 * retention gives the space back. The rules where HTTP is not the point (each budget's edge, a
 * broadcast's per-device check) are called without it in test/store/storage-budget-rules.test.ts;
 * this file keeps the answer on the wire and what needs a running service.
 */

const DAY = 24 * 3_600_000;
const METRICS_TOKEN = 'metrics-secret-for-budget-tests-0123';

/** A device whose one function stores whatever text the agent sends: the hostile review's 14 KB arguments. */
const noteManifest = {
  capabilities: [
    {
      name: 'note',
      kind: 'control',
      arguments: { type: 'object', properties: { text: { type: 'string', maxLength: 14_000 } }, required: ['text'], additionalProperties: false },
    },
  ],
};

interface World {
  owner: string;
  device: AttachedDevice;
  agent: { token: string; principal: string };
  workspaceId: string;
}

const servers: TestServer[] = [];
afterAll(() => Promise.all(servers.map((s) => s.close())));

async function serve(env: Record<string, string>, clock?: ReturnType<typeof manualClock>): Promise<{ server: TestServer; api: Client }> {
  const server = await startTestServer({ env, ...(clock ? { clock } : {}) });
  servers.push(server);
  return { server, api: client(server.url) };
}

async function world(server: TestServer, api: Client, name: string): Promise<World> {
  const owner = await server.ownerToken(name);
  const { device, agent } = await grantedDevice(api, owner, { device: { name: 'Notebook', manifest: noteManifest }, capabilities: ['note'] });
  const workspaceId = (await server.service.db.get<{ id: string }>('SELECT workspace_id AS id FROM devices WHERE id = ?', [device.id]))!.id;
  return { owner, device, agent, workspaceId };
}

/** Arguments of exactly `bytes` bytes once stored as JSON. */
const argumentsOf = (bytes: number) => ({ text: 'x'.repeat(bytes - '{"text":""}'.length) });

const note = (api: Client, w: World, bytes: number) => requestAction(api, w.agent.token, w.device.id, { capability: 'note', arguments: argumentsOf(bytes) });

function expectQuotaExceeded(res: ApiResponse, budget: string, limit: number) {
  expect(res.status, JSON.stringify(res.body)).toBe(429);
  expect(res.body.error).toMatchObject({ code: 'quota_exceeded', details: { budget, limit } });
  expect(res.body.error.message).toContain(budget);
  expect(res.body.error.details.used).toBeGreaterThan(0);
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
  expect(res.body.error.details.retryAfter).toBe(Number(res.headers.get('retry-after')));
}

const storedActions = async (server: TestServer, w: World) =>
  (await server.service.db.get<{ n: number }>('SELECT count(*) AS n FROM actions WHERE workspace_id = ?', [w.workspaceId]))!.n;

describe('each storage budget, once used up, refuses the next action request with 429 quota_exceeded naming it', () => {
  it('actions: the number of actions a workspace stores (WORKSPACE_MAX_STORED_ACTIONS)', async () => {
    const { server, api } = await serve({ WORKSPACE_MAX_STORED_ACTIONS: '3' });
    const w = await world(server, api, 'budget-actions');
    for (let i = 0; i < 3; i++) expect((await note(api, w, 100)).status).toBe(201);
    const refused = await note(api, w, 100);
    expectQuotaExceeded(refused, 'actions', 3);
    expect(refused.body.error.details.used).toBe(3);
    // With an idempotency key the action is written in a batch that claims the key: refused the same.
    const keyed = await requestAction(api, w.agent.token, w.device.id, { capability: 'note', arguments: argumentsOf(100), idempotencyKey: 'over' });
    expectQuotaExceeded(keyed, 'actions', 3);
    expect(await storedActions(server, w)).toBe(3);
    // Another workspace has budgets of its own.
    expect((await note(api, await world(server, api, 'budget-actions-other'), 100)).status).toBe(201);
  });

  it('action_bytes: a workspace with nothing counted yet cannot store a first action larger than the budget', async () => {
    const { server, api } = await serve({ WORKSPACE_MAX_ACTION_BYTES: '1000' });
    const w = await world(server, api, 'budget-first');
    // Its device and grant were journalled; a workspace whose first write is the action has no row.
    await server.service.db.run('DELETE FROM workspace_usage WHERE workspace_id = ?', [w.workspaceId]);
    const refused = await note(api, w, 2000);
    // Larger than the whole budget: too large, never "used up", and no Retry-After, since waiting cannot help.
    expect(refused.status, JSON.stringify(refused.body)).toBe(413);
    expect(refused.body.error).toMatchObject({ code: 'payload_too_large', details: { budget: 'action_bytes', limit: 1000, used: 0 } });
    expect(refused.body.error.issues[0].path).toBe('arguments');
    expect(refused.body.error.message).not.toContain('used up');
    expect(refused.body.error.message).toContain('waiting will not help');
    expect(refused.headers.get('retry-after')).toBeNull();
    expect(await storedActions(server, w)).toBe(0);
  });

  it('webhook_deliveries: the webhook deliveries stored (WORKSPACE_MAX_WEBHOOK_DELIVERIES)', async () => {
    const receiver = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => response.writeHead(200).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const { server, api } = await serve({ WORKSPACE_MAX_WEBHOOK_DELIVERIES: '2', OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05' });
      const w = await world(server, api, 'budget-deliveries');
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const hook = await api.post('/v1/webhooks', { token: w.owner, body: { url, events: ['action.created'] } });
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
      expect((await note(api, w, 100)).status).toBe(201);
      expect((await note(api, w, 100)).status).toBe(201);
      const stored = () => api.get(`/v1/webhooks/${hook.body.data.id}/deliveries`, { token: w.owner });
      await vi.waitFor(async () => expect((await stored()).body.data).toHaveLength(2), { timeout: 15_000, interval: 50 });
      expectQuotaExceeded(await note(api, w, 100), 'webhook_deliveries', 2);
    } finally {
      receiver.closeAllConnections();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});

describe('a refusal is the same on MCP: the device tool call is a tool error with the REST envelope', () => {
  let server: TestServer;
  let api: Client;
  let w: World;
  beforeAll(async () => {
    ({ server, api } = await serve({ WORKSPACE_MAX_STORED_ACTIONS: '1' }));
    w = await world(server, api, 'budget-mcp');
    expect((await note(api, w, 100)).status).toBe(201);
  });

  it.each<Era>(['modern', 'legacy'])('%s client: quota_exceeded naming the budget, and nothing stored', async (era) => {
    const mcp = await connect(server.url, w.agent.token, era);
    try {
      const tool = (await mcp.listTools()).tools.find((t) => t.name.startsWith('note'))!;
      const result = await mcp.callTool({ name: tool.name, arguments: argumentsOf(100) });
      expect(result.isError).toBe(true);
      const { error } = errorEnvelope(result) as { error: Record<string, unknown> };
      expect(error).toMatchObject({ code: 'quota_exceeded', details: { budget: 'actions', limit: 1, used: 1 } });
      expect(await storedActions(server, w)).toBe(1);
    } finally {
      await mcp.close();
    }
  });
});

describe('a budget never takes back what was accepted', () => {
  const BYTES_FOR_TWO = 2 * (1000 + ACTION_RESERVED_BYTES);
  let server: TestServer;
  let api: Client;
  let w: World;
  let accepted: string[];
  beforeAll(async () => {
    // Room for exactly two actions of 1,000 bytes with the room each reserves for its result.
    ({ server, api } = await serve({ WORKSPACE_MAX_STORED_ACTIONS: '2', WORKSPACE_MAX_ACTION_BYTES: String(BYTES_FOR_TWO) }));
    w = await world(server, api, 'budget-accepted');
    accepted = [];
    for (let i = 0; i < 2; i++) accepted.push((await note(api, w, 1000)).body.data.id);
    expectQuotaExceeded(await note(api, w, 100), 'actions', 2);
  });

  it('earlier actions stay readable', async () => {
    for (const id of accepted) expect((await api.get(`/v1/actions/${id}`, { token: w.owner })).body.data.id).toBe(id);
  });

  it('the device still fetches them and its results are stored, in the room each reserved when it was accepted', async () => {
    for (const id of accepted) {
      const handed = await next(api, w.device);
      expect(handed.body.data.id).toBe(id);
      // The workspace's byte budget is all taken by the two actions and their reservations.
      const res = await report(api, w.device, { actionId: id, ok: true, result: { page: 'y'.repeat(4000) } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect((await api.get(`/v1/actions/${id}`, { token: w.owner })).body.data.status).toBe('succeeded');
    }
    const used = (await api.get('/v1/usage', { token: w.owner })).body.data.storage.action_bytes;
    expect(used.used).toBeLessThanOrEqual(BYTES_FOR_TWO);
    const refused = await note(api, w, 100);
    expect(refused.status).toBe(429);
    expect(refused.body.error.details.budget).toBe('actions');
  });

  it('concurrent requests at a budget never overshoot it', async () => {
    const fresh = await world(server, api, 'budget-race');
    const answers = await Promise.all(Array.from({ length: 12 }, () => note(api, fresh, 100)));
    expect(answers.filter((res) => res.status === 201)).toHaveLength(2);
    for (const res of answers.filter((r) => r.status !== 201)) expectQuotaExceeded(res, 'actions', 2);
    expect(await storedActions(server, fresh)).toBe(2);
  });
});

describe('two instances on one libSQL server share each workspace budget', () => {
  let sqld: TestSqld;
  beforeAll(async () => {
    sqld = await startSqld();
  }, 30_000);
  afterAll(() => sqld?.stop());

  it('concurrent requests spread over both instances never overshoot it', async () => {
    const env = { DATABASE_URL: sqld.url, WORKSPACE_MAX_STORED_ACTIONS: '4' };
    // One after the other: the first brings the schema up to date.
    const first = await serve(env);
    const second = await serve(env);
    const w = await world(first.server, first.api, 'budget-sqld');
    const apis = [first.api, second.api];
    const answers = await Promise.all(Array.from({ length: 16 }, (_, i) => note(apis[i % 2]!, w, 100)));
    expect(answers.filter((res) => res.status === 201)).toHaveLength(4);
    for (const res of answers.filter((r) => r.status !== 201)) expectQuotaExceeded(res, 'actions', 4);
    expect(await storedActions(second.server, w)).toBe(4);
  }, 60_000);
});

describe('retention (ACTIONS_RETENTION_DAYS) deletes finished actions and gives their space back', () => {
  const clock = manualClock();
  let server: TestServer;
  let api: Client;
  let w: World;
  const sweep = () =>
    runHousekeeping(
      { db: server.service.db, clock },
      { actionsRetentionMs: server.config.actionsRetentionMs, eventsRetentionMs: server.config.ownerEvents.retentionMs },
    );
  const pragma = async (name: string) => Object.values((await server.service.db.get<Record<string, number>>(`PRAGMA ${name}`))!)[0]!;

  beforeAll(async () => {
    ({ server, api } = await serve(
      {
        ACTIONS_RETENTION_DAYS: '1',
        EVENTS_RETENTION_HOURS: '1',
        WORKSPACE_MAX_STORED_ACTIONS: '25',
        HOUSEKEEPING_SWEEP_SECONDS: '3600',
        EXPIRY_SWEEP_SECONDS: '3600',
      },
      clock,
    ));
    w = await world(server, api, 'budget-retention');
  });

  /** One day of a steady writer: 25 actions of 12 KB, each handed out and answered with 2 KB. */
  async function busyDay(): Promise<void> {
    for (let i = 0; i < 25; i++) {
      const created = await note(api, w, 12_000);
      expect(created.status, JSON.stringify(created.body)).toBe(201);
      expect((await next(api, w.device)).body.data.id).toBe(created.body.data.id);
      expect((await report(api, w.device, { actionId: created.body.data.id, ok: true, result: { page: 'y'.repeat(2000) } })).status).toBe(200);
    }
  }

  // Hundreds of requests: a loaded machine needs more than the default 20 s.
  it('a steady write loop stays within a bounded file: the freed pages are reused', async () => {
    const pages: number[] = [];
    for (let day = 0; day < 5; day++) {
      await busyDay();
      expect(await storedActions(server, w)).toBe(25);
      // The budget is full: without retention this workspace could store nothing more.
      expectQuotaExceeded(await note(api, w, 100), 'actions', 25);
      clock.advance(DAY + 60_000);
      const deleted = await sweep();
      expect(deleted.actions).toBe(25);
      expect(await storedActions(server, w)).toBe(0);
      expect(await pragma('freelist_count')).toBeGreaterThan(0);
      pages.push(await pragma('page_count'));
    }
    // The first day grows the file; every later day fits in the pages the sweep freed.
    expect(Math.max(...pages.slice(1))).toBeLessThanOrEqual(Math.ceil(pages[0]! * 1.1));
    const usage = await server.service.db.get<{ actions: number; action_bytes: number }>(
      'SELECT actions, action_bytes FROM workspace_usage WHERE workspace_id = ?',
      [w.workspaceId],
    );
    expect(usage).toEqual({ actions: 0, action_bytes: 0 });
  }, 90_000);

  it('keeps an action a device still holds however old it is, and takes its late result', async () => {
    const created = await note(api, w, 500);
    expect(created.status).toBe(201);
    expect((await next(api, w.device)).body.data.id).toBe(created.body.data.id);
    clock.advance(3 * DAY);
    await sweep();
    const res = await report(api, w.device, { actionId: created.body.data.id, ok: true, result: { late: true } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect((await api.get(`/v1/actions/${created.body.data.id}`, { token: w.owner })).body.data.id).toBe(created.body.data.id);
  });
});

describe('the counters are exactly what the rows hold', () => {
  const bytes = (column: string) => `coalesce(length(CAST(${column} AS BLOB)), 0)`;
  const HELD = `SELECT w.id AS workspaceId,
      (SELECT count(*) FROM actions a WHERE a.workspace_id = w.id) AS actions,
      (SELECT coalesce(sum(${bytes('arguments')} + ${bytes('result')} + ${bytes('error_message')} + ${bytes('decision_reason')} + reserved_bytes), 0)
         FROM actions a WHERE a.workspace_id = w.id) AS action_bytes,
      (SELECT coalesce(sum(${bytes('data')}), 0) FROM workspace_events e WHERE e.workspace_id = w.id) AS event_bytes,
      (SELECT count(*) FROM webhook_deliveries d WHERE d.workspace_id = w.id) AS webhook_deliveries
    FROM workspaces w ORDER BY w.id`;
  const COUNTED = `SELECT w.id AS workspaceId, coalesce(u.actions, 0) AS actions, coalesce(u.action_bytes, 0) AS action_bytes,
      coalesce(u.event_bytes, 0) AS event_bytes, coalesce(u.webhook_deliveries, 0) AS webhook_deliveries
    FROM workspaces w LEFT JOIN workspace_usage u ON u.workspace_id = w.id ORDER BY w.id`;

  it('after results, failures, cancellations and a retention sweep, and when migration 0024 counts an existing database', async () => {
    const clock = manualClock();
    const { server, api } = await serve({ ACTIONS_RETENTION_DAYS: '1', EVENTS_RETENTION_HOURS: '1', EXPIRY_SWEEP_SECONDS: '3600' }, clock);
    const w = await world(server, api, 'budget-counters');
    const round = async (outcome: 'ok' | 'failed' | 'cancelled') => {
      const created = await note(api, w, 700);
      expect(created.status).toBe(201);
      const id = created.body.data.id as string;
      if (outcome === 'cancelled') return void expect((await api.post(`/v1/actions/${id}/cancel`, { token: w.owner })).status).toBe(200);
      expect((await next(api, w.device)).body.data.id).toBe(id);
      const body =
        outcome === 'ok'
          ? { actionId: id, ok: true, result: { page: 'é'.repeat(300) } }
          : { actionId: id, ok: false, error: { code: 'jammed', message: 'ü'.repeat(200) } };
      expect((await report(api, w.device, body)).status).toBe(200);
    };
    for (const outcome of ['ok', 'failed', 'cancelled'] as const) await round(outcome);
    clock.advance(2 * DAY);
    const swept = await runHousekeeping({ db: server.service.db, clock }, { actionsRetentionMs: DAY, eventsRetentionMs: 3_600_000 });
    expect(swept.actions).toBe(3);
    for (const outcome of ['ok', 'failed', 'cancelled'] as const) await round(outcome);
    const held = await server.service.db.all(HELD);
    expect(held.find((row) => (row as { workspaceId: string }).workspaceId === w.workspaceId)).toMatchObject({ actions: 3 });
    expect(await server.service.db.all(COUNTED)).toEqual(held);

    // The same database as it was before migration 0024: the migration counts what it holds.
    await server.close();
    const db = new EmbeddedDb(path.join(server.dir, 'service.db'));
    try {
      for (const trigger of [
        'actions_usage_insert',
        'actions_usage_update',
        'actions_usage_delete',
        'workspace_events_usage_insert',
        'workspace_events_usage_delete',
        'webhook_deliveries_usage_insert',
        'webhook_deliveries_usage_delete',
      ]) {
        await db.run(`DROP TRIGGER ${trigger}`);
      }
      await db.run('DROP TABLE workspace_usage');
      await db.run('DELETE FROM schema_migrations WHERE version = 24');
      expect(await migrate(db)).toEqual([24]);
      expect(await db.all(COUNTED)).toEqual(held);
    } finally {
      await db.close();
    }
  });
});

describe('metrics: storage used per workspace', () => {
  it('names the heaviest workspaces per budget, the total and each limit', async () => {
    const { server, api } = await serve({ METRICS_TOKEN, WORKSPACE_MAX_ACTION_BYTES: '100000' });
    const w = await world(server, api, 'budget-metrics');
    expect((await note(api, w, 3000)).status).toBe(201);
    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    const text = await res.text();
    // Queued: its arguments and the room it reserves for its result.
    expect(text).toContain(`dfc_workspace_storage_used{workspace="${w.workspaceId}",budget="action_bytes"} ${3000 + ACTION_RESERVED_BYTES}`);
    expect(text).toContain(`dfc_workspace_storage_used{workspace="${w.workspaceId}",budget="actions"} 1`);
    expect(text).toMatch(/dfc_storage_used\{budget="event_bytes"\} [1-9]\d*/);
    expect(text).toContain('dfc_workspace_storage_limit{budget="action_bytes"} 100000');
  });
});

describe('action_bytes holds at its edge: each action reserves room for its result when it is accepted', () => {
  it('keeps a workspace within its byte budget when every tiny action accepted at the edge gets a large result', async () => {
    const limit = 60 * (100 + ACTION_RESERVED_BYTES) + 50;
    const { server, api } = await serve({ WORKSPACE_MAX_ACTION_BYTES: String(limit), WORKSPACE_MAX_QUEUED_ACTIONS: '100', DEVICE_QUEUE_PER_PRINCIPAL: '100' });
    const w = await world(server, api, 'budget-reserved');
    const accepted: string[] = [];
    for (let res = await note(api, w, 100); res.status === 201; res = await note(api, w, 100)) accepted.push(res.body.data.id);
    expect(accepted).toHaveLength(60);
    for (const id of accepted) {
      expect((await next(api, w.device)).body.data.id).toBe(id);
      const res = await report(api, w.device, { actionId: id, ok: true, result: { page: 'y'.repeat(15_000) } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    }
    const { used } = (await api.get('/v1/usage', { token: w.owner })).body.data.storage.action_bytes;
    expect(used).toBeGreaterThan(60 * 15_000);
    expect(used).toBeLessThanOrEqual(limit);
  });

  it('refuses a result longer stored than the room reserved for it with 400 at result, and takes a shorter one after', async () => {
    const { server, api } = await serve({});
    const w = await world(server, api, 'budget-result-size');
    const id = (await note(api, w, 100)).body.data.id as string;
    expect((await next(api, w.device)).body.data.id).toBe(id);
    // 3,000 numbers of 5 bytes in the body (sent as written: JSON.stringify would spell them out)
    // are stored as 21 bytes each: 63 KB.
    const body = `{"actionId":"${id}","ok":true,"result":{"values":[${Array.from({ length: 3000 }, () => '1e20').join(',')}]}}`;
    const answer = await fetch(`${server.url}/v1/device/${w.device.id}/result`, {
      method: 'POST',
      headers: { authorization: `Bearer ${w.device.token}`, 'content-type': 'application/json' },
      body,
    });
    const res = { status: answer.status, body: (await answer.json()) as { error: { code: string; issues: { path: string }[] } } };
    expect(res.status, JSON.stringify(res.body)).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues).toEqual([expect.objectContaining({ path: 'result' })]);
    expect((await api.get(`/v1/actions/${id}`, { token: w.owner })).body.data.status).toBe('received');
    expect((await report(api, w.device, { actionId: id, ok: true, result: { values: [1e20] } })).status).toBe(200);
  });

  it('gives the reservation back once nothing more can be written: a result, a cancellation', async () => {
    const { server, api } = await serve({});
    const w = await world(server, api, 'budget-released');
    const used = async () => (await api.get('/v1/usage', { token: w.owner })).body.data.storage.action_bytes.used as number;
    const cancelled = (await note(api, w, 100)).body.data.id as string;
    expect(await used()).toBe(100 + ACTION_RESERVED_BYTES);
    expect((await api.post(`/v1/actions/${cancelled}/cancel`, { token: w.owner })).status).toBe(200);
    expect(await used()).toBe(100);
    const done = (await note(api, w, 100)).body.data.id as string;
    expect((await next(api, w.device)).body.data.id).toBe(done);
    expect((await report(api, w.device, { actionId: done, ok: true, result: { page: 'é' } })).status).toBe(200);
    expect(await used()).toBe(200 + Buffer.byteLength(JSON.stringify({ page: 'é' })));
  });
});

describe('webhook_deliveries holds at its edge: deliveries past it are not written, the webhook counts them and its owner is told', () => {
  it('stores exactly the budget when owner changes owe 20 webhooks ten times as many, and tells each webhook’s owner once', async () => {
    const receiver = http.createServer((request, response) => {
      request.resume();
      request.on('end', () => response.writeHead(200).end());
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    const clock = manualClock();
    try {
      const { server, api } = await serve({ WORKSPACE_MAX_WEBHOOK_DELIVERIES: '20', OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05' }, clock);
      const owner = await server.ownerToken('budget-skipped');
      const lamp = await attachDevice(api, owner);
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hook`;
      const hooks: string[] = [];
      for (let i = 0; i < 20; i++) {
        const hook = await api.post('/v1/webhooks', { token: owner, body: { url, events: ['grant.created'] } });
        expect(hook.status, JSON.stringify(hook.body)).toBe(201);
        hooks.push(hook.body.data.id);
      }
      // Grant changes are the owner's own: never refused, 10 × 20 deliveries owed.
      for (let i = 0; i < 10; i++) await grant(api, owner, `agent:skipped-${i}`, lamp.id, ['set_power']);
      const shown = async () => Promise.all(hooks.map(async (id) => (await api.get(`/v1/webhooks/${id}`, { token: owner })).body.data));
      await vi.waitFor(async () => expect((await shown()).reduce((sum, hook) => sum + hook.skippedDeliveries, 0)).toBe(180), { timeout: 15_000, interval: 50 });
      const { used, limit } = (await api.get('/v1/usage', { token: owner })).body.data.storage.webhook_deliveries;
      expect({ used, limit }).toEqual({ used: 20, limit: 20 });
      for (const hook of await shown()) expect(hook).toMatchObject({ skippedDeliveries: 9, skippingSince: expect.any(Number) });
      const told = await server.service.db.all<{ subjectId: string }>(
        "SELECT subject_id AS subjectId FROM workspace_events WHERE type = 'webhook.skipped' ORDER BY subject_id",
      );
      expect(told.map((event) => event.subjectId)).toEqual([...hooks].sort());

      // Once housekeeping gives room back, the next event is delivered and the run of skips ends.
      const delivered = async () =>
        (await Promise.all(hooks.map(async (id) => (await api.get(`/v1/webhooks/${id}/deliveries`, { token: owner })).body.data))).flat();
      await vi.waitFor(async () => expect((await delivered()).every((d: { status: string }) => d.status === 'delivered')).toBe(true), {
        timeout: 15_000,
        interval: 50,
      });
      clock.advance(8 * DAY);
      await runHousekeeping({ db: server.service.db, clock }, { actionsRetentionMs: 30 * DAY, eventsRetentionMs: DAY });
      await grant(api, owner, 'agent:skipped-after', lamp.id, ['set_power']);
      await vi.waitFor(async () => expect((await shown()).every((hook) => hook.skippingSince === null)).toBe(true), { timeout: 15_000, interval: 50 });
    } finally {
      receiver.closeAllConnections();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});

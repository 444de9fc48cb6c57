import { beforeAll, describe, expect, it } from 'vitest';
import { DatabaseUnavailable, type Db } from '../../src/store/driver.js';
import { grant, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { declaringTasks, listen, postMcp } from '../helpers/tasks-client.js';

/**
 * Which tasks a subscriptions/listen stream follows (docs/agents/tasks.md "Notifications"):
 * only those it has read as the caller's own, never another tenant's, even when that read
 * fails; at most the first 200 distinct ids of a request are read at all. Raw streams against
 * a real server; a failing read is the server's own database handle refusing once.
 */
const server = useTestServer({ env: { MCP_LISTEN_PER_CONNECTION: '1' } });
const api = server.api;
const TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };

interface Tenant {
  owner: string;
  lamp: AttachedDevice;
  setPower: string;
}
let ours: Tenant;
let theirs: Tenant;

async function tenant(name: string): Promise<Tenant> {
  const owner = await server.ownerToken(`owner-${name}`);
  const lamp = await attachDevice(api, owner, { name: `Lamp ${name}` });
  return { owner, lamp, setPower: toolName('set_power', lamp) };
}

async function agentOf(t: Tenant, name: string): Promise<{ token: string; principal: string }> {
  const agent = await createAgent(api, t.owner, { name, access: 'act', principal: `agent:${name}` });
  await grant(api, t.owner, agent.principal, t.lamp.id, ['set_power']);
  return agent;
}

async function createTask(t: Tenant, token: string): Promise<string> {
  const res = await postMcp(server.url, token, {
    method: 'tools/call',
    params: { name: t.setPower, arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
  });
  expect(res.result.resultType, JSON.stringify(res)).toBe('task');
  return res.result.taskId;
}

/** The tenant's device fetches the task and reports success. */
async function runOnDevice(t: Tenant, taskId: string): Promise<void> {
  expect((await next(api, t.lamp)).body.data.id).toBe(taskId);
  await report(api, t.lamp, { actionId: taskId, ok: true, result: { secret: 'device output' } });
}

/** Whether a statement's arguments name the action `id`: as one argument, or in a JSON list of ids. */
const names = (args: readonly unknown[] | undefined, id: string) =>
  args?.some((arg) => arg === id || (typeof arg === 'string' && arg.includes(`"${id}"`))) ?? false;

/** The server's database refuses the next read of the action `id` as an unreachable one would; resolves once it has. */
function failNextActionRead(db: Db, id: string): Promise<void> {
  const get = db.get.bind(db);
  const all = db.all.bind(db);
  return new Promise((resolve) => {
    const refuse = () => {
      db.get = get;
      db.all = all;
      resolve();
      throw new DatabaseUnavailable('refused by the test');
    };
    db.get = (async (sql: string, args?: readonly unknown[]) => {
      if (/\bactions\b/.test(sql) && names(args, id)) refuse();
      return get(sql, args as never);
    }) as Db['get'];
    db.all = (async (sql: string, args?: readonly unknown[]) => {
      if (/\bactions\b/.test(sql) && names(args, id)) refuse();
      return all(sql, args as never);
    }) as Db['all'];
  });
}

/** Counts the server's reads of the actions table that name one of `ids` while `during` runs. */
async function actionReads(db: Db, ids: readonly string[], during: () => Promise<void>): Promise<number> {
  const get = db.get.bind(db);
  const all = db.all.bind(db);
  let reads = 0;
  // Only statements that carry one of these ids count: the service's own background work (expiry,
  // the scheduler, housekeeping) reads actions too, whenever its timers fire.
  const counts = (sql: string, args?: readonly unknown[]) => /\bactions\b/.test(sql) && ids.some((id) => names(args, id));
  db.get = ((sql: string, args?: readonly unknown[]) => {
    if (counts(sql, args)) reads += 1;
    return get(sql, args as never);
  }) as Db['get'];
  db.all = ((sql: string, args?: readonly unknown[]) => {
    if (counts(sql, args)) reads += 1;
    return all(sql, args as never);
  }) as Db['all'];
  try {
    await during();
  } finally {
    db.get = get;
    db.all = all;
  }
  return reads;
}

const isTask = (m: Record<string, any>) => m.method === 'notifications/tasks';
const isAnswer = (m: Record<string, any>) => m.id === 'listen-1';

beforeAll(async () => {
  ours = await tenant('listen-owner-a');
  theirs = await tenant('listen-owner-b');
});

describe('a subscription whose tasks cannot be read ends with an error', () => {
  it('answers the listen request with -32603 and the unavailable envelope, and never tells another tenant’s task', async () => {
    const listener = await agentOf(ours, 'listen-prober');
    const victim = await agentOf(theirs, 'listen-victim');
    const foreign = await createTask(theirs, victim.token);
    const refused = failNextActionRead(server.store, foreign);
    const stream = await listen(server.url, listener.token, { taskIds: [foreign] }, TASKS);
    try {
      await refused;
      // The other tenant's task finishes on this same instance after the failed read.
      await runOnDevice(theirs, foreign);
      const first = await stream.next(() => true);
      expect(first.method, JSON.stringify(first)).not.toBe('notifications/tasks');
      expect(first).toMatchObject({ jsonrpc: '2.0', id: 'listen-1', error: { code: -32603, data: { error: { code: 'unavailable' } } } });
      await stream.ended;
      await expect(stream.next(isTask, 0)).rejects.toThrow(/stream ended first/);
      expect(JSON.stringify(stream.seen)).not.toContain('device output');
    } finally {
      stream.close();
    }
  });

  it('frees its place: the same connection, at its bound of one stream, listens again at once', async () => {
    const listener = await agentOf(ours, 'listen-retrier');
    const own = await createTask(ours, listener.token);
    const refused = failNextActionRead(server.store, own);
    const failed = await listen(server.url, listener.token, { taskIds: [own] }, TASKS);
    try {
      await refused;
      expect((await failed.next(isAnswer)).error).toMatchObject({ code: -32603 });
      await failed.ended;
    } finally {
      failed.close();
    }
    const again = await listen(server.url, listener.token, { taskIds: [own] }, TASKS);
    try {
      expect(again.status).toBe(200);
      const ack = await again.next((m) => m.method === 'notifications/subscriptions/acknowledged');
      expect(ack.params.notifications).toEqual({ taskIds: [own] });
      expect((await again.next(isTask)).params).toMatchObject({ taskId: own, status: 'working' });
    } finally {
      again.close();
      await api.post(`/v1/actions/${own}/cancel`, { token: ours.owner });
    }
  });
});

describe('a subscription reads its tasks again on its recheck', () => {
  it('tells the final state of a task that finished without any event reaching it, then ends', async () => {
    const listener = await agentOf(ours, 'listen-rechecker');
    const taskId = await createTask(ours, listener.token);
    const stream = await listen(server.url, listener.token, { taskIds: [taskId] }, TASKS);
    try {
      expect((await stream.next(isTask)).params).toMatchObject({ taskId, status: 'working' });
      // Finished as another instance would, with its event lost: the row alone changes.
      const now = Date.now();
      const { changes } = await server.store.run(
        "UPDATE actions SET status = 'succeeded', dispatched_at = ?, completed_at = ?, result = ? WHERE id = ? AND status = 'queued'",
        [now, now, JSON.stringify({ on: true }), taskId],
      );
      expect(changes).toBe(1);
      const done = await stream.next(isTask);
      expect(done.params).toMatchObject({ taskId, status: 'completed' });
      expect((await stream.next(isAnswer)).result).toMatchObject({ resultType: 'complete' });
      await stream.ended;
    } finally {
      stream.close();
    }
  });
});

describe('a listen request’s task ids are read up to a bound', () => {
  it('reads only the first 200 distinct ids: the caller’s own task past them is not followed', async () => {
    const listener = await agentOf(ours, 'listen-many');
    const within = await createTask(ours, listener.token);
    const past = await createTask(ours, listener.token);
    const unknown = Array.from({ length: 199 }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
    const stream = await listen(server.url, listener.token, { taskIds: [...unknown, unknown[0], within, past] }, TASKS);
    try {
      const ack = await stream.next((m) => m.method === 'notifications/subscriptions/acknowledged');
      expect(ack.params.notifications).toEqual({ taskIds: [within] });
    } finally {
      stream.close();
      await api.post(`/v1/actions/${within}/cancel`, { token: ours.owner });
      await api.post(`/v1/actions/${past}/cancel`, { token: ours.owner });
    }
  });

  it('reads 200 unknown ids in one read before it acknowledges them as none', async () => {
    const listener = await agentOf(ours, 'listen-unknown');
    const unknown = Array.from({ length: 200 }, (_, i) => `00000000-0000-4000-9000-${String(i).padStart(12, '0')}`);
    let ack: Record<string, any> | undefined;
    const reads = await actionReads(server.store, unknown, async () => {
      const stream = await listen(server.url, listener.token, { taskIds: unknown }, TASKS);
      try {
        ack = await stream.next((m) => m.method === 'notifications/subscriptions/acknowledged');
      } finally {
        stream.close();
      }
    });
    expect(ack!.params.notifications).toEqual({ taskIds: [] });
    expect(reads).toBe(1);
  });
});

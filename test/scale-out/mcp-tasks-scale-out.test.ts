import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { grant, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { startRedis, type TestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { declaringTasks, listen, postMcp } from '../helpers/tasks-client.js';
import { toolName } from '../helpers/mcp-client.js';

/**
 * MCP Tasks across instances (docs/agents/tasks.md): the task is the action, in the shared
 * database before the call answers, so any instance resolves tasks/get; a subscription held
 * by one instance hears of a change committed by another through the Redis bus, and reads
 * the task from the database before it tells the agent. Two in-process instances on a real
 * sqld and a real redis-server.
 */
let sqld: TestSqld;
let redis: TestRedis;
let a: TestServer;
let b: TestServer;
let apiA: Client;
let owner: string;

beforeAll(async () => {
  [sqld, redis] = await Promise.all([startSqld(), startRedis()]);
  const env = { DATABASE_URL: sqld.url, REDIS_URL: redis.url };
  a = await startTestServer({ env });
  b = await startTestServer({ env });
  apiA = client(a.url);
  owner = await a.ownerToken('owner-tasks-bus');
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await Promise.all([sqld?.stop(), redis?.stop()]);
});

describe('a task created on one instance', () => {
  it('is polled on the other at once, notified there as the device reports on the first, and its tool list change too', async () => {
    const lamp = await attachDevice(apiA, owner, { name: 'Bus lamp' });
    const agent = await createAgent(apiA, owner, { name: 'tasks-bus', access: 'act', principal: 'agent:tasks-bus' });
    await grant(apiA, owner, agent.principal, lamp.id, ['set_power']);
    const setPower = toolName('set_power', lamp.id);

    const created = await postMcp(a.url, agent.token, {
      method: 'tools/call',
      params: { name: setPower, arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
    });
    const taskId = created.result.taskId as string;
    const polled = await postMcp(b.url, agent.token, { method: 'tasks/get', params: { taskId, _meta: declaringTasks() } });
    expect(polled.result).toMatchObject({ taskId, status: 'working' });

    const stream = await listen(b.url, agent.token, { taskIds: [taskId], toolsListChanged: true }, { extensions: { 'io.modelcontextprotocol/tasks': {} } });
    try {
      await stream.next((m) => m.method === 'notifications/subscriptions/acknowledged');
      await stream.next((m) => m.method === 'notifications/tasks');
      expect((await next(apiA, lamp)).body.data.id).toBe(taskId);
      await report(apiA, lamp, { actionId: taskId, ok: true, result: { on: true } });
      const done = await stream.next((m) => m.method === 'notifications/tasks' && m.params.status === 'completed');
      expect(done.params.result.structuredContent).toMatchObject({ id: taskId, status: 'succeeded', result: { on: true } });
      // A grant given through the first instance changes the tools listed on the second.
      await grant(apiA, owner, agent.principal, lamp.id, ['get_state']);
      await stream.next((m) => m.method === 'notifications/tools/list_changed');
    } finally {
      stream.close();
    }
    const cancelled = await postMcp(b.url, agent.token, { method: 'tasks/cancel', params: { taskId, _meta: declaringTasks() } });
    expect(cancelled.result.resultType).toBe('complete');
  });
});

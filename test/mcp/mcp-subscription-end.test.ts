import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { toolName } from '../helpers/mcp-client.js';
import { declaringTasks, listen, postMcp } from '../helpers/tasks-client.js';

/**
 * When a subscriptions/listen stream ends on its own (docs/agents/tasks.md "Notifications"):
 * one that follows only tasks has nothing more to tell once they have all finished, and ends
 * with the listen request's result right after the last final task; one that also follows the
 * tool list stays open. Raw streams against a real server; the device is a raw poller.
 */
const server = useTestServer();
const api = server.api;
let owner: string;
let lamp: AttachedDevice;
let agent: { id: string; token: string; principal: string };
let setPower: string;
const TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };

beforeAll(async () => {
  owner = await server.ownerToken('owner-listen-end');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'finisher', access: 'act', principal: 'agent:finisher' });
  await grant(api, owner, agent.principal, lamp.id, ['set_power']);
  setPower = toolName('set_power', lamp);
});

async function createTask(): Promise<string> {
  const res = await postMcp(server.url, agent.token, {
    method: 'tools/call',
    params: { name: setPower, arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
  });
  expect(res.result.resultType, JSON.stringify(res)).toBe('task');
  return res.result.taskId;
}

/** The device fetches the task and reports success. */
async function runOnDevice(taskId: string): Promise<void> {
  expect((await next(api, lamp)).body.data.id).toBe(taskId);
  await report(api, lamp, { actionId: taskId, ok: true, result: { on: true } });
}

const isFinal = (taskId: string) => (m: Record<string, any>) =>
  m.method === 'notifications/tasks' && m.params.taskId === taskId && m.params.status === 'completed';
const isResult = (m: Record<string, any>) => m.id === 'listen-1' && 'result' in m;

describe('a subscription that follows only tasks ends once they have all finished', () => {
  it('answers the listen request right after the last task’s final notification, and ends the stream', async () => {
    const first = await createTask();
    const second = await createTask();
    const stream = await listen(server.url, agent.token, { taskIds: [first, second] }, TASKS);
    try {
      await runOnDevice(first);
      await stream.next(isFinal(first));
      await runOnDevice(second);
      await stream.next(isFinal(second));
      const last = await stream.next(isResult);
      expect(last.result).toMatchObject({ resultType: 'complete', _meta: { 'io.modelcontextprotocol/subscriptionId': 'listen-1' } });
      // Nothing came between the final notification and the result; the first task's end did not close the stream.
      expect(stream.seen.filter(isResult)).toEqual([]);
      await stream.ended;
    } finally {
      stream.close();
    }
  });

  it('tells a task that had already finished as it stands, then answers the listen request', async () => {
    const taskId = await createTask();
    await runOnDevice(taskId);
    const stream = await listen(server.url, agent.token, { taskIds: [taskId] }, TASKS);
    try {
      await stream.next(isFinal(taskId));
      expect((await stream.next(isResult)).result).toMatchObject({ resultType: 'complete' });
      await stream.ended;
    } finally {
      stream.close();
    }
  });

  it('keeps a stream that also follows the tool list open after its tasks finish', async () => {
    const taskId = await createTask();
    const stream = await listen(server.url, agent.token, { taskIds: [taskId], toolsListChanged: true }, TASKS);
    try {
      await runOnDevice(taskId);
      await stream.next(isFinal(taskId));
      // Still told of the tool list: a grant given after the task finished reaches the same stream.
      await grant(api, owner, agent.principal, lamp.id, ['get_state']);
      await stream.next((m) => m.method === 'notifications/tools/list_changed');
      expect(stream.seen.filter(isResult)).toEqual([]);
    } finally {
      stream.close();
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next, report } from '../helpers/actions.js';
import { RECHECK_MS } from '../../src/mcp/subscriptions/subscription.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { declaringTasks, listen, postMcp } from '../helpers/tasks-client.js';

/**
 * subscriptions/listen (MCP 2026-07-28, docs/agents/tasks.md "Notifications"): an agent is told
 * of its own tasks' changes (`notifications/tasks`, the task as tasks/get answers it) and of
 * changes to the tools it may call (`notifications/tools/list_changed`); its subscription ends
 * when its access is revoked. Raw streams against a real server; the device is a raw poller.
 */
let owner: string;
let lamp: AttachedDevice;
let agent: { id: string; token: string; principal: string };
let setPower: string;
const TASKS = { extensions: { 'io.modelcontextprotocol/tasks': {} } };

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-listen');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'listener', access: 'act', principal: 'agent:listener' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
  setPower = toolName('set_power', lamp.id);
});

async function createTask(token: string): Promise<string> {
  const res = await postMcp(server.url, token, {
    method: 'tools/call',
    params: { name: setPower, arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
  });
  expect(res.result.resultType, JSON.stringify(res)).toBe('task');
  return res.result.taskId;
}

const isMethod = (method: string) => (m: Record<string, any>) => m.method === method;

describe('the server declares tool-list notifications', () => {
  it('says tools.listChanged true in server/discover', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'server/discover' });
    expect(res.json.result.capabilities.tools).toEqual({ listChanged: true });
  });
});

describe('notifications/tasks on subscriptions/listen', () => {
  it('streams the caller’s own task as tasks/get answers it, each change, up to its result; other ids are not acknowledged', async () => {
    const taskId = await createTask(agent.token);
    const other = await createAgent(api, owner, { name: 'other-listener', access: 'act', principal: 'agent:other-listener' });
    await grant(api, owner, other.principal, lamp.id, ['set_power']);
    const theirs = await createTask(other.token);
    const stream = await listen(server.url, agent.token, { taskIds: [taskId, theirs, '00000000-0000-4000-8000-000000000000'] }, TASKS);
    try {
      const ack = await stream.next(isMethod('notifications/subscriptions/acknowledged'));
      expect(ack.params.notifications).toEqual({ taskIds: [taskId] });
      expect(ack.params._meta['io.modelcontextprotocol/subscriptionId']).toBe('listen-1');
      const now = await stream.next(isMethod('notifications/tasks'));
      expect(now.params).toMatchObject({ taskId, status: 'working' });
      const got = (await postMcp(server.url, agent.token, { method: 'tasks/get', params: { taskId, _meta: declaringTasks() } })).result;
      const { resultType: _type, _meta: _m, ...asGot } = got;
      const { _meta: _n, ...asNotified } = now.params;
      expect(asNotified).toEqual(asGot);

      const command = (await next(api, lamp)).body.data;
      expect(command.id).toBe(taskId);
      expect((await stream.next(isMethod('notifications/tasks'))).params.statusMessage).toContain('device has it');
      await report(api, lamp, { actionId: taskId, ok: true, result: { on: true } });
      const done = await stream.next((m) => m.method === 'notifications/tasks' && m.params.status === 'completed');
      expect(done.params.result).toMatchObject({ resultType: 'complete', structuredContent: { status: 'succeeded', result: { on: true } } });
      expect(done.params.result.isError).toBeUndefined();
      expect(stream.seen.concat([done]).every((m) => m.params?.taskId !== theirs)).toBe(true);
    } finally {
      stream.close();
      await api.post(`/v1/actions/${theirs}/cancel`, { token: owner });
    }
  });

  it('refuses taskIds from a client that does not declare MCP Tasks with -32021', async () => {
    const res = await postMcp(server.url, agent.token, {
      method: 'subscriptions/listen',
      params: { notifications: { taskIds: ['x'] }, _meta: { ...declaringTasks(), 'io.modelcontextprotocol/clientCapabilities': {} } },
    });
    expect(res.error).toMatchObject({ code: -32021, data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } } });
  });
});

describe('notifications/tools/list_changed on subscriptions/listen', () => {
  it('tells the caller when a grant is created or revoked, and nothing for another agent’s grant', async () => {
    const watcher = await createAgent(api, owner, { name: 'tools-watcher', access: 'act', principal: 'agent:tools-watcher' });
    const stream = await listen(server.url, watcher.token, { toolsListChanged: true });
    try {
      expect((await stream.next(isMethod('notifications/subscriptions/acknowledged'))).params.notifications).toEqual({ toolsListChanged: true, taskIds: [] });
      // Another agent's grant changes nothing this caller may call.
      const stranger = await createAgent(api, owner, { name: 'tools-stranger', access: 'act', principal: 'agent:tools-stranger' });
      await grant(api, owner, stranger.principal, lamp.id, ['get_state']);
      // Past a recheck (RECHECK_MS) and the journal announcement: still nothing.
      await expect(stream.next(isMethod('notifications/tools/list_changed'), 2_500)).rejects.toThrow('no matching message');
      await grant(api, owner, watcher.principal, lamp.id, ['get_state']);
      await stream.next(isMethod('notifications/tools/list_changed'));
      const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: watcher.principal, deviceId: lamp.id, capability: 'get_state' } });
      expect(revoked.status, JSON.stringify(revoked.body)).toBeLessThan(300);
      await stream.next(isMethod('notifications/tools/list_changed'));
    } finally {
      stream.close();
    }
  });

  it('tells the caller as soon as a device republishes without a function it may call, not at the next recheck', async () => {
    const shelf = await attachDevice(api, owner, { name: 'Shelf lamp' });
    const watcher = await createAgent(api, owner, { name: 'manifest-watcher', access: 'act', principal: 'agent:manifest-watcher' });
    await grant(api, owner, watcher.principal, shelf.id, ['get_state', 'set_power']);
    const stream = await listen(server.url, watcher.token, { toolsListChanged: true });
    try {
      await stream.next(isMethod('notifications/subscriptions/acknowledged'));
      const without = { capabilities: lampManifest.capabilities.filter((fn) => fn.name !== 'get_state') };
      const published = await api.post(`/v1/device/${shelf.id}/manifest`, { token: shelf.token, body: without });
      expect(published.status, JSON.stringify(published.body)).toBe(200);
      // The stream's first recheck is RECHECK_MS after it opened: only the republish's own announcement comes sooner.
      await stream.next(isMethod('notifications/tools/list_changed'), RECHECK_MS / 2);
    } finally {
      stream.close();
    }
  });

  it('ends the subscription, with its result, when the agent connection is revoked', async () => {
    const leaving = await createAgent(api, owner, { name: 'leaving', access: 'act', principal: 'agent:leaving' });
    const stream = await listen(server.url, leaving.token, { toolsListChanged: true });
    await stream.next(isMethod('notifications/subscriptions/acknowledged'));
    const revoked = await api.post(`/v1/agent-connections/${leaving.id}/revoke`, { token: owner });
    expect(revoked.status, JSON.stringify(revoked.body)).toBeLessThan(300);
    const last = await stream.next((m) => m.id === 'listen-1');
    expect(last.result).toMatchObject({ resultType: 'complete' });
    await stream.ended;
  });
});

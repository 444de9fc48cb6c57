import { attachDevice as attachSdkDevice, CommandError, Device } from '@dfc/device';
import { resultFromTaskOutcome } from '@modelcontextprotocol/ext-tasks/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lampManifest } from '../../src/cli/simulated.js';
import { taskModeFor } from '../../src/mcp/tasks/task-methods.js';
import { grant } from '../helpers/actions.js';
import { createAgent, createSetupToken } from '../helpers/fixtures.js';
import { envelope, rawMcp, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { declaringTasks, postMcp, taskSession } from '../helpers/tasks-client.js';

/**
 * MCP Tasks (docs/agents/tasks.md): a device tool call of a client that declares the extension
 * answers with the action's task when the action has not finished within the short wait, and
 * tasks/get, tasks/update and tasks/cancel follow it. The official requester
 * (`@modelcontextprotocol/ext-tasks`) and raw 2026-07-28 requests against a real server, the
 * device built with the device SDK.
 */
let owner: string;
let lamp: Device;
let lampId: string;
let agent: { id: string; token: string; principal: string };
let setPower: string;
let setBrightness: string;
/** Holds each set_power command until the test lets it go (by its `on` argument's action id). */
const held = new Map<string, (outcome: 'ok' | 'error') => void>();
const seen: string[] = [];

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-tasks');
  const setup = await createSetupToken(api, owner);
  const credentials = await attachSdkDevice({ url: server.url, setupToken: setup.token, name: 'Desk lamp', kind: 'device' });
  lampId = credentials.deviceId;
  lamp = new Device({ url: server.url, credentials, manifest: lampManifest, backoff: { initialMs: 20, maxMs: 200 } });
  lamp.handle<{ on: boolean }>('set_power', async (args, ctx) => {
    seen.push(ctx.actionId);
    const outcome = await new Promise<'ok' | 'error'>((resolve) => held.set(ctx.actionId, resolve));
    if (outcome === 'error') throw new CommandError('jammed', 'The switch is jammed.');
    return { on: args.on };
  });
  lamp.handle<{ level: number }>('set_brightness', (args) => ({ level: args.level }));
  await lamp.start();
  agent = await createAgent(api, owner, { name: 'tasks', access: 'act', principal: 'agent:tasks' });
  await grant(api, owner, agent.principal, lampId, ['get_state', 'set_power', 'set_brightness']);
  setPower = toolName('set_power', lampId);
  setBrightness = toolName('set_brightness', lampId);
});
afterAll(async () => {
  await lamp.stop();
});

async function release(actionId: string, outcome: 'ok' | 'error' = 'ok'): Promise<void> {
  await expect.poll(() => held.has(actionId)).toBe(true);
  held.get(actionId)!(outcome);
  held.delete(actionId);
}

async function action(id: string): Promise<Record<string, any>> {
  return (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;
}

/** A raw tools/call declaring MCP Tasks. */
function callAsTask(
  token: string,
  name: string,
  args: Record<string, unknown>,
  meta: Record<string, unknown> = {},
  capabilities: Record<string, unknown> = {},
) {
  return postMcp(server.url, token, { method: 'tools/call', params: { name, arguments: args, _meta: declaringTasks(capabilities, meta) } });
}

function taskRequest(token: string, method: string, params: Record<string, unknown>) {
  return postMcp(server.url, token, { method, params: { ...params, _meta: declaringTasks() } });
}

describe('the server offers MCP Tasks', () => {
  it('advertises io.modelcontextprotocol/tasks under capabilities.extensions in server/discover', async () => {
    const res = await rawMcp(server.url, { token: agent.token, method: 'server/discover' });
    expect(res.json.result.capabilities.extensions).toEqual({ 'io.modelcontextprotocol/tasks': {}, 'io.modelcontextprotocol/ui': {} });
    expect(res.json.result.capabilities.tasks).toBeUndefined();
  });
});

describe('a device call from a client that declares MCP Tasks', () => {
  it('is a task once its action is committed, polled with the official requester until completed with the synchronous answer', async () => {
    const { client: mcp, session } = await taskSession(server.url, agent.token);
    try {
      const execution = await session.callTool(setPower, { on: true });
      expect(execution.kind).toBe('task');
      const taskId = execution.handle!.taskId as string;
      // The task is the action: committed before the answer, so any instance can read it.
      expect(await action(taskId)).toMatchObject({ id: taskId, capability: 'set_power' });
      const working = await session.task(execution.handle!.taskId).snapshot();
      expect(working).toMatchObject({ taskId, status: 'working' });
      expect(working.statusMessage).toMatch(/queued|device has it/i);
      await release(taskId);
      const { outcome } = await execution.settle();
      const result: any = resultFromTaskOutcome(outcome);
      expect(result.isError).toBeFalsy();
      expect(result.structuredContent).toMatchObject({ id: taskId, status: 'succeeded', result: { on: true } });
      expect(result.content[0].text).toContain('set_power on device "Desk lamp": succeeded');
    } finally {
      await session.close();
      await mcp.close();
    }
  });

  it('answers a call that finishes within the short wait synchronously, as it always did', async () => {
    const res = await callAsTask(agent.token, setBrightness, { level: 40 });
    expect(res.result.resultType).toBe('complete');
    expect(res.result.taskId).toBeUndefined();
    expect(res.result.structuredContent).toMatchObject({ status: 'succeeded', result: { level: 40 } });
  });

  it('answers a task at once with _meta dfc/waitSeconds 0: flat, with ISO times, integer ttlMs and pollIntervalMs, and no result', async () => {
    const res = await callAsTask(agent.token, setPower, { on: false }, { 'dfc/waitSeconds': 0 });
    const created = res.result;
    expect(created).toMatchObject({ resultType: 'task', taskId: expect.any(String), status: 'working' });
    expect(created.createdAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(created.lastUpdatedAt).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(Number.isInteger(created.ttlMs) && created.ttlMs > 0).toBe(true);
    expect(Number.isInteger(created.pollIntervalMs) && created.pollIntervalMs > 0).toBe(true);
    for (const key of ['result', 'error', 'inputRequests', 'requestState', 'task', 'ttl', 'pollInterval']) expect(created).not.toHaveProperty(key);
    const got = await taskRequest(agent.token, 'tasks/get', { taskId: created.taskId });
    expect(got.result).toMatchObject({ resultType: 'complete', taskId: created.taskId, status: 'working' });
    await release(created.taskId);
    await expect.poll(async () => (await taskRequest(agent.token, 'tasks/get', { taskId: created.taskId })).result.status).toBe('completed');
  });

  it('reports a device error as completed with isError, never failed', async () => {
    const res = await callAsTask(agent.token, setPower, { on: true }, { 'dfc/waitSeconds': 0 });
    await release(res.result.taskId, 'error');
    let task: any;
    await expect.poll(async () => (task = (await taskRequest(agent.token, 'tasks/get', { taskId: res.result.taskId })).result).status).toBe('completed');
    expect(task.result.isError).toBe(true);
    expect(task.result.structuredContent).toMatchObject({ status: 'failed', error: { code: 'jammed' } });
  });
});

describe('task mode is decided per message of a batch', () => {
  // Over HTTP the SDK refuses a batch holding a 2026-07-28 request, so this is the rule of
  // taskModeFor itself: a call that declares MCP Tasks does not lend them to the one beside it.
  it('gives a task answer to the call that declares MCP Tasks only, not to the one beside it', () => {
    const message = (id: number, meta: Record<string, unknown>) => ({
      jsonrpc: '2.0',
      id,
      method: 'tools/call',
      params: { name: setBrightness, arguments: { level: 40 }, _meta: meta },
    });
    const mode = taskModeFor([message(1, declaringTasks({}, { 'dfc/waitSeconds': 0 })), message(2, { 'dfc/waitSeconds': 0 })], { ttlMs: 60_000 });
    expect(mode).toBeTypeOf('function');
    expect(mode!(1)).toBeTypeOf('function');
    expect(mode!(2)).toBeUndefined();
    expect(taskModeFor([message(2, { 'dfc/waitSeconds': 0 })], { ttlMs: 60_000 })).toBeUndefined();
  });
});

describe('a broadcast’s actions', () => {
  it('are each a task of the connection that broadcast: tasks/get follows one to its result', async () => {
    const res = await postMcp(server.url, agent.token, {
      method: 'tools/call',
      params: {
        name: 'broadcast',
        arguments: { deviceIds: [lampId], capability: 'set_brightness', arguments: { level: 12 }, idempotencyKey: 'broadcast-as-tasks' },
        _meta: declaringTasks(),
      },
    });
    const actionId = res.result.structuredContent.results[0].action.id as string;
    let task: any;
    await expect.poll(async () => (task = (await taskRequest(agent.token, 'tasks/get', { taskId: actionId })).result).status).toBe('completed');
    expect(task.result.structuredContent).toMatchObject({ id: actionId, broadcastId: res.result.structuredContent.id, result: { level: 12 } });
  });
});

describe('owner approval while the task is working', () => {
  it('stays working with a statusMessage naming the owner, then runs and completes once the owner approves', async () => {
    const waiter = await createAgent(api, owner, { name: 'tasks-approval', access: 'act', principal: 'agent:tasks-approval' });
    await grant(api, owner, waiter.principal, lampId, ['set_brightness'], undefined, 'owner');
    const res = await callAsTask(waiter.token, setBrightness, { level: 70 });
    const taskId = res.result.taskId as string;
    expect(res.result).toMatchObject({ resultType: 'task', status: 'working', pollIntervalMs: 5000 });
    expect(res.result.statusMessage).toContain("owner's approval");
    const approved = await api.post(`/v1/actions/${taskId}/approve`, { token: owner });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    let task: any;
    await expect.poll(async () => (task = (await taskRequest(waiter.token, 'tasks/get', { taskId })).result).status).toBe('completed');
    expect(task.result.structuredContent).toMatchObject({ status: 'succeeded', result: { level: 70 }, approval: { decision: 'approved' } });
  });

  it('is cancelled with the reason when the owner rejects it', async () => {
    const waiter = await createAgent(api, owner, { name: 'tasks-reject', access: 'act', principal: 'agent:tasks-reject' });
    await grant(api, owner, waiter.principal, lampId, ['set_brightness'], undefined, 'owner');
    const res = await callAsTask(waiter.token, setBrightness, { level: 5 });
    await api.post(`/v1/actions/${res.result.taskId}/reject`, { token: owner, body: { reason: 'not now' } });
    const task = (await taskRequest(waiter.token, 'tasks/get', { taskId: res.result.taskId })).result;
    expect(task).toMatchObject({ status: 'cancelled', statusMessage: 'The owner rejected it: "not now"' });
    expect(task.result).toBeUndefined();
  });
});

describe('a user confirmation is asked before the task exists', () => {
  let asker: { token: string; principal: string };
  const ELICITS = { elicitation: { form: {} } };
  const accepted = { confirm: { action: 'accept', content: { confirm: true } } };
  beforeAll(async () => {
    asker = await createAgent(api, owner, { name: 'tasks-confirm', access: 'act', principal: 'agent:tasks-confirm' });
    await grant(api, owner, asker.principal, lampId, ['set_power'], undefined, 'user');
  });

  /** Round one: the ask, as an input_required result of the call itself (never a task). */
  async function ask(args: Record<string, unknown>): Promise<string> {
    const first = await callAsTask(asker.token, setPower, args, {}, ELICITS);
    expect(first.result.resultType).toBe('input_required');
    expect(first.result.taskId).toBeUndefined();
    expect(Object.values(first.result.inputRequests as Record<string, any>)[0].method).toBe('elicitation/create');
    return first.result.requestState as string;
  }

  function answer(args: Record<string, unknown>, inputResponses: unknown, requestState: string) {
    return postMcp(server.url, asker.token, {
      method: 'tools/call',
      params: { name: setPower, arguments: args, inputResponses, requestState, _meta: declaringTasks(ELICITS) },
    });
  }

  it('creates the task on the accepted answer, and the task completes with the device result', async () => {
    const state = await ask({ on: true });
    const second = await answer({ on: true }, accepted, state);
    expect(second.result).toMatchObject({ resultType: 'task', status: 'working' });
    expect(second.result).not.toHaveProperty('requestState');
    const taskId = second.result.taskId as string;
    expect(await action(taskId)).toMatchObject({ approval: { mode: 'user', decision: 'approved', confirmedBy: 'client' } });
    await release(taskId);
    await expect.poll(async () => (await taskRequest(asker.token, 'tasks/get', { taskId })).result.status).toBe('completed');
  });

  it('creates nothing on a declined answer: a tool error, no task', async () => {
    const before = (await api.get('/v1/actions', { token: owner })).body.data.length;
    const state = await ask({ on: false });
    const second = await answer({ on: false }, { confirm: { action: 'decline' } }, state);
    expect(second.result.resultType).toBe('complete');
    expect(second.result.isError).toBe(true);
    expect(second.result.taskId).toBeUndefined();
    expect(second.result.structuredContent.error.code).toBe('confirmation_declined');
    expect((await api.get('/v1/actions', { token: owner })).body.data.length).toBe(before);
  });

  it('creates nothing for a tampered answer: another argument than the one asked about, or a flipped byte of the state', async () => {
    const before = (await api.get('/v1/actions', { token: owner })).body.data.length;
    const state = await ask({ on: true });
    const otherArgs = await answer({ on: false }, accepted, state);
    const flipped = await answer({ on: true }, accepted, `${state.slice(0, -2)}${state.at(-2) === 'A' ? 'B' : 'A'}${state.at(-1)}`);
    for (const res of [otherArgs, flipped]) {
      expect(res.result?.taskId).toBeUndefined();
      expect(res.result?.resultType).not.toBe('task');
    }
    expect((await api.get('/v1/actions', { token: owner })).body.data.length).toBe(before);
  });
});

describe('tasks/cancel is the withdrawal of the action', () => {
  it('cancels a queued action: an empty ack, the task cancelled, the device never asked', async () => {
    const quiet = await createAgent(api, owner, { name: 'tasks-cancel', access: 'act', principal: 'agent:tasks-cancel' });
    // A function of a device nobody runs: its action stays queued.
    const setup = await createSetupToken(api, owner);
    const idle = await attachSdkDevice({ url: server.url, setupToken: setup.token, name: 'Idle lamp', kind: 'device' });
    await api.post(`/v1/device/${idle.deviceId}/manifest`, { token: idle.token, body: lampManifest });
    await grant(api, owner, quiet.principal, idle.deviceId, ['set_power']);
    const name = toolName('set_power', idle.deviceId);
    const res = await callAsTask(quiet.token, name, { on: true }, { 'dfc/waitSeconds': 0 });
    const ack = await taskRequest(quiet.token, 'tasks/cancel', { taskId: res.result.taskId });
    expect(Object.keys(ack.result).filter((k) => k !== '_meta')).toEqual(['resultType']);
    expect(ack.result.resultType).toBe('complete');
    expect(await action(res.result.taskId)).toMatchObject({ status: 'cancelled', cancelReason: 'client_cancelled' });
    const task = (await taskRequest(quiet.token, 'tasks/get', { taskId: res.result.taskId })).result;
    expect(task.status).toBe('cancelled');
    expect(task.statusMessage).toContain('MCP client');
    // Cancelling a finished task is the same empty ack.
    expect((await taskRequest(quiet.token, 'tasks/cancel', { taskId: res.result.taskId })).result.resultType).toBe('complete');
  });

  it('recalls an action the device already has', async () => {
    const res = await callAsTask(agent.token, setPower, { on: true }, { 'dfc/waitSeconds': 0 });
    const taskId = res.result.taskId as string;
    await expect.poll(() => held.has(taskId)).toBe(true);
    await taskRequest(agent.token, 'tasks/cancel', { taskId });
    expect(await action(taskId)).toMatchObject({ status: 'received', cancelReason: 'client_cancelled', cancelRequestedAt: expect.any(Number) });
    const task = (await taskRequest(agent.token, 'tasks/get', { taskId })).result;
    expect(task).toMatchObject({ status: 'working', statusMessage: expect.stringContaining('asked to stop') });
    await release(taskId);
  });
});

describe('a task belongs to the agent connection that created it', () => {
  it('answers -32602 to another agent, to a sibling connection of the same principal, and for an unknown id alike', async () => {
    const res = await callAsTask(agent.token, setPower, { on: true }, { 'dfc/waitSeconds': 0 });
    const taskId = res.result.taskId as string;
    const stranger = await createAgent(api, owner, { name: 'stranger', access: 'act', principal: 'agent:stranger' });
    const sibling = await createAgent(api, owner, { name: 'sibling', access: 'act', principal: agent.principal });
    for (const token of [stranger.token, sibling.token]) {
      for (const method of ['tasks/get', 'tasks/cancel', 'tasks/update']) {
        const answer = await taskRequest(token, method, { taskId, ...(method === 'tasks/update' ? { inputResponses: {} } : {}) });
        expect(answer.error, method).toMatchObject({ code: -32602, message: 'Failed to retrieve task: Task not found' });
      }
    }
    const unknown = await taskRequest(agent.token, 'tasks/get', { taskId: '00000000-0000-4000-8000-000000000000' });
    expect(unknown.error).toMatchObject({ code: -32602, message: 'Failed to retrieve task: Task not found' });
    expect((await action(taskId)).status).not.toBe('cancelled');
    await release(taskId);
  });

  it('answers a sibling connection’s replay of the same idempotency key with the action’s plain result, never its task, and the sibling’s abort leaves it alone', async () => {
    const key = { 'dfc/waitSeconds': 0, 'dfc/idempotencyKey': 'shared-key-1' };
    const res = await callAsTask(agent.token, setPower, { on: true }, key);
    expect(res.result.resultType, JSON.stringify(res)).toBe('task');
    const taskId = res.result.taskId as string;
    const sibling = await createAgent(api, owner, { name: 'replaying sibling', access: 'act', principal: agent.principal });
    const replay = await callAsTask(sibling.token, setPower, { on: true }, key);
    expect(replay.result.resultType, JSON.stringify(replay)).not.toBe('task');
    expect(replay.result.taskId).toBeUndefined();
    expect(replay.result.structuredContent).toMatchObject({ id: taskId });

    const abort = new AbortController();
    const waiting = postMcp(
      server.url,
      sibling.token,
      { method: 'tools/call', params: { name: setPower, arguments: { on: true }, _meta: declaringTasks({}, { ...key, 'dfc/waitSeconds': 30 }) } },
      abort.signal,
    ).catch(() => undefined);
    await new Promise((resolve) => setTimeout(resolve, 300));
    abort.abort();
    await waiting;
    await new Promise((resolve) => setTimeout(resolve, 500));
    const after = await action(taskId);
    expect(after.status).not.toBe('cancelled');
    expect(after.cancelRequestedAt ?? null).toBeNull();
    await release(taskId);
    await expect.poll(async () => (await action(taskId)).status).toBe('succeeded');
  });

  it('refuses an Mcp-Name that is not the task id with -32020', async () => {
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tasks/get',
      name: 'another-task',
      params: {
        taskId: '00000000-0000-4000-8000-000000000000',
        _meta: { 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
      },
    });
    expect(res.status).toBe(400);
    expect(res.json.error.code).toBe(-32020);
  });
});

describe('a client that does not declare MCP Tasks', () => {
  it('gets -32021 naming the extension for tasks/get, tasks/update and tasks/cancel', async () => {
    for (const method of ['tasks/get', 'tasks/update', 'tasks/cancel']) {
      const res = await postMcp(server.url, agent.token, {
        method,
        params: { taskId: 'gate-test', ...(method === 'tasks/update' ? { inputResponses: {} } : {}), _meta: envelope() },
      });
      expect(res.error, method).toMatchObject({ code: -32021, data: { requiredCapabilities: { extensions: { 'io.modelcontextprotocol/tasks': {} } } } });
    }
  });

  it('keeps the synchronous answer exactly: an unfinished action comes back as it stands, never a task', async () => {
    const res = await postMcp(server.url, agent.token, {
      method: 'tools/call',
      params: { name: setPower, arguments: { on: true }, _meta: envelope({ 'dfc/waitSeconds': 0 }) },
    });
    expect(res.result.resultType).toBe('complete');
    expect(res.result.taskId).toBeUndefined();
    expect(res.result.structuredContent.status).toMatch(/queued|received/);
    await release(res.result.structuredContent.id);
  });

  it('answers a 2025-era call synchronously even when its _meta names the extension', async () => {
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: 9,
      method: 'tools/call',
      params: {
        name: setPower,
        arguments: { on: true },
        _meta: { 'dfc/waitSeconds': 0, 'io.modelcontextprotocol/clientCapabilities': { extensions: { 'io.modelcontextprotocol/tasks': {} } } },
      },
    });
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/call',
      headers: { 'mcp-protocol-version': '2025-06-18', 'mcp-method': undefined, 'mcp-name': undefined },
      body,
    });
    expect(res.json.result.taskId).toBeUndefined();
    expect(res.json.result.structuredContent.status).toMatch(/queued|received/);
    await release(res.json.result.structuredContent.id);
  });

  it('answers tasks/update on its own task with an empty ack: no task of this server waits for input', async () => {
    const res = await callAsTask(agent.token, setPower, { on: true }, { 'dfc/waitSeconds': 0 });
    const ack = await taskRequest(agent.token, 'tasks/update', { taskId: res.result.taskId, inputResponses: { 'unknown-key': { action: 'accept' } } });
    expect(ack.result.resultType).toBe('complete');
    await release(res.result.taskId);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/client';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { next, report, requestAction } from '../helpers/actions.js';
import { connect, type Era } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { taskSession } from '../helpers/tasks-client.js';

// The fixed tool schedule_action (docs/agents/actions.md "Scheduling"): a model schedules with
// plain tool arguments, sees the scheduled Action, lists and cancels it, in both eras.

const WEDNESDAY_NOON = Date.UTC(2026, 11, 2, 12, 0);
const clock = manualClock(WEDNESDAY_NOON);
const server = useTestServer({ clock });
const api = server.api;
let owner: string;

beforeAll(async () => {
  owner = await server.ownerToken('mcp-schedule-owner');
});

async function world(): Promise<{ lamp: AttachedDevice; agent: Agent }> {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  const res = await api.post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'] } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { lamp, agent };
}

describe.each<Era>(['modern', 'legacy'])('schedule_action (%s era)', (era) => {
  const clients: Client[] = [];
  afterAll(async () => {
    for (const client of clients) await client.close();
  });
  const open = async (agent: Agent) => {
    const client = await connect(server.url, agent.token, era);
    clients.push(client);
    return client;
  };

  it('is listed with notBefore among its plain arguments', async () => {
    const { agent } = await world();
    const tool = (await (await open(agent)).listTools()).tools.find((t) => t.name === 'schedule_action');
    expect(tool?.inputSchema.required).toEqual(expect.arrayContaining(['deviceId', 'capability', 'arguments', 'notBefore']));
  });

  it('answers the scheduled Action, which get_action shows and cancel_action cancels', async () => {
    const { lamp, agent } = await world();
    const client = await open(agent);
    const due = WEDNESDAY_NOON + 3_600_000;
    const result = await client.callTool({
      name: 'schedule_action',
      arguments: { deviceId: lamp.id, capability: 'set_brightness', arguments: { level: 30 }, notBefore: due, ttlSeconds: 60 },
    });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    const scheduled = result.structuredContent as { id: string; status: string; notBefore: number; expiresAt: number };
    expect(scheduled).toMatchObject({ status: 'scheduled', notBefore: due, expiresAt: due + 60_000 });
    const read = await client.callTool({ name: 'get_action', arguments: { actionId: scheduled.id } });
    expect(read.structuredContent).toMatchObject({ id: scheduled.id, status: 'scheduled' });
    const cancelled = await client.callTool({ name: 'cancel_action', arguments: { actionId: scheduled.id } });
    expect(cancelled.structuredContent).toMatchObject({ id: scheduled.id, status: 'cancelled', cancelReason: 'agent' });
  });

  it('lists what it scheduled with list_actions status scheduled, and only its own', async () => {
    const { lamp, agent } = await world();
    const client = await open(agent);
    const due = WEDNESDAY_NOON + 3_600_000;
    const ids: string[] = [];
    for (const level of [10, 20]) {
      const result = await client.callTool({
        name: 'schedule_action',
        arguments: { deviceId: lamp.id, capability: 'set_brightness', arguments: { level }, notBefore: due },
      });
      ids.push((result.structuredContent as { id: string }).id);
    }
    // One queued now is not among the scheduled ones.
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 5 } })).status).toBe(201);
    // Another agent of the workspace schedules too: its action is not in this agent's list.
    const other = await createAgent(api, owner);
    await api.post('/v1/grants', { token: owner, body: { principal: other.principal, deviceId: lamp.id, capabilities: ['set_brightness'] } });
    const theirs = await (
      await open(other)
    ).callTool({ name: 'schedule_action', arguments: { deviceId: lamp.id, capability: 'set_brightness', arguments: { level: 40 }, notBefore: due } });
    expect(theirs.isError, JSON.stringify(theirs)).toBeFalsy();

    const listed = await client.callTool({ name: 'list_actions', arguments: { status: 'scheduled' } });
    expect(listed.isError, JSON.stringify(listed)).toBeFalsy();
    const actions = (listed.structuredContent as { actions: { id: string; status: string; notBefore: number }[] }).actions;
    expect(actions.map((a) => a.id).sort()).toEqual([...ids].sort());
    expect(actions.every((a) => a.status === 'scheduled' && a.notBefore === due)).toBe(true);
    await client.callTool({ name: 'cancel_action', arguments: { actionId: ids[0] } });
    const after = await client.callTool({ name: 'list_actions', arguments: { status: 'scheduled' } });
    expect((after.structuredContent as { actions: { id: string }[] }).actions.map((a) => a.id)).toEqual([ids[1]]);
  });

  it('refuses a time more than 7 days ahead as a tool error at notBefore', async () => {
    const { lamp, agent } = await world();
    const result = await (
      await open(agent)
    ).callTool({
      name: 'schedule_action',
      arguments: { deviceId: lamp.id, capability: 'set_brightness', arguments: { level: 30 }, notBefore: WEDNESDAY_NOON + 8 * 24 * 3_600_000 },
    });
    expect(result.isError).toBe(true);
    expect(JSON.stringify(result.content)).toContain('notBefore');
  });
});

describe('schedule_action as a task (2026-07-28, MCP Tasks)', () => {
  it('answers a task that stays working while scheduled and queued, and completes with the result once the action ends', async () => {
    const { lamp, agent } = await world();
    const { client, session } = await taskSession(server.url, agent.token);
    try {
      const due = WEDNESDAY_NOON + 60_000;
      const execution = await session.callTool('schedule_action', {
        deviceId: lamp.id,
        capability: 'set_brightness',
        arguments: JSON.stringify({ level: 70 }),
        notBefore: due,
        ttlSeconds: 60,
      });
      expect(execution.kind).toBe('task');
      const taskId = execution.handle!.taskId as string;
      const task = session.task(execution.handle!.taskId);
      const scheduled = await task.snapshot();
      expect(scheduled).toMatchObject({ taskId, status: 'working' });
      expect(scheduled.statusMessage).toMatch(/^Scheduled for /);
      expect((await api.get(`/v1/actions/${taskId}`, { token: agent.token })).body.data).toMatchObject({ status: 'scheduled', notBefore: due });

      clock.set(due);
      try {
        await expect.poll(async () => (await task.snapshot()).statusMessage).toMatch(/^Queued/);
        expect((await task.snapshot()).status).toBe('working');
        const handed = await next(api, lamp);
        expect(handed.body.data).toMatchObject({ id: taskId });
        expect((await task.snapshot()).status).toBe('working');
        await report(api, lamp, { actionId: taskId, ok: true, result: { level: 70 } });
        await expect.poll(async () => (await task.snapshot()).status).toBe('completed');
      } finally {
        clock.set(WEDNESDAY_NOON);
      }
    } finally {
      await session.close();
      await client.close();
    }
  });
});

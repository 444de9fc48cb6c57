import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/client';
import { next, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { declaringTasks, postMcp } from '../helpers/tasks-client.js';

// One rule, everywhere (docs/owners/grants.md "Conditions"): the same request under the same
// grant conditions is refused with the same code and the same `details` by every surface that
// creates an action (a single action, each device of a broadcast on REST and over MCP, a device
// tool in both eras, a task-augmented call), and an action the conditions no longer allow is
// never handed out by `next` nor lifted by an approval.

// A Wednesday, 12:00 UTC (13:00 in Berlin).
const WEDNESDAY_NOON = Date.UTC(2026, 11, 2, 12, 0);
const clock = manualClock(WEDNESDAY_NOON);
const server = useTestServer({ clock });
const api = server.api;
let owner: string;
const clients: Client[] = [];

beforeAll(async () => {
  owner = await server.ownerToken('surfaces-owner');
});

afterAll(async () => {
  for (const client of clients) await client.close();
});

interface Case {
  what: string;
  conditions: Record<string, unknown>;
  /** The request every surface makes. */
  args: Record<string, unknown>;
  code: string;
  status: number;
  details: Record<string, unknown>;
  /** Actions to create first (a budget to spend). */
  spend?: number;
}

const cases: Case[] = [
  {
    what: 'an argument outside its bounds',
    conditions: { arguments: { level: { minimum: 10, maximum: 60 } } },
    args: { level: 80 },
    code: 'arguments_not_allowed',
    status: 403,
    details: { allowed: { level: { minimum: 10, maximum: 60 } } },
  },
  {
    what: 'a request outside the schedule',
    conditions: { schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon'], from: '07:00', to: '09:00' }] } },
    args: { level: 20 },
    code: 'outside_schedule',
    status: 403,
    // Monday 07:00 in Berlin is 06:00 UTC.
    details: { nextWindowAt: Date.UTC(2026, 11, 7, 6, 0), timeZone: 'Europe/Berlin' },
  },
  {
    what: 'a request past the budget',
    conditions: { budget: { max: 1, perSeconds: 3600 } },
    args: { level: 20 },
    code: 'grant_budget_exhausted',
    status: 429,
    details: { max: 1, perSeconds: 3600, used: 1, retryAt: WEDNESDAY_NOON + 3_600_000 },
    spend: 1,
  },
];

async function world(conditions: unknown, approval = 'none'): Promise<{ lamp: AttachedDevice; agent: Agent; grantId: string }> {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  const res = await api.post('/v1/grants', {
    token: owner,
    body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'], approval, conditions },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { lamp, agent, grantId: res.body.data[0].id };
}

async function actionsOf(lamp: AttachedDevice): Promise<{ id: string; status: string; cancelReason?: string }[]> {
  const exported = await api.get('/v1/actions/export', { token: owner });
  return (exported.body.data.actions as { deviceId: string; id: string; status: string; cancelReason?: string }[]).filter((a) => a.deviceId === lamp.id);
}

const firstText = (result: { content?: unknown }) => (result.content as { type: string; text: string }[])[0]!.text;

describe.each(cases)('$what', ({ conditions, args, code, status, details, spend }) => {
  it('is refused with the same code and details by every surface that creates an action', async () => {
    const { lamp, agent } = await world(conditions);
    for (let i = 0; i < (spend ?? 0); i++) {
      expect((await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 20 } })).status).toBe(201);
    }
    const tool = toolName('set_brightness', lamp);
    const seen: Record<string, { code: string; details: unknown }> = {};

    const single = await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: args });
    expect(single.status, JSON.stringify(single.body)).toBe(status);
    seen['REST action'] = single.body.error;

    const broadcast = await api.post('/v1/broadcasts', {
      token: agent.token,
      body: { deviceIds: [lamp.id], capability: 'set_brightness', arguments: args, idempotencyKey: crypto.randomUUID() },
    });
    expect(broadcast.status, JSON.stringify(broadcast.body)).toBe(200);
    expect(broadcast.body.data.results[0].ok).toBe(false);
    seen['REST broadcast'] = broadcast.body.data.results[0].error;

    for (const era of ['modern', 'legacy'] as const) {
      const client = await connect(server.url, agent.token, era);
      clients.push(client);
      const result = await client.callTool({ name: tool, arguments: args });
      expect(result.isError, JSON.stringify(result)).toBe(true);
      // The first text is what a model reads: the code and what the grant allows.
      expect(firstText(result)).toContain(code);
      seen[`MCP device tool (${era})`] = errorEnvelope(result).error as never;
      const fanned: any = await client.callTool({
        name: 'broadcast',
        arguments: { deviceIds: [lamp.id], capability: 'set_brightness', arguments: JSON.stringify(args), idempotencyKey: crypto.randomUUID() },
      });
      expect(fanned.isError, JSON.stringify(fanned)).toBeFalsy();
      expect(fanned.structuredContent.results[0].ok).toBe(false);
      seen[`MCP broadcast (${era})`] = fanned.structuredContent.results[0].error;
    }

    const task = await postMcp(server.url, agent.token, { method: 'tools/call', params: { name: tool, arguments: args, _meta: declaringTasks() } });
    expect(task.result.isError, JSON.stringify(task)).toBe(true);
    seen['MCP task-augmented call'] = errorEnvelope(task.result).error as never;

    const wanted = Object.fromEntries(Object.keys(seen).map((surface) => [surface, { code, details }]));
    const got = Object.fromEntries(Object.entries(seen).map(([surface, error]) => [surface, { code: error.code, details: error.details }]));
    expect(got).toEqual(wanted);
    // Nothing was created beyond the budget spent.
    expect(await actionsOf(lamp)).toHaveLength(spend ?? 0);
  });
});

describe.each(cases.filter((c) => c.code !== 'grant_budget_exhausted'))('$what, set while actions wait and are queued', ({ conditions, args }) => {
  it('is never handed out by next nor lifted by an approval: both end cancelled with the reason', async () => {
    const reason = 'schedule' in conditions ? 'outside_schedule' : 'conditions_changed';
    const queuedWorld = await world(null);
    const queued = await requestAction(api, queuedWorld.agent.token, queuedWorld.lamp.id, { capability: 'set_brightness', arguments: args });
    expect(queued.body.data?.status, JSON.stringify(queued.body)).toBe('queued');
    const waitingWorld = await world(null, 'owner');
    const waiting = await requestAction(api, waitingWorld.agent.token, waitingWorld.lamp.id, { capability: 'set_brightness', arguments: args });
    expect(waiting.body.data?.status, JSON.stringify(waiting.body)).toBe('awaiting_approval');

    for (const { grantId } of [queuedWorld, waitingWorld]) {
      const tightened = await api.post(`/v1/grants/${grantId}/update`, { token: owner, body: { conditions } });
      expect(tightened.status, JSON.stringify(tightened.body)).toBe(200);
    }

    const fetched = await next(api, queuedWorld.lamp);
    expect(fetched.body.data, JSON.stringify(fetched.body)).toBeNull();
    expect(await actionsOf(queuedWorld.lamp)).toMatchObject([{ id: queued.body.data.id, status: 'cancelled', cancelReason: reason }]);

    const approved = await api.post(`/v1/actions/${waiting.body.data.id}/approve`, { token: owner, body: {} });
    expect(approved.status, JSON.stringify(approved.body)).toBe(409);
    expect(approved.body.error.action).toMatchObject({ status: 'cancelled', cancelReason: reason });
  });
});

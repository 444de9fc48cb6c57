import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Client } from '@modelcontextprotocol/client';
import { requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, toolName, type Era } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { declaringTasks, postMcp } from '../helpers/tasks-client.js';

// Grant conditions on the MCP surface (docs/owners/grants.md "Conditions"): the device tool's
// inputSchema is narrowed by the grant's argument bounds and its description states the schedule
// and budget; a refusal is a tool error whose first text says what is allowed, with the same code
// REST answers, in both eras and for a task-augmented call.

// A Wednesday, 12:00 UTC.
const WEDNESDAY_NOON = Date.UTC(2026, 11, 2, 12, 0);
const clock = manualClock(WEDNESDAY_NOON);
const server = useTestServer({ clock });
const api = server.api;
let owner: string;

async function world(conditions: unknown): Promise<{ lamp: AttachedDevice; agent: Agent; tool: string }> {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  const res = await api.post('/v1/grants', {
    token: owner,
    body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'], conditions },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return { lamp, agent, tool: toolName('set_brightness', lamp) };
}

const firstText = (result: { content?: unknown }) => (result.content as { type: string; text: string }[])[0]!.text;

beforeAll(async () => {
  owner = await server.ownerToken('mcp-conditions-owner');
});

describe.each<Era>(['modern', 'legacy'])('device tools under grant conditions (%s era)', (era) => {
  const clients: Client[] = [];
  afterAll(async () => {
    for (const client of clients) await client.close();
  });
  const open = async (agent: Agent) => {
    const client = await connect(server.url, agent.token, era);
    clients.push(client);
    return client;
  };

  it('lists the inputSchema narrowed by the bounds, and states the schedule and budget in the description', async () => {
    const { agent, tool } = await world({
      arguments: { level: { minimum: 10, maximum: 60 } },
      schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '07:00', to: '22:00' }] },
      budget: { max: 10, perSeconds: 3600 },
    });
    const client = await open(agent);
    const listed = (await client.listTools()).tools.find((t) => t.name === tool)!;
    expect(listed.inputSchema.properties!.level).toEqual({ type: 'integer', minimum: 10, maximum: 60 });
    expect(listed.description).toContain('Allowed only Mon–Fri 07:00–22:00 Europe/Berlin, at most 10 calls per hour.');
  });

  it('shows a grant update in the next tools/list', async () => {
    const { agent, tool } = await world({ arguments: { level: { maximum: 60 } } });
    const client = await open(agent);
    expect((await client.listTools()).tools.find((t) => t.name === tool)!.inputSchema.properties!.level).toMatchObject({ maximum: 60 });
    const grants = await api.get(`/v1/grants?principal=${encodeURIComponent(agent.principal)}`, { token: owner });
    const changed = await api.post(`/v1/grants/${grants.body.data[0].id}/update`, {
      token: owner,
      body: { conditions: { arguments: { level: { maximum: 30 } } } },
    });
    expect(changed.status).toBe(200);
    expect((await client.listTools()).tools.find((t) => t.name === tool)!.inputSchema.properties!.level).toMatchObject({ maximum: 30 });
  });

  it('refuses arguments outside the bounds as a tool error saying what is allowed, with the code REST answers', async () => {
    const { lamp, agent, tool } = await world({ arguments: { level: { minimum: 10, maximum: 60 } } });
    const client = await open(agent);
    const result = await client.callTool({ name: tool, arguments: { level: 80 } });
    expect(result.isError).toBe(true);
    expect(firstText(result)).toContain('allowed: level 10 to 60');
    expect(errorEnvelope(result).error.code).toBe('arguments_not_allowed');
    const rest = await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 80 } });
    expect(rest.body.error.code).toBe('arguments_not_allowed');
  });

  it('refuses outside the schedule saying when the next window opens, and stays listed', async () => {
    const { agent, tool } = await world({ schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon'], from: '07:00', to: '09:00' }] } });
    const client = await open(agent);
    expect((await client.listTools()).tools.map((t) => t.name)).toContain(tool);
    const result = await client.callTool({ name: tool, arguments: { level: 20 } });
    expect(result.isError).toBe(true);
    expect(firstText(result)).toContain('next window opens Mon 07:00 Europe/Berlin');
    expect(errorEnvelope(result).error.code).toBe('outside_schedule');
  });

  it('refuses past the budget saying how much is used and when the next call is allowed', async () => {
    const { lamp, agent, tool } = await world({ budget: { max: 1, perSeconds: 3600 } });
    const client = await open(agent);
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 20 } })).status).toBe(201);
    const result = await client.callTool({ name: tool, arguments: { level: 20 } });
    expect(result.isError).toBe(true);
    expect(firstText(result)).toContain('1 of 1 used per hour; next at 13:00 UTC');
    expect(errorEnvelope(result).error.code).toBe('grant_budget_exhausted');
  });
});

describe('a task-augmented device tool call under grant conditions', () => {
  it('is refused with the same code, as a tool error', async () => {
    const { agent, tool } = await world({ arguments: { level: { maximum: 60 } } });
    const res = await postMcp(server.url, agent.token, { method: 'tools/call', params: { name: tool, arguments: { level: 80 }, _meta: declaringTasks() } });
    expect(res.result.isError, JSON.stringify(res)).toBe(true);
    expect(firstText(res.result)).toContain('allowed: level at most 60');
    expect(errorEnvelope(res.result).error.code).toBe('arguments_not_allowed');
  });
});

describe('a device tool whose grant asks the user to confirm each call', () => {
  it('refuses arguments outside the bounds before the user is asked', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    const given = await api.post('/v1/grants', {
      token: owner,
      body: {
        principal: agent.principal,
        deviceId: lamp.id,
        capabilities: ['set_brightness'],
        approval: 'user',
        conditions: { arguments: { level: { maximum: 60 } } },
      },
    });
    expect(given.status).toBe(201);
    // A modern client that declares nothing: a call put to the user would be answered input_required.
    const res = await postMcp(server.url, agent.token, {
      method: 'tools/call',
      params: { name: toolName('set_brightness', lamp), arguments: { level: 80 }, _meta: declaringTasks({ elicitation: { form: {} } }) },
    });
    expect(res.result.resultType, JSON.stringify(res)).not.toBe('input_required');
    expect(res.result.isError).toBe(true);
    expect(errorEnvelope(res.result).error.code).toBe('arguments_not_allowed');
    const exported = await api.get('/v1/actions/export', { token: owner });
    expect((exported.body.data.actions as { deviceId: string }[]).filter((a) => a.deviceId === lamp.id)).toHaveLength(0);
  });
});

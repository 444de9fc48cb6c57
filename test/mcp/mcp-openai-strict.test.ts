import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentsCore, type AgentsFunctionTool, type AgentsMcpServer } from '../helpers/openai-agents.js';
import { connect } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { grantedWorld, type GrantedWorld } from '../helpers/world.js';

// OpenAI Agents with `convertSchemasToStrict`: every tool the service lists must convert to a
// strict function tool (closed objects, every property required), or the adapter falls back to
// a non-strict one with a warning and the model's calls are not held to the schema.

const server = useTestServer();
let world: GrantedWorld;
let mcp: AgentsMcpServer;
let tools: AgentsFunctionTool[];
let runContext: unknown;

beforeAll(async () => {
  world = await grantedWorld(server, 'owner-openai-strict', { capabilities: ['set_brightness', 'get_state'] });
  const core = await agentsCore();
  mcp = new core.MCPServerStreamableHttp({
    url: `${server.url}/mcp`,
    name: 'dfc',
    requestInit: { headers: { Authorization: `Bearer ${world.agent.token}` } },
  });
  await mcp.connect();
  tools = await core.getAllMcpTools({ mcpServers: [mcp], convertSchemasToStrict: true });
  runContext = new core.RunContext();
});

afterAll(async () => {
  await mcp?.close();
});

/** The tool's answer as the model would be given it, as JSON: its last text (an error's envelope follows its readable line). */
async function callStrict(name: string, input: Record<string, unknown>): Promise<any> {
  const tool = tools.find((t) => t.name === name);
  if (!tool) throw new Error(`no tool ${name} among ${tools.map((t) => t.name).join(', ')}`);
  const answer = (await tool.invoke(runContext, JSON.stringify(input))) as { type: string; text: string } | { type: string; text: string }[];
  const last = Array.isArray(answer) ? answer[answer.length - 1]! : answer;
  return JSON.parse(last.text);
}

describe('OpenAI Agents in strict mode', () => {
  it('converts every tool the agent lists, broadcast among them, to a strict function tool', () => {
    expect(tools.map((t) => t.name)).toContain('broadcast');
    expect(tools.filter((t) => !t.strict).map((t) => t.name)).toEqual([]);
    const broadcast = tools.find((t) => t.name === 'broadcast')!;
    expect(broadcast.parameters).toMatchObject({ additionalProperties: false, properties: { arguments: { type: 'string' } } });
  });

  it('broadcasts with the arguments as JSON text, the optional fields sent as null taking their defaults', async () => {
    const answer = await callStrict('broadcast', {
      deviceIds: [world.device.id],
      capability: 'set_brightness',
      arguments: '{"level": 12}',
      idempotencyKey: crypto.randomUUID(),
      ttlSeconds: null,
      approvalTtlSeconds: null,
    });
    expect(answer.results).toHaveLength(1);
    expect(answer.results[0]).toMatchObject({
      deviceId: world.device.id,
      ok: true,
      action: { capability: 'set_brightness', arguments: { level: 12 }, status: 'queued' },
    });
    const { action } = answer.results[0];
    expect(action.expiresAt - action.createdAt).toBe(30_000);
    const stored = await server.api.get(`/v1/actions/${action.id}`, { token: world.agent.token });
    expect(stored.body.data.arguments).toEqual({ level: 12 });
  });

  it('refuses JSON text that is not an object with validation_failed at arguments, queueing nothing', async () => {
    const actions = async () => (await server.api.get(`/v1/actions?deviceId=${world.device.id}`, { token: world.owner })).body.data.length as number;
    const before = await actions();
    for (const text of ['[12]', '12', 'level: 12', '']) {
      const answer = await callStrict('broadcast', {
        deviceIds: [world.device.id],
        capability: 'set_brightness',
        arguments: text,
        idempotencyKey: crypto.randomUUID(),
        ttlSeconds: null,
        approvalTtlSeconds: null,
      });
      expect(answer.error.code, text).toBe('validation_failed');
      expect(
        answer.error.issues.map((i: { path: string }) => i.path),
        text,
      ).toContain('arguments');
    }
    expect(await actions()).toBe(before);
  });
});

describe('a client that is not strict', () => {
  it('still broadcasts with the arguments as an object, as REST does, and with JSON text as well', async () => {
    const client = await connect(server.url, world.agent.token, 'modern');
    for (const args of [{ level: 20 }, '{"level": 21}']) {
      const result: any = await client.callTool({
        name: 'broadcast',
        arguments: { deviceIds: [world.device.id], capability: 'set_brightness', arguments: args, idempotencyKey: crypto.randomUUID() },
      });
      expect(result.isError, JSON.stringify(result)).toBeFalsy();
      expect(result.structuredContent.results[0].action.arguments).toEqual(typeof args === 'string' ? JSON.parse(args) : args);
    }
    await client.close();
  });

  it('takes both forms on REST, with one idempotency key meaning the same request in either form', async () => {
    const key = crypto.randomUUID();
    const body = { deviceIds: [world.device.id], capability: 'set_brightness', idempotencyKey: key };
    const asObject = await server.api.post('/v1/broadcasts', { token: world.agent.token, body: { ...body, arguments: { level: 30 } } });
    expect(asObject.status, JSON.stringify(asObject.body)).toBe(200);
    const asText = await server.api.post('/v1/broadcasts', { token: world.agent.token, body: { ...body, arguments: '{"level":30}' } });
    expect(asText.body.data.id).toBe(asObject.body.data.id);
  });
});

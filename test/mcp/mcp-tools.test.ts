import type { Client as McpClient } from '@modelcontextprotocol/client';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ActionChange } from '../../src/domain/event-hub.js';
import { grant, hubManifest, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, rawMcp, simulateDevice, toolName, type Era } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

let owner: string;
let lamp: AttachedDevice;
let bulbId: string;
let cloudId: string;
/** act ceiling; lamp get_state + set_power, bulb set_power, cloud cloud_info. */
let alice: { token: string; principal: string; id: string };
/** read ceiling; lamp get_state + set_power (the control one is above its ceiling). */
let bob: { token: string; principal: string; id: string };

// ajv-formats is CommonJS: its default export arrives wrapped under ESM.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

const hex12 = (id: string) => id.replaceAll('-', '').slice(0, 12);

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-mcp');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
  const devices = (await api.get('/v1/devices', { token: owner })).body.data as { id: string; name: string }[];
  bulbId = devices.find((d) => d.name === 'Bulb')!.id;
  cloudId = devices.find((d) => d.name === 'Cloud')!.id;
  alice = await createAgent(api, owner, { name: 'alice', access: 'act', principal: 'agent:alice' });
  bob = await createAgent(api, owner, { name: 'bob', access: 'read', principal: 'agent:bob' });
  await grant(api, owner, alice.principal, lamp.id, ['get_state', 'set_power']);
  await grant(api, owner, alice.principal, bulbId, ['set_power']);
  await grant(api, owner, alice.principal, cloudId, ['cloud_info']);
  await grant(api, owner, bob.principal, lamp.id, ['get_state', 'set_power']);
});

const FIXED = ['list_devices', 'get_device_state', 'list_functions', 'schedule_action', 'get_action', 'list_actions', 'cancel_action', 'broadcast'];

describe.each<Era>(['modern', 'legacy'])('tools/list per principal (%s client)', (era) => {
  let a: McpClient;
  let b: McpClient;
  beforeAll(async () => {
    a = await connect(server.url, alice.token, era);
    b = await connect(server.url, bob.token, era);
  });
  afterAll(async () => {
    await a.close();
    await b.close();
  });

  it('negotiates the era asked for', () => {
    expect(a.getProtocolEra()).toBe(era);
  });

  it('shows each agent exactly its callable functions, named <capability>__<12 hex>, plus the fixed tools', async () => {
    const names = (await a.listTools()).tools.map((t) => t.name);
    // Device tools follow GET /v1/functions order (device, then manifest order).
    const functions = (await api.get('/v1/functions', { token: alice.token })).body.data as { deviceId: string; capability: string }[];
    expect(names).toEqual([...FIXED, ...functions.map((f) => `${f.capability}__${hex12(f.deviceId)}`)]);
    expect(new Set(names.slice(FIXED.length))).toEqual(
      new Set([toolName('get_state', lamp.id), toolName('set_power', lamp.id), toolName('set_power', bulbId), toolName('cloud_info', cloudId)]),
    );
    // Bob's ceiling is read: set_power is granted but not callable, so not listed.
    expect((await b.listTools()).tools.map((t) => t.name)).toEqual([...FIXED, toolName('get_state', lamp.id)]);
  });

  it('says in each device tool what a plain call and a call that declares MCP Tasks each get', async () => {
    const tool = (await a.listTools()).tools.find((t) => t.name === toolName('set_power', lamp.id))!;
    // A plain call: up to 10 s, then the Action as it stands, followed with get_action; a task-capable client: a task after 1 s.
    expect(tool.description).toContain(
      'Returns the Action after up to 10 s (follow an unfinished one with get_action), or with MCP Tasks a task after 1 s that the client follows to the end.',
    );
    expect(tool.description).not.toContain('(waits up to 10 s; follow an unfinished one with get_action)');
  });

  it('describes the device and its place, advertises the manifest schema unchanged and the hints', async () => {
    const tools = (await a.listTools()).tools;
    const byName = new Map(tools.map((t) => [t.name, t]));
    const read = byName.get(toolName('get_state', lamp.id))!;
    expect(read.description).toContain('device "Lamp"');
    expect(read.description).toContain('Power and brightness.');
    expect(read.annotations).toMatchObject({ readOnlyHint: true });
    const bulb = byName.get(toolName('set_power', bulbId))!;
    expect(bulb.description).toContain('device "Bulb" behind gateway "Hub"');
    expect(bulb.annotations).toMatchObject({ readOnlyHint: false, destructiveHint: true });
    expect(bulb.inputSchema).toEqual(hubManifest.children[0]!.capabilities[1]!.arguments);
    expect(byName.get(toolName('cloud_info', cloudId))!.description).toContain('integration-wide service "Cloud" of gateway "Hub"');
    for (const tool of tools) expect(tool.name).toMatch(/^[A-Za-z0-9_-]{1,64}$/);
  });

  it('gives device tools no outputSchema; get_action advertises the Action they return, and their results conform to it', async () => {
    const tools = (await a.listTools()).tools;
    for (const tool of tools.filter((t) => t.name.includes('__'))) expect(tool.outputSchema).toBeUndefined();
    const actionSchema = tools.find((t) => t.name === 'get_action')!.outputSchema!;
    expect(Object.keys(actionSchema.properties ?? {})).toEqual(expect.arrayContaining(['id', 'status', 'deviceId', 'capability', 'result']));
    const device = simulateDevice(api, lamp, () => ({ ok: true, result: { on: true } }));
    try {
      const result = await a.callTool({ name: toolName('get_state', lamp.id), arguments: {} });
      const ajv = new Ajv({ strict: false });
      addFormats(ajv);
      const valid = ajv.validate(actionSchema, result.structuredContent);
      expect(valid, JSON.stringify(ajv.errors)).toBe(true);
    } finally {
      await device.stop();
    }
  });

  it('lists the same tools in the same order every time', async () => {
    const first = (await a.listTools()).tools.map((t) => t.name);
    const second = (await a.listTools()).tools.map((t) => t.name);
    expect(second).toEqual(first);
  });
});

describe('tools/list wire details', () => {
  it('is cacheScope private with ttlMs 0 on the modern wire', async () => {
    const res = await rawMcp(server.url, { token: alice.token, method: 'tools/list' });
    expect(res.status).toBe(200);
    expect(res.json.result).toMatchObject({ cacheScope: 'private', ttlMs: 0 });
  });
});

describe.each<Era>(['modern', 'legacy'])('list_functions and list_devices page (%s client)', (era) => {
  const lists = [
    { tool: 'list_functions', key: 'functions', rest: '/v1/functions' },
    { tool: 'list_devices', key: 'devices', rest: '/v1/devices' },
  ];

  it('advertise cursor and limit, and nextCursor in their output', async () => {
    const mcp = await connect(server.url, alice.token, era);
    try {
      const tools = new Map((await mcp.listTools()).tools.map((t) => [t.name, t]));
      for (const { tool } of lists) {
        const { inputSchema, outputSchema } = tools.get(tool)!;
        expect(Object.keys(inputSchema.properties ?? {})).toEqual(['limit', 'cursor']);
        expect(outputSchema!.properties).toHaveProperty('nextCursor');
        expect(outputSchema!.required).toEqual([tool === 'list_functions' ? 'functions' : 'devices']);
      }
    } finally {
      await mcp.close();
    }
  });

  it.each(lists)('$tool answers every item across pages, with nextCursor while more follow, as REST lists them', async ({ tool, key, rest }) => {
    const mcp = await connect(server.url, alice.token, era);
    try {
      const outputSchema = (await mcp.listTools()).tools.find((t) => t.name === tool)!.outputSchema!;
      const ajv = new Ajv({ strict: false });
      addFormats(ajv);
      const expected = (await api.get(rest, { token: alice.token })).body.data as unknown[];
      expect(expected.length).toBeGreaterThan(1);

      // Without a limit: everything in one answer (at most 1,000), and no cursor.
      const whole = await mcp.callTool({ name: tool, arguments: {} });
      expect(whole.structuredContent).toEqual({ [key]: expected });
      expect(whole.content).toHaveLength(1);

      const seen: unknown[] = [];
      let cursor: string | undefined;
      for (let pages = 1; ; pages++) {
        const result = await mcp.callTool({ name: tool, arguments: { limit: 1, ...(cursor ? { cursor } : {}) } });
        expect(result.isError ?? false).toBe(false);
        expect(ajv.validate(outputSchema, result.structuredContent), JSON.stringify(ajv.errors)).toBe(true);
        const page = result.structuredContent as Record<string, unknown>;
        seen.push(...(page[key] as unknown[]));
        cursor = page.nextCursor as string | undefined;
        const texts = (result.content as { text: string }[]).map((c) => c.text);
        if (cursor === undefined) {
          expect(texts).toHaveLength(1);
          expect(pages).toBe(expected.length);
          break;
        }
        // The agent is told in words too, with the cursor to pass back.
        expect(texts[1]).toBe(`More ${key} follow: call ${tool} again with { "cursor": ${JSON.stringify(cursor)} } for the next page.`);
      }
      expect(seen).toEqual(expected);
    } finally {
      await mcp.close();
    }
  });

  it('refuses a cursor it did not issue, or one of the other list, with the same issues as REST', async () => {
    const mcp = await connect(server.url, alice.token, era);
    try {
      const first = await mcp.callTool({ name: 'list_devices', arguments: { limit: 1 } });
      const devicesCursor = (first.structuredContent as { nextCursor: string }).nextCursor;
      for (const cursor of ['nope', devicesCursor]) {
        const result = await mcp.callTool({ name: 'list_functions', arguments: { cursor } });
        expect(result.isError).toBe(true);
        const restAnswer = await api.get(`/v1/functions?cursor=${encodeURIComponent(cursor)}`, { token: alice.token });
        expect(restAnswer.status).toBe(400);
        const { requestId: _a, ...viaMcp } = errorEnvelope(result).error;
        const { requestId: _b, ...viaRest } = restAnswer.body.error;
        expect(viaMcp).toEqual(viaRest);
        expect(viaMcp.issues).toEqual([{ path: 'cursor', message: cursor === 'nope' ? 'not a cursor this service issued' : 'a cursor of another list' }]);
      }
    } finally {
      await mcp.close();
    }
  });
});

describe.each<Era>(['modern', 'legacy'])('device tool calls (%s client)', (era) => {
  it('queues the action, streams progress, and returns the Action the simulated device completed', async () => {
    const device = simulateDevice(api, lamp, ({ args }) => ({ ok: true, result: { on: args.on } }), { delayMs: 150 });
    const mcp = await connect(server.url, alice.token, era);
    try {
      const progress: { progress: number; total?: number; message?: string }[] = [];
      const result = await mcp.callTool({ name: toolName('set_power', lamp.id), arguments: { on: true } }, { onprogress: (p) => progress.push(p) });
      expect(result.isError ?? false).toBe(false);
      const action = result.structuredContent as Record<string, any>;
      expect(action).toMatchObject({ deviceId: lamp.id, capability: 'set_power', status: 'succeeded', result: { on: true }, principal: alice.principal });
      expect((result.content as { type: string; text: string }[])[0]!.text).toContain('succeeded');
      expect(progress.map((p) => p.message)).toEqual(['queued', 'received', 'succeeded']);
      // Stage 1 of 4 is awaiting_approval (docs/reference/rules.md "Approvals"): a call that needs no yes starts at 2.
      expect(progress.map((p) => [p.progress, p.total])).toEqual([
        [2, 4],
        [3, 4],
        [4, 4],
      ]);
      expect(device.handled.map((h) => h.args)).toEqual([{ on: true }]);
      // The same action through REST: one service, one record.
      const rest = await api.get(`/v1/actions/${action.id}`, { token: alice.token });
      expect(rest.body.data).toEqual(action);
    } finally {
      await mcp.close();
      await device.stop();
    }
  });

  it('reports a device failure as isError with the Action', async () => {
    const device = simulateDevice(api, lamp, () => ({ ok: false, error: { code: 'jammed', message: 'relay stuck' } }));
    const mcp = await connect(server.url, alice.token, era);
    try {
      const result = await mcp.callTool({ name: toolName('set_power', lamp.id), arguments: { on: false } });
      expect(result.isError).toBe(true);
      expect(result.structuredContent).toMatchObject({ status: 'failed', error: { code: 'jammed', message: 'relay stuck' } });
    } finally {
      await mcp.close();
      await device.stop();
    }
  });

  it('returns the still-queued action when the wait ends first (dfc/waitSeconds), for get_action to follow', async () => {
    const mcp = await connect(server.url, alice.token, era);
    try {
      const result = await mcp.callTool({ name: toolName('get_state', lamp.id), arguments: {}, _meta: { 'dfc/waitSeconds': 0.2 } });
      expect(result.isError ?? false).toBe(false);
      const action = result.structuredContent as Record<string, any>;
      expect(action.status).toBe('queued');
      expect((result.content as { text: string }[])[0]!.text).toContain('get_action');
      const followed = await mcp.callTool({ name: 'get_action', arguments: { actionId: action.id } });
      expect(followed.structuredContent).toMatchObject({ id: action.id, status: 'queued' });
      const cancelled = await mcp.callTool({ name: 'cancel_action', arguments: { actionId: action.id } });
      expect(cancelled.structuredContent).toMatchObject({ id: action.id, status: 'cancelled' });
    } finally {
      await mcp.close();
    }
  });

  it('answers argument errors with the same issues as REST, as a tool error', async () => {
    const mcp = await connect(server.url, alice.token, era);
    try {
      const result = await mcp.callTool({ name: toolName('set_power', lamp.id), arguments: { on: 'yes' } });
      expect(result.isError).toBe(true);
      const rest = await api.post(`/v1/devices/${lamp.id}/actions`, { token: alice.token, body: { capability: 'set_power', arguments: { on: 'yes' } } });
      expect(rest.status).toBe(400);
      const { requestId: _a, ...mcpError } = (result.structuredContent as any).error;
      const { requestId: _b, ...restError } = rest.body.error;
      expect(mcpError).toEqual(restError);
    } finally {
      await mcp.close();
    }
  });
});

describe("a device tool call's wait never moves an action back", () => {
  it('ignores a queued change that arrives after it has seen received, and goes on to the result', async () => {
    const device = await attachDevice(api, owner, { name: 'Late lamp' });
    await grant(api, owner, alice.principal, device.id, ['set_power']);
    const changes: ActionChange[] = [];
    const unsubscribe = server.service.events.subscribe((event) => {
      if (event.type === 'action' && event.action.deviceId === device.id) changes.push(event);
    });
    const mcp = await connect(server.url, alice.token, 'modern');
    try {
      const progress: string[] = [];
      const call = mcp.callTool({ name: toolName('set_power', device.id), arguments: { on: true } }, { onprogress: (p) => progress.push(p.message ?? '') });
      await expect.poll(() => changes.length).toBe(1);
      const queued = changes[0]!;
      expect(queued.action.status).toBe('queued');
      expect((await next(api, device)).body.data).toMatchObject({ id: queued.action.id, status: 'received' });
      await expect.poll(() => progress).toEqual(['queued', 'received']);
      // The queued change once more, now stale: the wait has already seen received.
      server.service.events.publish(queued);
      expect((await report(api, device, { actionId: queued.action.id, ok: true, result: { on: true } })).status).toBe(200);
      const result = await call;
      expect(result.structuredContent).toMatchObject({ id: queued.action.id, status: 'succeeded', result: { on: true } });
      expect(progress).toEqual(['queued', 'received', 'succeeded']);
    } finally {
      unsubscribe();
      await mcp.close();
    }
  });
});

describe('a dropped client withdraws its action (docs/reference/rules.md "MCP")', () => {
  it('cancels the queued action with client_cancelled, so the device is handed nothing', async () => {
    const changes: ActionChange[] = [];
    const unsubscribe = server.service.events.subscribe((event) => {
      if (event.type === 'action' && event.action.deviceId === lamp.id) changes.push(event);
    });
    try {
      const mcp = await connect(server.url, alice.token, 'modern');
      const abort = new AbortController();
      const progress: string[] = [];
      const call = mcp.callTool(
        { name: toolName('get_state', lamp.id), arguments: {} },
        { signal: abort.signal, onprogress: (p) => progress.push(p.message ?? '') },
      );
      await expect.poll(() => progress.length).toBeGreaterThan(0);
      abort.abort();
      await expect(call).rejects.toThrow();
      await mcp.close();
      await expect
        .poll(() => changes.find((change) => change.action.status === 'cancelled')?.action)
        .toMatchObject({ capability: 'get_state', cancelReason: 'client_cancelled' });
      expect((await next(api, lamp)).body.data).toBeNull();
    } finally {
      unsubscribe();
    }
  });
});

describe('live checks at call time', () => {
  it('answers 403 with the error envelope when the grant is revoked between tools/list and tools/call', async () => {
    const carol = await createAgent(api, owner, { name: 'carol', access: 'act', principal: 'agent:carol' });
    await grant(api, owner, carol.principal, lamp.id, ['set_power']);
    const name = toolName('set_power', lamp.id);
    for (const era of ['modern', 'legacy'] as const) {
      const mcp = await connect(server.url, carol.token, era);
      expect((await mcp.listTools()).tools.map((t) => t.name)).toContain(name);
      await mcp.close();
    }
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: carol.principal, deviceId: lamp.id, capability: 'set_power' } });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);

    const raw = await rawMcp(server.url, { token: carol.token, method: 'tools/call', name, params: { name, arguments: { on: true } } });
    expect(raw.status).toBe(403);
    expect(raw.json).toMatchObject({ error: { code: 'grant_required' } });
    expect(raw.headers.get('www-authenticate')).toBeNull();

    for (const era of ['modern', 'legacy'] as const) {
      const mcp = await connect(server.url, carol.token, era);
      await expect(mcp.callTool({ name, arguments: { on: true } })).rejects.toMatchObject({ data: { status: 403 } });
      await mcp.close();
    }
    // Nothing was queued.
    const history = await api.get('/v1/actions', { token: owner });
    expect((history.body.data as { principal: string }[]).filter((a) => a.principal === carol.principal)).toEqual([]);
  });

  it('answers 403 insufficient_scope (scope act) for a control function over a read ceiling', async () => {
    const name = toolName('set_power', lamp.id);
    const raw = await rawMcp(server.url, { token: bob.token, method: 'tools/call', name, params: { name, arguments: { on: true } } });
    expect(raw.status).toBe(403);
    expect(raw.json).toMatchObject({ error: { code: 'insufficient_access' } });
    expect(raw.headers.get('www-authenticate')).toContain('error="insufficient_scope"');
    expect(raw.headers.get('www-authenticate')).toContain('scope="act"');
    const mcp = await connect(server.url, bob.token, 'modern');
    try {
      await expect(mcp.callTool({ name, arguments: { on: true } })).rejects.toMatchObject({ requiredScope: 'act' });
    } finally {
      await mcp.close();
    }
  });

  it('answers an unknown, non-device tool name in-band (-32602), as MCP expects', async () => {
    const raw = await rawMcp(server.url, { token: alice.token, method: 'tools/call', name: 'nope', params: { name: 'nope', arguments: {} } });
    expect(raw.status).toBe(200);
    expect(raw.json.error.code).toBe(-32602);
  });
});

describe('authentication', () => {
  it('answers 401 with the envelope and resource_metadata without a token, and with an unknown one', async () => {
    for (const token of [undefined, 'dfc_agent_unknown']) {
      const res = await rawMcp(server.url, { ...(token ? { token } : {}), method: 'tools/list' });
      expect(res.status).toBe(401);
      expect(res.json).toMatchObject({ error: { code: 'unauthorized' } });
      // PUBLIC_BASE_URL unset: the challenge names the loopback address the request came to.
      expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${server.url}/.well-known/oauth-protected-resource/mcp"`);
    }
  });

  it('answers 403 to a valid credential of another kind', async () => {
    const res = await rawMcp(server.url, { token: owner, method: 'tools/list' });
    expect(res.status).toBe(403);
    expect(res.json).toMatchObject({ error: { code: 'forbidden' } });
  });

  it('makes a revoked agent token fail on the very next request', async () => {
    const dave = await createAgent(api, owner, { name: 'dave', access: 'read' });
    const mcp = await connect(server.url, dave.token, 'modern');
    await mcp.listTools();
    await api.post(`/v1/agent-connections/${dave.id}/revoke`, { token: owner });
    await expect(mcp.listTools()).rejects.toMatchObject({ data: { status: 401 } });
    await mcp.close();
  });

  it('serves the protected-resource metadata at both paths, unwrapped', async () => {
    // PUBLIC_BASE_URL unset: the metadata names the loopback address the request came to.
    const base = server.url;
    for (const path of ['/.well-known/oauth-protected-resource', '/.well-known/oauth-protected-resource/mcp']) {
      const res = await api.get(path);
      expect(res.status).toBe(200);
      expect(res.body).toEqual({
        resource: `${base}/mcp`,
        authorization_servers: [base],
        scopes_supported: ['read', 'act'],
        bearer_methods_supported: ['header'],
      });
    }
  });
});

import { fc, test } from '@fast-check/vitest';
import { Ajv2020 } from 'ajv/dist/2020.js';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CallableFunction } from '../../src/domain/functions.js';
import { DEVICE_TOOL_PATTERN, deviceIdPrefixOf, deviceToolNames } from '../../src/mcp/device-tool-names.js';
import { client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, rawMcp, toolName, type RawResponse } from '../helpers/mcp-client.js';
import { startTestServer, useTestServer } from '../helpers/server.js';

/**
 * The MCP edge agrees with itself and with the clients people use
 * (docs/reference/rules.md "MCP").
 */
let owner: string;

const SDK_ONLY = { 'example.com/trace': 'to-the-sdk' };
const LLM_TOOL_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const noArgs = { type: 'object', properties: {}, additionalProperties: false };
const METRICS_TOKEN = 'metrics-secret-for-edge-tests';

/** How many tools/call messages the direct path has answered, from GET /metrics. */
async function answeredDirectly(): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  return Number(text.match(/^dfc_mcp_messages_total\{method="tools\/call",answered_by="direct"\} (\d+)$/m)?.[1] ?? 0);
}

const server = useTestServer({ env: { METRICS_TOKEN } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-edge');
});

// ---------------------------------------------------------------------------------------

const capabilityArb = fc.stringMatching(/^[a-z][a-z0-9_.-]{0,63}$/);
const functionsArb = fc
  .array(fc.record({ device: fc.integer({ min: 0, max: 3 }), capability: capabilityArb }), { minLength: 1, maxLength: 12 })
  .chain((specs) => fc.tuple(fc.constant(specs), fc.array(fc.uuid({ version: 4 }), { minLength: 4, maxLength: 4 })));

function fnOf(deviceId: string, capability: string): CallableFunction {
  return { deviceId, deviceName: 'd', deviceKind: 'device', parentId: null, parentName: null, capability, kind: 'control', arguments: noArgs };
}

describe('MCP device tool names', () => {
  test.prop([functionsArb], { numRuns: 300 })(
    'are in the LLM APIs’ alphabet, unique per caller, the same from one device’s functions as from all, and hold the capability where it fits',
    ([specs, ids]) => {
      const seen = new Set<string>();
      const functions = specs
        .filter((s) => !seen.has(`${s.device}/${s.capability}`) && seen.add(`${s.device}/${s.capability}`))
        .map((s) => fnOf(ids[s.device]!, s.capability));
      const named = deviceToolNames(functions);
      const names = named.map((t) => t.name);
      for (const name of names) {
        expect(name).toMatch(LLM_TOOL_NAME);
        expect(name).toMatch(DEVICE_TOOL_PATTERN);
      }
      expect(new Set(names).size).toBe(names.length);
      // Stable: computed again, or from the functions a tools/call loads (the devices the name points at), it is the same.
      expect(deviceToolNames(functions).map((t) => t.name)).toEqual(names);
      for (const { name, fn } of named) {
        const prefix = deviceIdPrefixOf(name);
        const onThose = deviceToolNames(functions.filter((f) => f.deviceId.startsWith(prefix)));
        expect(onThose.find((t) => t.fn === fn)!.name).toBe(name);
        expect(name.length).toBeLessThanOrEqual(40);
        const stem = fn.capability.replaceAll('.', '_');
        if (stem.length <= 26) expect(name.startsWith(stem)).toBe(true);
      }
    },
  );

  it('maps a dotted capability into the alphabet beside its dotless twin, and both can be listed and called with the SDK client', async () => {
    const device = await attachDevice(api, owner, {
      name: 'Scenes',
      manifest: { capabilities: ['scene.recall', 'scene_recall'].map((name) => ({ name, kind: 'read', arguments: noArgs })) },
    });
    const agent = await createAgent(api, owner, { name: 'scenes', access: 'act', principal: 'agent:scenes' });
    await grant(api, owner, agent.principal, device.id, ['scene.recall', 'scene_recall']);
    const hex = device.id.replaceAll('-', '').slice(0, 12);
    for (let round = 0; round < 2; round++) {
      const mcp = await connect(server.url, agent.token, round === 0 ? 'modern' : 'legacy');
      try {
        const names = (await mcp.listTools()).tools.map((t) => t.name).filter((n) => n.includes('__'));
        expect(names).toEqual([expect.stringMatching(new RegExp(`^scene_recall_[0-9a-f]{8}__${hex}$`)), `scene_recall__${hex}`]);
        const called = [];
        for (const name of names)
          called.push(((await mcp.callTool({ name, arguments: {}, _meta: { 'dfc/waitSeconds': 0 } })).structuredContent as any).capability);
        expect(called).toEqual(['scene.recall', 'scene_recall']);
      } finally {
        await mcp.close();
      }
    }
  });
});

// ---------------------------------------------------------------------------------------

describe('Mcp-Param-* headers (2026-07-28): the direct path answers exactly as the SDK', () => {
  let thermostat: AttachedDevice;
  let agent: { token: string };
  let name: string;
  const schema = {
    type: 'object',
    properties: {
      room: { type: 'string', 'x-mcp-header': 'Room' },
      level: { type: 'integer', 'x-mcp-header': 'Level' },
      note: { type: 'string' },
    },
    additionalProperties: false,
  };

  beforeAll(async () => {
    thermostat = await attachDevice(api, owner, {
      name: 'Thermostat',
      manifest: { capabilities: [{ name: 'set_level', kind: 'control', arguments: schema }] },
    });
    const created = await createAgent(api, owner, { name: 'headers', access: 'act', principal: 'agent:headers' });
    agent = created;
    await grant(api, owner, created.principal, thermostat.id, ['set_level']);
    name = toolName('set_level', thermostat.id);
  });

  const b64 = (text: string) => `=?base64?${Buffer.from(text).toString('base64')}?=`;
  const table: [string, Record<string, unknown>, Record<string, string>, 'runs' | 'refused'][] = [
    ['both headers agree', { room: 'hall', level: 3 }, { 'mcp-param-room': 'hall', 'mcp-param-level': '3' }, 'runs'],
    ['a header is missing', { room: 'hall', level: 3 }, { 'mcp-param-room': 'hall' }, 'refused'],
    ['a header contradicts the body', { room: 'hall', level: 3 }, { 'mcp-param-room': 'kitchen', 'mcp-param-level': '3' }, 'refused'],
    ['an integer header written 3.0', { level: 3 }, { 'mcp-param-level': '3.0' }, 'runs'],
    ['an integer header that is not a number', { level: 3 }, { 'mcp-param-level': 'three' }, 'refused'],
    ['a Base64 header that decodes to the body', { room: 'hall ü' }, { 'mcp-param-room': b64('hall ü') }, 'runs'],
    ['a broken Base64 header', { room: 'hall' }, { 'mcp-param-room': '=?base64?!!!?=' }, 'refused'],
    ['no header for an argument the body leaves out', { note: 'x' }, {}, 'runs'],
    ['a header for an argument the body leaves out', { note: 'x' }, { 'mcp-param-room': 'hall' }, 'runs'],
    ['header names in another case', { room: 'hall' }, { 'MCP-PARAM-ROOM': 'hall' }, 'runs'],
  ];

  /** The answer with what differs between two actions (id, timestamps, request id) replaced. */
  function normalised(res: RawResponse): unknown {
    let text = res.text;
    const action = res.json?.result?.structuredContent as Record<string, unknown> | undefined;
    // Numbers become 0, which stays valid both as a JSON number and inside the text content.
    for (const key of ['id', 'createdAt', 'expiresAt'])
      if (action?.[key] !== undefined) text = text.replaceAll(String(action[key]), key === 'id' ? '<id>' : '0');
    return { status: res.status, body: JSON.parse(text) };
  }

  for (const [what, args, headers, expected] of table) {
    it(`${expected === 'runs' ? 'runs' : 'refuses with 400 -32020'} a call when ${what}, on both paths`, async () => {
      const call = (meta: Record<string, unknown>) =>
        rawMcp(server.url, {
          token: agent.token,
          method: 'tools/call',
          name,
          headers,
          params: { name, arguments: args, _meta: { 'dfc/waitSeconds': 0, ...meta } },
        });
      const before = await answeredDirectly();
      const direct = await call({});
      // Only a call whose headers agree is the direct path's; the SDK refuses the others.
      expect(await answeredDirectly()).toBe(before + (expected === 'runs' ? 1 : 0));
      const sdk = await call(SDK_ONLY);
      if (expected === 'runs') expect(direct.json.result.structuredContent, direct.text).toMatchObject({ status: 'queued' });
      else expect(direct.json, direct.text).toMatchObject({ error: { code: -32020 } });
      expect(direct.status).toBe(expected === 'runs' ? 200 : 400);
      expect(normalised(direct)).toEqual(normalised(sdk));
    });
  }

  it('refuses at publish a schema whose x-mcp-header breaks the rules, with an issue pointing at it', async () => {
    const bad: [Record<string, unknown>, string][] = [
      [{ room: { type: 'string', 'x-mcp-header': 'Room Name' } }, 'properties.room.x-mcp-header'],
      [{ room: { type: 'string', 'x-mcp-header': '' } }, 'properties.room.x-mcp-header'],
      [{ ratio: { type: 'number', 'x-mcp-header': 'Ratio' } }, 'properties.ratio.x-mcp-header'],
      [{ tags: { type: 'array', items: { type: 'string', 'x-mcp-header': 'Tag' } } }, 'properties.tags.items.x-mcp-header'],
      [{ a: { type: 'string', 'x-mcp-header': 'Same' }, b: { type: 'string', 'x-mcp-header': 'same' } }, 'properties.b.x-mcp-header'],
    ];
    const device = await attachDevice(api, owner, { name: 'Publisher', manifest: { capabilities: [] } });
    for (const [properties, path] of bad) {
      const res = await api.post(`/v1/device/${device.id}/manifest`, {
        token: device.token,
        body: { capabilities: [{ name: 'f', kind: 'read', arguments: { type: 'object', properties } }] },
      });
      expect(res.status, JSON.stringify(properties)).toBe(400);
      expect(res.body.error.issues).toEqual([{ path: `capabilities.0.arguments.${path}`, message: expect.any(String) }]);
    }
    const good = await api.post(`/v1/device/${device.id}/manifest`, {
      token: device.token,
      body: { capabilities: [{ name: 'f', kind: 'read', arguments: schema }] },
    });
    expect(good.status).toBe(200);
  });
});

// ---------------------------------------------------------------------------------------

describe('fixed tools’ error results', () => {
  it('carry the error envelope as JSON text and no structuredContent, and every success matches the outputSchema', async () => {
    const lamp = await attachDevice(api, owner, { name: 'Lamp' });
    const agent = await createAgent(api, owner, { name: 'fixed-errors', access: 'act', principal: 'agent:fixed-errors' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const queued = await api.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'set_power', arguments: { on: true } } });
    await api.post(`/v1/actions/${queued.body.data.id}/cancel`, { token: agent.token });

    for (const era of ['modern', 'legacy'] as const) {
      const mcp = await connect(server.url, agent.token, era);
      try {
        const tools = new Map((await mcp.listTools()).tools.map((t) => [t.name, t]));
        const calls: [string, Record<string, unknown>, string][] = [
          ['get_action', { actionId: 'nope' }, 'validation_failed'],
          ['get_action', { actionId: crypto.randomUUID() }, 'not_found'],
          ['cancel_action', { actionId: queued.body.data.id }, 'conflict'],
          ['broadcast', { deviceIds: [lamp.id], capability: 'set_power', arguments: { on: 'yes' } }, 'validation_failed'],
          ['list_functions', { cursor: 'nope' }, 'validation_failed'],
        ];
        for (const [name, args, code] of calls) {
          expect(tools.get(name)?.outputSchema, name).toBeDefined();
          const result = await mcp.callTool({ name, arguments: args });
          expect(result.isError, name).toBe(true);
          expect(result.structuredContent, name).toBeUndefined();
          expect(errorEnvelope(result).error.code, name).toBe(code);
        }
        // What SDK 1.x, the Inspector and LangChain do with any structuredContent.
        const ajv = new Ajv2020({ strict: false });
        const ok = await mcp.callTool({ name: 'get_action', arguments: { actionId: queued.body.data.id } });
        expect(ajv.validate(tools.get('get_action')!.outputSchema!, ok.structuredContent), JSON.stringify(ajv.errors)).toBe(true);
      } finally {
        await mcp.close();
      }
    }
  });
});

// ---------------------------------------------------------------------------------------

describe('tools/list while the kill switch is on', () => {
  it('offers neither broadcast nor device tools after a restart with DEVICE_CONTROLS_ENABLED=false, even for a list answered from cache before', async () => {
    const before = await startTestServer();
    const beforeApi = client(before.url);
    const o = await before.ownerToken('owner-switch');
    const lamp = await attachDevice(beforeApi, o, { name: 'Lamp' });
    const agent = await createAgent(beforeApi, o, { name: 'switch', access: 'act', principal: 'agent:switch' });
    await grant(beforeApi, o, agent.principal, lamp.id, ['get_state', 'set_power']);
    const list = async (url: string) =>
      ((await rawMcp(url, { token: agent.token, method: 'tools/list' })).json.result.tools as { name: string }[]).map((t) => t.name);
    expect(await list(before.url)).toContain('broadcast');
    expect((await list(before.url)).filter((n) => n.includes('__'))).toHaveLength(2);
    await before.close();

    const after = await startTestServer({ dir: before.dir, env: { DEVICE_CONTROLS_ENABLED: 'false' } });
    try {
      for (let i = 0; i < 2; i++)
        expect(await list(after.url)).toEqual(['list_devices', 'get_device_state', 'list_functions', 'get_action', 'list_actions', 'cancel_action']);
    } finally {
      await after.close();
    }
  });
});

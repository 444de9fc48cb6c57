import { beforeAll, describe, expect, it } from 'vitest';
import { client, type Client as Api } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { initializeLegacy, startLegacyCall, type LegacyCallStart } from '../helpers/legacy-prompts.js';
import { errorEnvelope, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * Pending 2025-era user confirmations are bounded (docs/agents/confirmation.md "Limits"): each one
 * holds its call's event stream open while the user decides, so there are at most
 * MCP_CONFIRMATIONS_PER_CONNECTION per agent connection, MCP_CONFIRMATIONS_PER_WORKSPACE per workspace and MCP_CONFIRMATIONS_PER_INSTANCE in
 * the process, each for at most MCP_CONFIRMATION_WAIT_SECONDS; an answered, expired or
 * abandoned prompt gives its place back. Raw 2025-era HTTP (the official client answers each
 * ask at once and cannot leave one pending).
 */
let api: Api;
let owner: string;
let lamp: AttachedDevice;
let tool: string;

const PER_CONNECTION = 2;
const PER_INSTANCE = 3;

const server = useTestServer({
  env: {
    MCP_CONFIRMATIONS_PER_CONNECTION: String(PER_CONNECTION),
    MCP_CONFIRMATIONS_PER_INSTANCE: String(PER_INSTANCE),
    MCP_CONFIRMATION_WAIT_SECONDS: '2',
  },
});

beforeAll(async () => {
  api = client(server.url);
  owner = await server.ownerToken('owner-bounds');
  lamp = await attachDevice(api, owner, { name: 'Porch' });
  tool = toolName('set_power', lamp.id);
});

/** A fresh agent connection whose principal has `set_power` under a `user` grant, initialized as a 2025-era client that can elicit. */
async function connection(name: string): Promise<string> {
  const agent = await createAgent(api, owner, { name, principal: `agent:${name}` });
  await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'user');
  await initializeLegacy(server.url, agent.token);
  return agent.token;
}

type Ask = Extract<LegacyCallStart, { kind: 'ask' }>;

async function ask(token: string, id: number): Promise<Ask> {
  const call = await startLegacyCall(server.url, token, tool, { on: true }, id);
  expect(call.kind, JSON.stringify(call)).toBe('ask');
  return call as Ask;
}

async function actionCount(): Promise<number> {
  return ((await api.get('/v1/actions', { token: owner })).body.data as unknown[]).length;
}

/** The call past a bound: a tool error, capacity_exceeded, that says what to do. */
async function expectRefused(token: string, id: number, where: string): Promise<void> {
  const call = await startLegacyCall(server.url, token, tool, { on: true }, id);
  expect(call.kind, 'nothing is put to the user').toBe('result');
  const { result } = call as Extract<LegacyCallStart, { kind: 'result' }>;
  expect(result.isError).toBe(true);
  const { error } = errorEnvelope(result);
  expect(error.code).toBe('capacity_exceeded');
  expect(error.message).toContain(where);
  expect(error.message).toContain('Nothing was queued');
  expect(error.message).toContain('Wait until the user has answered or dismissed the open confirmations, then call again');
}

describe('pending 2025-era confirmations per agent connection', () => {
  it('refuses an ask past MCP_CONFIRMATIONS_PER_CONNECTION with a tool error that says to wait, and queues nothing', async () => {
    const token = await connection('per-connection');
    const before = await actionCount();
    const open = [await ask(token, 1), await ask(token, 2)];
    await expectRefused(token, 3, `this connection already has ${PER_CONNECTION} confirmations waiting`);
    expect(await actionCount()).toBe(before);
    for (const call of open) call.close();
  });

  it('gives the place back when a prompt is answered', async () => {
    const token = await connection('answered');
    const first = await ask(token, 1);
    const second = await ask(token, 2);
    expect(await first.answer({ action: 'decline' })).toBe(202);
    const result = await first.result();
    expect(errorEnvelope(result).error.code).toBe('confirmation_declined');
    const third = await ask(token, 3);
    for (const call of [second, third]) call.close();
  });

  it('gives the place back when the client drops the call', async () => {
    const token = await connection('dropped');
    const first = await ask(token, 1);
    const second = await ask(token, 2);
    first.close();
    // The place is free once the service has seen the stream end.
    let third: LegacyCallStart | undefined;
    for (let attempt = 0; attempt < 50 && third?.kind !== 'ask'; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      third = await startLegacyCall(server.url, token, tool, { on: true }, 10 + attempt);
    }
    expect(third?.kind).toBe('ask');
    for (const call of [second, third as Ask]) call.close();
  });

  it('ends a prompt nobody answers after MCP_CONFIRMATION_WAIT_SECONDS, unconfirmed, and gives its place back', async () => {
    const token = await connection('unanswered');
    const before = await actionCount();
    const first = await ask(token, 1);
    const second = await ask(token, 2);
    const [one, two] = await Promise.all([first.result(), second.result()]);
    for (const result of [one, two]) {
      expect(result.isError).toBe(true);
      expect(result.structuredContent?.id).toBeUndefined();
    }
    expect(await actionCount()).toBe(before);
    (await ask(token, 3)).close();
  });
});

describe('pending 2025-era confirmations per instance', () => {
  it('refuses an ask past MCP_CONFIRMATIONS_PER_INSTANCE, whichever connection asks', async () => {
    const a = await connection('instance-a');
    const b = await connection('instance-b');
    const c = await connection('instance-c');
    const open = [await ask(a, 1), await ask(a, 2), await ask(b, 1)];
    await expectRefused(c, 1, `this service instance already has ${PER_INSTANCE} confirmations waiting`);
    open[0]!.close();
    let next: LegacyCallStart | undefined;
    for (let attempt = 0; attempt < 50 && next?.kind !== 'ask'; attempt++) {
      await new Promise((resolve) => setTimeout(resolve, 20));
      next = await startLegacyCall(server.url, c, tool, { on: true }, 10 + attempt);
    }
    expect(next?.kind).toBe('ask');
    for (const call of [...open.slice(1), next as Ask]) call.close();
  });
});

describe('pending 2025-era confirmations per workspace', () => {
  let ownApi: Api;
  const PER_WORKSPACE = 2;

  const own = useTestServer({
    env: { MCP_CONFIRMATIONS_PER_CONNECTION: '5', MCP_CONFIRMATIONS_PER_WORKSPACE: String(PER_WORKSPACE), MCP_CONFIRMATIONS_PER_INSTANCE: '50' },
  });

  beforeAll(async () => {
    ownApi = client(own.url);
  });

  /** A workspace with a lamp, and a function to open 2025-era connections that may set its power under a `user` grant. */
  async function workspace(name: string) {
    const boss = await own.ownerToken(name);
    const device = await attachDevice(ownApi, boss, { name: `${name} lamp` });
    const deviceTool = toolName('set_power', device.id);
    return async (agentName: string) => {
      const agent = await createAgent(ownApi, boss, { name: agentName, principal: `agent:${agentName}` });
      await grant(ownApi, boss, agent.principal, device.id, ['set_power'], undefined, 'user');
      await initializeLegacy(own.url, agent.token);
      return { token: agent.token, tool: deviceTool };
    };
  }

  it("refuses an ask past MCP_CONFIRMATIONS_PER_WORKSPACE, and another workspace's agents still ask", async () => {
    const busy = await workspace('bounds-busy');
    const calm = await workspace('bounds-calm');
    const [a, b, c, d] = [await busy('busy-a'), await busy('busy-b'), await busy('busy-c'), await calm('calm-d')];
    const open: Ask[] = [];
    for (const [who, id] of [
      [a, 1],
      [b, 1],
    ] as const) {
      const call = await startLegacyCall(own.url, who.token, who.tool, { on: true }, id);
      expect(call.kind, JSON.stringify(call)).toBe('ask');
      open.push(call as Ask);
    }
    const refused = await startLegacyCall(own.url, c.token, c.tool, { on: true }, 1);
    expect(refused.kind, 'nothing is put to the user').toBe('result');
    const { error } = errorEnvelope((refused as Extract<LegacyCallStart, { kind: 'result' }>).result);
    expect(error.code).toBe('capacity_exceeded');
    expect(error.message).toContain(`this workspace's agents already have ${PER_WORKSPACE} confirmations waiting`);
    const other = await startLegacyCall(own.url, d.token, d.tool, { on: true }, 1);
    expect(other.kind, JSON.stringify(other)).toBe('ask');
    for (const call of [...open, other as Ask]) call.close();
  });
});

import { Client, StreamableHTTPClientTransport, type ElicitRequest, type ElicitResult } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { client, type Client as Api } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { errorEnvelope, MODERN, rawMcp, simulateDevice, toolName, type Era, type RawResponse, type SimulatedDevice } from '../helpers/mcp-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * User confirmation (docs/agents/confirmation.md "User confirmation", docs/reference/rules.md "Approvals"): a device tool
 * whose grant is in `user` mode asks the agent's own user (a form elicitation) and queues the
 * action only on a verified yes. The official MCP client in both eras (2026-07-28
 * `input_required` and the 2025 legacy shim's real `elicitation/create` over this server's
 * stateless HTTP), raw 2026-07-28 retries for what a hostile client can send, and a raw
 * polling device.
 */
const clock = manualClock();
let server: TestServer;
let api: Api;
let owner: string;
let lamp: AttachedDevice;
let device: SimulatedDevice;
let agent: { token: string; principal: string };
let other: { token: string; principal: string };
let setPower: string;
let getState: string;

const ELICITS = { 'io.modelcontextprotocol/clientCapabilities': { elicitation: {} } };

beforeAll(async () => {
  server = await startTestServer({ clock });
  api = client(server.url);
  owner = await server.ownerToken('owner-confirm');
  lamp = await attachDevice(api, owner, { name: 'Front door' });
  agent = await createAgent(api, owner, { name: 'confirm', principal: 'agent:confirm' });
  other = await createAgent(api, owner, { name: 'other', principal: 'agent:other' });
  setPower = toolName('set_power', lamp);
  getState = toolName('get_state', lamp);
  device = simulateDevice(api, lamp, ({ args }) => ({ ok: true, result: { on: args.on } }));
});
afterAll(async () => {
  await device.stop();
  await server.close();
});

beforeEach(async () => {
  for (const principal of [agent.principal, other.principal]) {
    await grant(api, owner, principal, lamp.id, ['set_power'], undefined, 'user');
    await grant(api, owner, principal, lamp.id, ['get_state']);
  }
});

async function actionIds(): Promise<string[]> {
  return ((await api.get('/v1/actions', { token: owner })).body.data as { id: string }[]).map((a) => a.id);
}

/** The official client in `era`, answering each elicitation with `answer` (none: it cannot elicit). */
async function connectAs(
  token: string,
  era: Era,
  answer?: (request: ElicitRequest) => ElicitResult,
): Promise<{ mcp: Client; asked: ElicitRequest['params'][] }> {
  const asked: ElicitRequest['params'][] = [];
  const mcp = new Client(
    { name: 'confirm-tests', version: '1.0.0' },
    { ...(era === 'modern' ? { versionNegotiation: { mode: { pin: MODERN } } } : {}), capabilities: answer ? { elicitation: { form: {} } } : {} },
  );
  if (answer) {
    mcp.setRequestHandler('elicitation/create', (request) => {
      asked.push(request.params);
      return answer(request);
    });
  }
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${token}` } } }));
  return { mcp, asked };
}

/** A raw 2026-07-28 tools/call of set_power as `token`, declaring elicitation, with extra params (a retry's answer and state). */
function rawCall(token: string, args: Record<string, unknown>, extra: Record<string, unknown> = {}, meta: Record<string, unknown> = {}): Promise<RawResponse> {
  return rawMcp(server.url, {
    token,
    method: 'tools/call',
    name: setPower,
    params: { name: setPower, arguments: args, ...extra, _meta: { ...ELICITS, ...meta } },
  });
}

/** The first round of a raw call: the `input_required` result's requestState. */
async function ask(token: string, args: Record<string, unknown>): Promise<string> {
  const res = await rawCall(token, args);
  expect(res.status, res.text).toBe(200);
  expect(res.json.result.resultType).toBe('input_required');
  return res.json.result.requestState as string;
}

const accepted = { confirm: { action: 'accept', content: { confirm: true } } };

describe.each(['modern', 'legacy'] as const)('a user-mode device tool over the official %s client', (era) => {
  it('says in its description that the user is asked to confirm', async () => {
    const { mcp } = await connectAs(agent.token, era, () => ({ action: 'accept', content: { confirm: true } }));
    const tools = (await mcp.listTools()).tools;
    expect(tools.find((t) => t.name === setPower)!.description).toContain('Your user is asked to confirm each call');
    expect(tools.find((t) => t.name === getState)!.description).not.toContain('confirm');
    await mcp.close();
  });

  it('asks the user with the function, the device and the arguments, and on a yes the device runs it', async () => {
    const { mcp, asked } = await connectAs(agent.token, era, () => ({ action: 'accept', content: { confirm: true } }));
    const result: any = await mcp.callTool({ name: setPower, arguments: { on: true } });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    expect(result.structuredContent).toMatchObject({ status: 'succeeded', capability: 'set_power', result: { on: true } });
    expect(device.handled.some((h) => h.id === result.structuredContent.id)).toBe(true);
    expect(asked).toHaveLength(1);
    expect(asked[0]!.message).toContain('"set_power"');
    expect(asked[0]!.message).toContain('Front door');
    expect(asked[0]!.message).toContain('{"on":true}');
    expect(asked[0]!.message).toContain('agent:confirm');
    await mcp.close();
  });

  it.each([
    ['declines', { action: 'decline' } as ElicitResult, 'declined'],
    ['cancels', { action: 'cancel' } as ElicitResult, 'cancelled'],
    ['accepts without confirming', { action: 'accept', content: { confirm: false } } as ElicitResult, 'declined'],
  ])('creates nothing when the user %s, and says so in a tool result', async (_what, answer, word) => {
    const before = await actionIds();
    const { mcp } = await connectAs(agent.token, era, () => answer);
    const result: any = await mcp.callTool({ name: setPower, arguments: { on: false } });
    expect(result.isError).toBe(true);
    const { error } = errorEnvelope(result);
    expect(error.code).toBe('confirmation_declined');
    expect(error.message).toContain(word);
    expect(await actionIds()).toEqual(before);
    await mcp.close();
  });

  it('does not ask about a call whose arguments do not match the function schema', async () => {
    const { mcp, asked } = await connectAs(agent.token, era, () => ({ action: 'accept', content: { confirm: true } }));
    const result: any = await mcp.callTool({ name: setPower, arguments: { on: 'yes' } });
    expect(result.isError).toBe(true);
    expect(errorEnvelope(result).error.code).toBe('validation_failed');
    expect(asked).toEqual([]);
    await mcp.close();
  });

  it(
    era === 'modern'
      ? 'answers -32021 naming elicitation when the request declared none, and creates nothing'
      : 'refuses with confirmation_required when the client cannot elicit, and creates nothing',
    async () => {
      const before = await actionIds();
      const { mcp } = await connectAs(agent.token, era);
      if (era === 'modern') {
        // SEP-2575: a server must not rely on a capability the request did not declare.
        const refused = await mcp.callTool({ name: setPower, arguments: { on: true } }).then(
          () => undefined,
          (error: unknown) => error as { code?: number; message?: string; data?: { requiredCapabilities?: Record<string, unknown> } },
        );
        expect(refused?.code).toBe(-32021);
        expect(refused?.data?.requiredCapabilities).toHaveProperty('elicitation');
        // The service's explanation, not the SDK's generic text: what was needed, that nothing was queued, what to do.
        expect(refused?.message).toContain(`Each call of ${setPower} needs its user's confirmation`);
        expect(refused?.message).toContain('Nothing was queued');
        expect(refused?.message).toContain("change the grant's approval mode");
        expect(refused?.message).not.toContain('Cannot request input');
        const raw = await rawMcp(server.url, { token: agent.token, method: 'tools/call', name: setPower, params: { name: setPower, arguments: { on: true } } });
        expect(raw.status, raw.text).toBe(400);
        expect(raw.json.error.code).toBe(-32021);
        expect(raw.json.error.data.requiredCapabilities).toHaveProperty('elicitation');
        expect(raw.json.error.message).toContain('declare no elicitation');
      } else {
        const result: any = await mcp.callTool({ name: setPower, arguments: { on: true } });
        expect(result.isError).toBe(true);
        const { error } = errorEnvelope(result);
        expect(error.code).toBe('confirmation_required');
        expect(error.message).toContain("change the grant's approval mode");
      }
      expect(await actionIds()).toEqual(before);
      // A function under a `none` grant is not asked about.
      const read: any = await mcp.callTool({ name: getState, arguments: {} });
      expect(read.isError, JSON.stringify(read)).toBeFalsy();
      await mcp.close();
    },
  );
});

describe('the confirmation requestState (2026-07-28 retries)', () => {
  it('is refused when tampered with: a flipped byte, another principal, other arguments, or expired', async () => {
    const before = await actionIds();
    const state = await ask(agent.token, { on: true });

    const flipped = state.slice(0, 10) + (state[10] === 'A' ? 'B' : 'A') + state.slice(11);
    const theirs = await ask(other.token, { on: true });
    const cases: [string, string, Record<string, unknown>, string][] = [
      ['flipped byte', flipped, { on: true }, 'signature'],
      ["another principal's state", theirs, { on: true }, 'another agent'],
      ['other arguments', state, { on: false }, 'other arguments'],
      ['not a state at all', 'c1.e30.AAAA', { on: true }, 'signature'],
    ];
    for (const [what, requestState, args, reason] of cases) {
      const res = await rawCall(agent.token, args, { inputResponses: accepted, requestState });
      expect(res.status, what).toBe(200);
      expect(res.json.result.isError, what).toBe(true);
      const { error } = errorEnvelope(res.json.result);
      expect(error.code, what).toBe('confirmation_invalid');
      expect(error.message, what).toContain(reason);
    }

    clock.advance(301_000);
    const expired = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state });
    expect(errorEnvelope(expired.json.result).error.code).toBe('confirmation_invalid');
    expect(errorEnvelope(expired.json.result).error.message).toContain('expired');
    expect(await actionIds()).toEqual(before);
  });

  it('queues nothing for an answer of the wrong shape: a string or number for confirm, no content, content not an object', async () => {
    const before = await actionIds();
    for (const answer of [
      { action: 'accept', content: { confirm: 'true' } },
      { action: 'accept', content: { confirm: 1 } },
      { action: 'accept' },
      { action: 'accept', content: [true] },
      { action: 'yes', content: { confirm: true } },
      'accept',
    ]) {
      const state = await ask(agent.token, { on: true });
      const res = await rawCall(agent.token, { on: true }, { inputResponses: { confirm: answer }, requestState: state });
      const what = JSON.stringify(answer);
      expect(res.status, what).toBeLessThan(500);
      expect(res.json.result?.structuredContent?.id, `${what}: ${res.text}`).toBeUndefined();
    }
    expect(await actionIds()).toEqual(before);
  });

  it('queues one action however often an accepted answer is replayed', async () => {
    const before = await actionIds();
    const state = await ask(agent.token, { on: true });
    const first = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state });
    const again = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state });
    expect(first.json.result.isError, first.text).toBeFalsy();
    expect(again.json.result.structuredContent.id).toBe(first.json.result.structuredContent.id);
    expect((await actionIds()).filter((id) => !before.includes(id))).toEqual([first.json.result.structuredContent.id]);
  });

  it('asks again when the retry carries the state but no answer', async () => {
    const state = await ask(agent.token, { on: true });
    const res = await rawCall(agent.token, { on: true }, { requestState: state });
    expect(res.json.result.resultType).toBe('input_required');
    expect(res.json.result.requestState).not.toBe(state);
  });

  it('queues the action when the grant became `none` between the ask and the answer', async () => {
    const state = await ask(agent.token, { on: true });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'none');
    const res = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state });
    expect(res.json.result.isError, res.text).toBeFalsy();
    expect(res.json.result.structuredContent).toMatchObject({ status: 'succeeded', capability: 'set_power' });
  });

  it('follows the grant when it became `owner` between the ask and the answer (the domain decides the owner rule)', async () => {
    const state = await ask(agent.token, { on: true });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'owner');
    const res = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state }, { 'dfc/waitSeconds': 0 });
    // The call is an ordinary one under an `owner` grant: the user's yes is not passed on, so
    // the owner's approval rule applies as to any other call.
    expect(res.json.result.structuredContent.capability, res.text).toBe('set_power');
  });

  it('is accepted after a restart on the same database: the key is the service’s, not the process’s', async () => {
    const state = await ask(agent.token, { on: true });
    const dir = server.dir;
    await device.stop();
    await server.close();
    server = await startTestServer({ clock, dir });
    api = client(server.url);
    owner = await server.ownerToken('owner-confirm');
    device = simulateDevice(api, lamp, ({ args }) => ({ ok: true, result: { on: args.on } }));
    const res = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state });
    expect(res.json.result.isError, res.text).toBeFalsy();
    expect(res.json.result.structuredContent).toMatchObject({ status: 'succeeded' });
  });
});

describe('the confirmation is performed by the client, and recorded so', () => {
  it.each(['modern', 'legacy'] as const)('says in the %s tool description that the client asks and the service cannot verify it', async (era) => {
    const { mcp } = await connectAs(agent.token, era, () => ({ action: 'accept', content: { confirm: true } }));
    const description = (await mcp.listTools()).tools.find((t) => t.name === setPower)!.description!;
    expect(description).toContain('your MCP client asks and answers');
    expect(description).toContain('this service cannot verify that a person did');
    await mcp.close();
  });

  it.each(['modern', 'legacy'] as const)('records a %s yes as confirmed by the client, in the tool result and on the stored action', async (era) => {
    const { mcp } = await connectAs(agent.token, era, () => ({ action: 'accept', content: { confirm: true } }));
    const result: any = await mcp.callTool({ name: setPower, arguments: { on: true } });
    await mcp.close();
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    const expected = { mode: 'user', decision: 'approved', decidedBy: agent.principal, confirmedBy: 'client', expiresAt: null };
    expect(result.structuredContent.approval).toMatchObject(expected);
    const stored = await api.get(`/v1/actions/${result.structuredContent.id}`, { token: owner });
    expect(stored.body.data.approval).toMatchObject(expected);
  });

  it("records the owner's yes to a user-mode call made over REST as confirmed by the owner", async () => {
    const waiting = await api.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'set_power', arguments: { on: true } } });
    expect(waiting.body.data.status, JSON.stringify(waiting.body)).toBe('awaiting_approval');
    expect(waiting.body.data.approval.confirmedBy).toBeNull();
    const approved = await api.post(`/v1/actions/${waiting.body.data.id}/approve`, { token: owner, body: {} });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    expect(approved.body.data.approval).toMatchObject({ mode: 'user', decision: 'approved', confirmedBy: 'owner' });
  });
});

describe.each(['modern', 'legacy'] as const)('a broadcast of a user-mode function over the official %s client', (era) => {
  it('queues nothing for a device whose grant asks the user, says so with confirmation_required, and leaves nothing for the owner to approve', async () => {
    const before = await actionIds();
    const { mcp, asked } = await connectAs(agent.token, era, () => ({ action: 'accept', content: { confirm: true } }));
    const result: any = await mcp.callTool({
      name: 'broadcast',
      arguments: { deviceIds: [lamp.id], capability: 'set_power', arguments: { on: true }, idempotencyKey: `user-broadcast-${era}` },
    });
    expect(result.isError, JSON.stringify(result)).toBeFalsy();
    const [only] = result.structuredContent.results;
    expect(only).toMatchObject({ deviceId: lamp.id, ok: false, error: { code: 'confirmation_required' } });
    expect(only.error.message).toContain('Nothing was queued');
    expect(only.error.message).toContain("device's own tool");
    expect(asked).toEqual([]);
    // No action at all: none awaits an owner's approval that would stand in for the user's yes.
    expect(await actionIds()).toEqual(before);
    // The same function under a `none` grant broadcasts as usual.
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const plain: any = await mcp.callTool({
      name: 'broadcast',
      arguments: { deviceIds: [lamp.id], capability: 'set_power', arguments: { on: false }, idempotencyKey: `none-broadcast-${era}` },
    });
    expect(plain.structuredContent.results[0], JSON.stringify(plain)).toMatchObject({ ok: true, action: { status: 'queued' } });
    await mcp.close();
  });

  it('over REST waits for the owner instead, as a user-mode call there does', async () => {
    const res = await api.post('/v1/broadcasts', {
      token: agent.token,
      body: { deviceIds: [lamp.id], capability: 'set_power', arguments: { on: true }, idempotencyKey: `rest-user-broadcast-${era}` },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.results[0]).toMatchObject({ ok: true, action: { status: 'awaiting_approval', approval: { mode: 'user' } } });
  });
});

describe('the confirmation state is bound to the live grant it was asked under', () => {
  it('is refused after the grant was revoked and given again in user mode (2026-07-28 retry), and queues nothing', async () => {
    const before = await actionIds();
    const state = await ask(agent.token, { on: true });
    expect(
      (await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } })).status,
    ).toBe(200);
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'user');
    const res = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: state });
    expect(res.json.result.isError, res.text).toBe(true);
    const { error } = errorEnvelope(res.json.result);
    expect(error.code).toBe('confirmation_invalid');
    expect(error.message).toContain('revoked or replaced');
    expect(await actionIds()).toEqual(before);
    // Asked afresh under the new grant, the yes counts.
    const fresh = await ask(agent.token, { on: true });
    const again = await rawCall(agent.token, { on: true }, { inputResponses: accepted, requestState: fresh });
    expect(again.json.result.isError, again.text).toBeFalsy();
  });

  it('is refused when the grant is replaced while a 2025-era ask waits, and queues nothing', async () => {
    const before = await actionIds();
    let answered = false;
    const { mcp } = await connectAs(agent.token, 'legacy', () => ({ action: 'accept', content: { confirm: true } }));
    // The owner gives the grant again while the user reads the ask; the user then says yes.
    mcp.setRequestHandler('elicitation/create', async () => {
      await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'user');
      answered = true;
      return { action: 'accept', content: { confirm: true } };
    });
    const result: any = await mcp.callTool({ name: setPower, arguments: { on: true } });
    await mcp.close();
    expect(answered).toBe(true);
    expect(result.isError, JSON.stringify(result)).toBe(true);
    expect(errorEnvelope(result).error.code).toBe('confirmation_invalid');
    expect(await actionIds()).toEqual(before);
  });
});

describe('the confirmation state is bound to the agent connection it was asked on', () => {
  it('is refused on a sibling connection of the same principal once the asking connection is revoked', async () => {
    const first = await createAgent(api, owner, { name: 'twin one', principal: 'agent:twins' });
    const sibling = await createAgent(api, owner, { name: 'twin two', principal: 'agent:twins' });
    await grant(api, owner, 'agent:twins', lamp.id, ['set_power'], undefined, 'user');
    const before = await actionIds();
    const state = await ask(first.token, { on: true });
    expect((await api.post(`/v1/agent-connections/${first.id}/revoke`, { token: owner, body: {} })).status).toBe(200);
    const res = await rawCall(sibling.token, { on: true }, { inputResponses: accepted, requestState: state });
    expect(res.json.result.isError, res.text).toBe(true);
    const { error } = errorEnvelope(res.json.result);
    expect(error.code).toBe('confirmation_invalid');
    expect(error.message).toContain("another of this agent's connections");
    expect(await actionIds()).toEqual(before);
  });
});

describe('2025-era capabilities belong to the client session that declared them, not to the token', () => {
  it('asks the client that can elicit and tells the one that cannot confirmation_required, whichever initialized last', async () => {
    for (const order of ['asker first', 'asker last'] as const) {
      const connectAsker = () => connectAs(agent.token, 'legacy', () => ({ action: 'accept', content: { confirm: true } }));
      const first = order === 'asker first' ? await connectAsker() : await connectAs(agent.token, 'legacy');
      const second = order === 'asker first' ? await connectAs(agent.token, 'legacy') : await connectAsker();
      const [asker, mute] = order === 'asker first' ? [first, second] : [second, first];
      try {
        const yes: any = await asker.mcp.callTool({ name: setPower, arguments: { on: true } });
        expect(yes.isError, `${order}: ${JSON.stringify(yes)}`).toBeFalsy();
        expect(asker.asked).toHaveLength(1);
        const before = await actionIds();
        const no: any = await mute.mcp.callTool({ name: setPower, arguments: { on: true } });
        expect(no.isError, order).toBe(true);
        expect(errorEnvelope(no).error.code).toBe('confirmation_required');
        expect(await actionIds()).toEqual(before);
      } finally {
        await first.mcp.close();
        await second.mcp.close();
      }
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { attachDevice as attachSdkDevice, Device, type DeviceEvent } from '@dfc/device';
import { lampManifest as sdkLampManifest } from '../../src/cli/simulated.js';
import { eventIds } from '../../src/domain/event-ids.js';
import { toWorkspaceEvent } from '../../src/domain/event-catalogue.js';
import { listWorkspaceEvents } from '../../src/store/event-journal.js';
import { client } from '../helpers/api.js';
import { grant, next, queue, requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, createSetupToken, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, simulateDevice, toolName } from '../helpers/mcp-client.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { connectDevice } from '../helpers/ws.js';
import { grantedDevice } from '../helpers/world.js';

// docs/owners/approvals.md "Approvals: the owner says yes first", docs/reference/rules.md "Approvals": an action under a
// grant in `owner` mode (or `user` through REST) waits for the owner's decision, invisible to
// the device, within its approval window.

const clock = manualClock();
let owner: string;

// The sweep is left to reads: a test moves the clock and reads.
const server = useTestServer({ clock, env: { EXPIRY_SWEEP_SECONDS: '3600' } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('approvals-owner');
});

type Action = Record<string, any>;

/** A fresh lamp and agent, the agent granted set_power under `approval` and get_state without. */
async function setup(approval: 'owner' | 'user' = 'owner') {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, approval);
  await grant(api, owner, agent.principal, lamp.id, ['get_state']);
  return { lamp, agent };
}

async function waiting(agentToken: string, lamp: AttachedDevice, body: Record<string, unknown> = {}): Promise<Action> {
  const action = await queue(api, agentToken, lamp.id, { capability: 'set_power', arguments: { on: true }, ...body });
  expect(action.status).toBe('awaiting_approval');
  return action;
}

const approve = (id: string, token = owner, body: Record<string, unknown> = {}) => api.post(`/v1/actions/${id}/approve`, { token, body });
const reject = (id: string, token = owner, body: Record<string, unknown> = {}) => api.post(`/v1/actions/${id}/reject`, { token, body });
const read = async (id: string): Promise<Action> => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;

/** Waits until `check` returns a value (no timed assertion: the test timeout bounds it). */
async function until<T>(check: () => T | undefined | Promise<T | undefined>): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe('POST /v1/devices/{deviceId}/actions under an approval grant', () => {
  it('creates the action awaiting_approval with its window as the deadline and an empty decision', async () => {
    const { lamp, agent } = await setup();
    const now = clock.now();
    const action = await waiting(agent.token, lamp, { approvalTtlSeconds: 600, ttlSeconds: 20 });
    expect(action).toMatchObject({
      expiresAt: now + 600_000,
      dispatchedAt: null,
      expiredReason: null,
      approval: { mode: 'owner', expiresAt: now + 600_000, decision: null, decidedBy: null, decidedAt: null, reason: null },
    });
  });

  it('waits an hour for the owner when the agent names no window, long enough for a person to decide', async () => {
    const { lamp, agent } = await setup();
    const now = clock.now();
    const action = await waiting(agent.token, lamp);
    expect(action.approval).toMatchObject({ mode: 'owner', expiresAt: now + 3_600_000 });
    clock.advance(3_599_000);
    expect((await read(action.id)).status).toBe('awaiting_approval');
    clock.advance(1_000);
    expect(await read(action.id)).toMatchObject({ status: 'expired', expiredReason: 'approval_timeout' });
  });

  it('queues at once under a none grant, with no approval record', async () => {
    const { lamp, agent } = await setup();
    const action = (await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} })) as Action;
    expect(action).toMatchObject({ status: 'queued', approval: null });
  });

  it('holds a user-mode action for the owner through REST, which has no user to ask', async () => {
    const { lamp, agent } = await setup('user');
    const action = await waiting(agent.token, lamp);
    expect(action.approval).toMatchObject({ mode: 'user', decision: null });
  });

  it.each([0, 86_401, 1.5])('refuses approvalTtlSeconds %s with 400 at the field, creating nothing', async (value) => {
    const { lamp, agent } = await setup();
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, approvalTtlSeconds: value });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toEqual(['approvalTtlSeconds']);
    expect((await api.get('/v1/actions?status=awaiting_approval', { token: owner })).body.data.filter((a: Action) => a.deviceId === lamp.id)).toEqual([]);
  });

  it('records approval.requested in the journal after action.created', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    const workspace = await server.service.db.get<{ id: string }>('SELECT id FROM workspaces WHERE routing_id = ?', [lamp.workspace]);
    const ids = await eventIds({ db: server.service.db, clock: { now: Date.now } });
    const events = (await listWorkspaceEvents(server.service.db, workspace!.id, 0, 10_000))
      .map((row) => toWorkspaceEvent(row, ids))
      .filter((e) => e.data.action?.id === action.id);
    expect(events.map((e) => [e.type, e.data.action!.status])).toEqual([
      ['action.created', 'awaiting_approval'],
      ['approval.requested', 'awaiting_approval'],
    ]);
    expect(events[1]!.data.action!.approval).toMatchObject({ mode: 'owner', decision: null });
  });
});

describe('a waiting action and its device', () => {
  it('is never handed out by next nor woken for; a later action without approval is', async () => {
    const { lamp, agent } = await setup();
    const socket = await connectDevice(api, server.url, lamp);
    try {
      const held = await waiting(agent.token, lamp);
      const plain = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
      // Wakes are sent in the order of the changes: the first one is for the later action.
      expect(await socket.nextFrame()).toMatchObject({ type: 'wake', actionId: plain.id });
      const handed = await next(api, lamp);
      expect(handed.body.data.id).toBe(plain.id);
      expect((await next(api, lamp)).body.data).toBeNull();
      // A report for it is refused as for an action the device was never given.
      const res = await api.post(`/v1/device/${lamp.id}/result`, { token: lamp.token, body: { actionId: held.id, ok: true, result: {} } });
      expect(res.status).toBe(404);
      expect((await read(held.id)).status).toBe('awaiting_approval');
    } finally {
      socket.ws.close();
    }
  });
});

describe('POST /v1/actions/{actionId}/approve', () => {
  it('queues it, wakes the device, which runs it with the SDK; the deadline starts at approval and the decision is recorded', async () => {
    const setupToken = await createSetupToken(api, owner);
    const credentials = await attachSdkDevice({ url: server.url, setupToken: setupToken.token, name: 'SDK lamp' });
    const events: DeviceEvent[] = [];
    const ran: string[] = [];
    const device = new Device({
      url: server.url,
      credentials,
      manifest: sdkLampManifest,
      backoff: { initialMs: 20, maxMs: 200 },
      onEvent: (e) => events.push(e),
    });
    device.handle<{ on: boolean }>('set_power', (args, ctx) => {
      ran.push(ctx.actionId);
      return { on: args.on };
    });
    await device.start();
    try {
      await until(() => (device.connected ? true : undefined));
      const agent = await createAgent(api, owner);
      await grant(api, owner, agent.principal, credentials.deviceId, ['set_power'], null, 'owner');
      const action = (await queue(api, agent.token, credentials.deviceId, {
        capability: 'set_power',
        arguments: { on: true },
        ttlSeconds: 60,
        approvalTtlSeconds: 900,
      })) as Action;
      expect(action.status).toBe('awaiting_approval');

      clock.advance(120_000);
      const approvedAt = clock.now();
      const res = await approve(action.id, owner, { reason: 'expected' });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(res.body.data).toMatchObject({
        status: 'queued',
        expiresAt: approvedAt + 60_000,
        approval: { mode: 'owner', decision: 'approved', decidedBy: 'approvals-owner', decidedAt: approvedAt, reason: 'expected' },
      });

      const done = await until(async () => {
        const current = await read(action.id);
        return current.status === 'succeeded' ? current : undefined;
      });
      expect(done).toMatchObject({ result: { on: true }, approval: { decision: 'approved', reason: 'expected' } });
      expect(ran).toEqual([action.id]);
      expect(events.filter((e) => e.type === 'command').length).toBe(1);
    } finally {
      await device.stop();
    }
  });

  it('answers 409 with the Action when it is approved twice', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    expect((await approve(action.id)).status).toBe(200);
    const again = await approve(action.id);
    expect(again.status).toBe(409);
    expect(again.body.error).toMatchObject({ code: 'conflict', action: { id: action.id, status: 'queued', approval: { decision: 'approved' } } });
  });

  it('cancels it with the reason and answers 409 when the permission ended unseen since the request (grant expired)', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'], ttlSeconds: 60, approval: 'owner' });
    const action = await waiting(agent.token, lamp, { approvalTtlSeconds: 600 });
    clock.advance(61_000);
    const res = await approve(action.id);
    expect(res.status).toBe(409);
    expect(res.body.error.action).toMatchObject({ id: action.id, status: 'cancelled', cancelReason: 'grant_expired' });
    expect(await read(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_expired' });
    expect((await next(api, lamp)).body.data).toBeNull();
  });

  it('is 404 for an action of another workspace, which stays waiting', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    const stranger = await server.ownerToken('approvals-stranger');
    expect((await approve(action.id, stranger)).status).toBe(404);
    expect((await reject(action.id, stranger)).status).toBe(404);
    expect((await read(action.id)).status).toBe('awaiting_approval');
  });

  it('is 403 for an agent, even the one that asked: an agent can never approve', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    expect((await approve(action.id, agent.token)).status).toBe(403);
    expect((await reject(action.id, agent.token)).status).toBe(403);
    expect((await read(action.id)).status).toBe('awaiting_approval');
  });
});

describe('POST /v1/actions/{actionId}/reject', () => {
  it('ends it rejected with who, when and the reason, in the Action and the history export; approving it afterwards is 409', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    const res = await reject(action.id, owner, { reason: 'not at night' });
    expect(res.status).toBe(200);
    const decided = { mode: 'owner', decision: 'rejected', decidedBy: 'approvals-owner', decidedAt: clock.now(), reason: 'not at night' };
    expect(res.body.data).toMatchObject({ status: 'rejected', completedAt: clock.now(), approval: decided });
    const exported = await api.get('/v1/actions/export', { token: owner });
    expect(exported.body.data.actions.find((a: Action) => a.id === action.id)).toMatchObject({ status: 'rejected', approval: decided });
    const late = await approve(action.id);
    expect(late.status).toBe(409);
    expect(late.body.error.action.status).toBe('rejected');
    expect((await next(api, lamp)).body.data).toBeNull();
  });
});

describe('GET /v1/approvals', () => {
  it('pages the waiting actions oldest first with next and previous cursors, and counts them all', async () => {
    const own = await server.ownerToken('approvals-pages');
    const { device: lamp, agent } = await grantedDevice(api, own, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await waiting(agent.token, lamp)).id);

    const first = await api.get('/v1/approvals?limit=2', { token: own });
    expect(first.status, JSON.stringify(first.body)).toBe(200);
    expect(first.body.data).toMatchObject({ total: 5, previous: null });
    expect(first.body.data.actions.map((a: Action) => a.id)).toEqual(ids.slice(0, 2));
    const second = await api.get(`/v1/approvals?limit=2&after=${first.body.data.next}`, { token: own });
    expect(second.body.data.actions.map((a: Action) => a.id)).toEqual(ids.slice(2, 4));
    const last = await api.get(`/v1/approvals?limit=2&after=${second.body.data.next}`, { token: own });
    expect(last.body.data).toMatchObject({ next: null });
    expect(last.body.data.actions.map((a: Action) => a.id)).toEqual(ids.slice(4));
    const back = await api.get(`/v1/approvals?limit=2&before=${last.body.data.previous}`, { token: own });
    expect(back.body.data.actions.map((a: Action) => a.id)).toEqual(ids.slice(2, 4));

    // Once the last page is decided, its cursor reads the last page there is, not an empty one.
    expect((await reject(ids[4]!, own)).status).toBe(200);
    const gone = await api.get(`/v1/approvals?limit=2&after=${second.body.data.next}`, { token: own });
    expect(gone.body.data).toMatchObject({ total: 4, next: null });
    expect(gone.body.data.actions.map((a: Action) => a.id)).toEqual(ids.slice(2, 4));
    expect(gone.body.data.previous).not.toBeNull();
  });

  it('refuses a cursor of another list or workspace, or both directions at once, with 400 at the field', async () => {
    const mine = (await api.get('/v1/approvals?limit=1', { token: owner })).body.data;
    const other = await server.ownerToken('approvals-pages-other');
    const foreign = await api.get(`/v1/approvals?after=${mine.next ?? mine.previous ?? 'x'}`, { token: other });
    expect(foreign.status).toBe(400);
    expect(foreign.body.error.issues[0].path).toBe('after');
    const both = await api.get('/v1/approvals?after=a&before=b', { token: owner });
    expect(both.status).toBe(400);
    expect(both.body.error.issues[0].path).toBe('before');
  });
});

describe('POST /v1/actions/reject', () => {
  it('rejects each action still waiting, with the reason, and leaves one approved meanwhile as it is', async () => {
    const { lamp, agent } = await setup();
    const [a, b, c] = [await waiting(agent.token, lamp), await waiting(agent.token, lamp), await waiting(agent.token, lamp)];
    expect((await approve(b.id)).status).toBe(200);
    const res = await api.post('/v1/actions/reject', { token: owner, body: { actionIds: [a.id, b.id, c.id], reason: 'too many' } });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data.rejected).toBe(2);
    expect(res.body.data.actions.map((x: Action) => x.id)).toEqual([a.id, c.id]);
    expect(res.body.data.skipped).toEqual([{ id: b.id, status: 'queued' }]);
    expect(await read(a.id)).toMatchObject({ status: 'rejected', approval: { decision: 'rejected', reason: 'too many' } });
    expect((await read(b.id)).status).toBe('queued');
  });

  it('refuses an empty list, more than 100 ids or an id that is not one, with 400 at the field', async () => {
    for (const actionIds of [[], Array.from({ length: 101 }, () => crypto.randomUUID()), ['nope']]) {
      const res = await api.post('/v1/actions/reject', { token: owner, body: { actionIds } });
      expect(res.status).toBe(400);
      expect(res.body.error.issues[0].path).toMatch(/^actionIds/);
    }
  });
});

describe('the approval window', () => {
  it('expires an undecided action with approval_timeout; a decision after it is 409', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp, { approvalTtlSeconds: 120 });
    clock.advance(120_000);
    expect(await read(action.id)).toMatchObject({ status: 'expired', expiredReason: 'approval_timeout', completedAt: action.expiresAt });
    const res = await approve(action.id);
    expect(res.status).toBe(409);
    expect(res.body.error.action).toMatchObject({ status: 'expired', expiredReason: 'approval_timeout' });
  });

  it('gives an action that ran out of execution time the reason deadline', async () => {
    const { lamp, agent } = await setup();
    const action = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 5 });
    clock.advance(5_000);
    expect(await read(action.id)).toMatchObject({ status: 'expired', expiredReason: 'deadline' });
  });
});

describe('the expiry sweep', () => {
  it('ends an approval window nobody reads, with approval_timeout', async () => {
    const sweptClock = manualClock();
    const swept = await startTestServer({ clock: sweptClock, env: { EXPIRY_SWEEP_SECONDS: '1' } });
    try {
      const sweptApi = client(swept.url);
      const sweptOwner = await swept.ownerToken('approvals-sweep');
      const { device: lamp, agent } = await grantedDevice(sweptApi, sweptOwner, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
      const action = await queue(sweptApi, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, approvalTtlSeconds: 30 });
      sweptClock.advance(30_000);
      // Read the row itself, not through the API (a read would expire it on the spot).
      const row = await until(async () => {
        const found = await swept.service.db.get<{ status: string; reason: string | null }>(
          'SELECT status, expired_reason AS reason FROM actions WHERE id = ?',
          [action.id],
        );
        return found?.status === 'expired' ? found : undefined;
      });
      expect(row.reason).toBe('approval_timeout');
    } finally {
      await swept.close();
    }
  });
});

describe('withdrawals while an action waits', () => {
  it('cancels it with grant_revoked when the grant is revoked; approving it then is 409', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    expect(await read(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_revoked' });
    const res = await approve(action.id);
    expect(res.status).toBe(409);
    expect(res.body.error.action).toMatchObject({ status: 'cancelled', cancelReason: 'grant_revoked' });
  });

  it('cancels it with principal_revoked when the agent connection is revoked', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    expect((await api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner })).status).toBe(200);
    expect(await read(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'principal_revoked' });
  });

  it('cancels it with device_revoked when the device is revoked', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    expect(await read(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'device_revoked' });
  });

  it('lets the requesting agent cancel it', async () => {
    const { lamp, agent } = await setup();
    const action = await waiting(agent.token, lamp);
    const res = await api.post(`/v1/actions/${action.id}/cancel`, { token: agent.token });
    expect(res.body.data).toMatchObject({ status: 'cancelled', cancelReason: 'agent' });
  });
});

describe('GET /v1/actions?status=', () => {
  it("lists only the actions in that status, newest first: awaiting_approval is the owner's inbox", async () => {
    const inboxOwner = await server.ownerToken('approvals-inbox');
    const { device: lamp, agent } = await grantedDevice(api, inboxOwner, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
    await grant(api, inboxOwner, agent.principal, lamp.id, ['get_state']);
    const first = await waiting(agent.token, lamp);
    const plain = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    clock.advance(1);
    const second = await waiting(agent.token, lamp);
    const ids = async (query: string) => ((await api.get(`/v1/actions${query}`, { token: inboxOwner })).body.data as Action[]).map((a) => a.id);
    expect(await ids('?status=awaiting_approval')).toEqual([second.id, first.id]);
    expect(await ids('?status=queued')).toEqual([plain.id]);
    expect(await ids('?status=awaiting_approval&limit=1')).toEqual([second.id]);
    expect((await api.get('/v1/actions?status=pending', { token: inboxOwner })).status).toBe(400);
  });
});

describe('an MCP device tool call on an owner-approval function', () => {
  it('says so in the tool description, reports the wait as progress and returns awaiting_approval within its wait bound', async () => {
    const { lamp, agent } = await setup();
    const mcp = await connect(server.url, agent.token, 'modern');
    try {
      const tool = (await mcp.listTools()).tools.find((t) => t.name === toolName('set_power', lamp.id))!;
      expect(tool.description).toContain("Needs the owner's approval");
      // What each kind of client gets: the plain call's answer, and a task client's wait up to the approval window.
      expect(tool.description).toContain("a plain call returns it awaiting_approval, a task waits for the owner's decision or the end of the approval window");
      const plainTool = (await mcp.listTools()).tools.find((t) => t.name === toolName('get_state', lamp.id))!;
      expect(plainTool.description).not.toContain('approval');

      const progress: { progress: number; message?: string }[] = [];
      const result = await mcp.callTool(
        { name: toolName('set_power', lamp.id), arguments: { on: true }, _meta: { 'dfc/waitSeconds': 0.3 } },
        { onprogress: (p) => progress.push(p) },
      );
      expect(result.isError ?? false).toBe(false);
      const action = result.structuredContent as Action;
      expect(action).toMatchObject({ status: 'awaiting_approval', approval: { mode: 'owner', decision: null } });
      expect((result.content as { text: string }[])[0]!.text).toContain('get_action');
      expect(progress.map((p) => [p.progress, p.message])).toEqual([[1, "waiting for the owner's approval"]]);
      const followed = await mcp.callTool({ name: 'get_action', arguments: { actionId: action.id } });
      expect(followed.structuredContent).toMatchObject({ id: action.id, status: 'awaiting_approval' });
    } finally {
      await mcp.close();
    }
  });

  it("keeps waiting for the device's result when the owner approves during the wait", async () => {
    const { lamp, agent } = await setup();
    const device = simulateDevice(api, lamp, ({ args }) => ({ ok: true, result: { on: args.on } }));
    const mcp = await connect(server.url, agent.token, 'modern');
    try {
      const messages: string[] = [];
      let approving: Promise<unknown> | undefined;
      const result = await mcp.callTool(
        { name: toolName('set_power', lamp.id), arguments: { on: true }, _meta: { 'dfc/waitSeconds': 30 } },
        {
          onprogress: (p) => {
            messages.push(p.message ?? '');
            if (messages.length === 1) {
              approving = (async () => {
                const inbox = (await api.get('/v1/actions?status=awaiting_approval', { token: owner })).body.data as Action[];
                const mine = inbox.find((a) => a.deviceId === lamp.id)!;
                expect((await approve(mine.id)).status).toBe(200);
              })();
            }
          },
        },
      );
      await approving;
      expect(result.structuredContent).toMatchObject({ status: 'succeeded', result: { on: true }, approval: { decision: 'approved' } });
      expect(messages[0]).toBe("waiting for the owner's approval");
      expect(messages.at(-1)).toBe('succeeded');
      expect(device.handled).toHaveLength(1);
    } finally {
      await mcp.close();
      await device.stop();
    }
  });
});

describe('POST /v1/broadcasts under approval grants', () => {
  it('applies each device grant its own mode: one action waits, the other is queued', async () => {
    const held = await attachDevice(api, owner);
    const free = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    await grant(api, owner, agent.principal, held.id, ['set_power'], null, 'owner');
    await grant(api, owner, agent.principal, free.id, ['set_power']);
    const res = await api.post('/v1/broadcasts', {
      token: agent.token,
      body: { deviceIds: [held.id, free.id], capability: 'set_power', arguments: { on: true }, idempotencyKey: crypto.randomUUID(), approvalTtlSeconds: 60 },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const statuses = (res.body.data.results as { deviceId: string; action: Action }[]).map((r) => [r.deviceId, r.action.status, r.action.approval?.mode]);
    expect(statuses).toEqual([
      [held.id, 'awaiting_approval', 'owner'],
      [free.id, 'queued', undefined],
    ]);
  });
});

describe('the kill switch (DEVICE_CONTROLS_ENABLED=false)', () => {
  it('holds an approved action like any queued one: approval queues it, no device is handed it', async () => {
    const before = await startTestServer();
    const beforeApi = client(before.url);
    const subject = 'approvals-kill-switch';
    const ownerBefore = await before.ownerToken(subject);
    const { device: lamp, agent } = await grantedDevice(beforeApi, ownerBefore, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
    const action = await queue(beforeApi, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, approvalTtlSeconds: 3600 });
    expect(action.status).toBe('awaiting_approval');
    await before.close();

    const after = await startTestServer({ dir: before.dir, env: { DEVICE_CONTROLS_ENABLED: 'false' } });
    try {
      const afterApi = client(after.url);
      const approved = await afterApi.post(`/v1/actions/${action.id}/approve`, { token: await after.ownerToken(subject), body: {} });
      expect(approved.status, JSON.stringify(approved.body)).toBe(200);
      expect(approved.body.data.status).toBe('queued');
      expect((await next(afterApi, lamp)).body).toEqual({ data: null });
    } finally {
      await after.close();
    }
  });
});

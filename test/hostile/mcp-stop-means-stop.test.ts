import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, errorEnvelope, rawMcp, simulateDevice, toolName, type Era } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * Cancellation and safe retries of device tool calls on the MCP edge (docs/reference/rules.md "MCP"): a
 * device tool call its client cancels withdraws its action, and a call carrying `_meta`
 * `dfc/idempotencyKey` is safe to retry. Real clients (the official SDK in both eras, raw
 * fetch) against a real server; the device is a raw poller.
 */
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };
let setPower: string;

const SDK_ONLY = { 'example.com/trace': 'to-the-sdk' };

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-stop');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'stop', access: 'act', principal: 'agent:stop' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
  setPower = toolName('set_power', lamp.id);
});

async function actions(): Promise<Record<string, any>[]> {
  return (await api.get('/v1/actions', { token: owner })).body.data;
}

async function queuedIds(): Promise<string[]> {
  return (await actions()).filter((a) => a.status === 'queued').map((a) => a.id);
}

async function actionById(id: string): Promise<Record<string, any>> {
  return (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;
}

/** Cancels whatever a test left queued, so the next test's device sees only its own command. */
async function clearQueue(): Promise<void> {
  for (const id of await queuedIds()) await api.post(`/v1/actions/${id}/cancel`, { token: owner });
}

/** The one action that appears in the queue while `start` runs, once it is there. */
async function queuedBy(start: () => void): Promise<string> {
  const before = new Set((await actions()).map((a) => a.id));
  start();
  let id: string | undefined;
  await expect.poll(async () => (id = (await queuedIds()).find((a) => !before.has(a)))).toBeDefined();
  return id!;
}

/**
 * Starts a `set_power` call that waits up to 30 s, once its action is queued: its id, and how
 * to abort the call the way a client gives up on it (the SDK call then rejects).
 */
async function callInFlight(mcp: Awaited<ReturnType<typeof connect>>, on: boolean): Promise<{ id: string; abortCall: () => Promise<void> }> {
  const abort = new AbortController();
  let pending: Promise<unknown> | undefined;
  const id = await queuedBy(() => {
    pending = mcp.callTool({ name: setPower, arguments: { on }, _meta: { 'dfc/waitSeconds': 30 } }, { signal: abort.signal });
    pending.catch(() => {});
  });
  return {
    id,
    abortCall: async () => {
      abort.abort();
      await expect(pending).rejects.toThrow();
    },
  };
}

describe('a device tool call its client cancels', () => {
  for (const era of ['modern', 'legacy'] as Era[]) {
    it(`cancels the queued action when the ${era} SDK client aborts the call, and the device never receives it`, async () => {
      await clearQueue();
      const mcp = await connect(server.url, agent.token, era);
      try {
        const { id, abortCall } = await callInFlight(mcp, true);
        await abortCall();
        await expect.poll(() => actionById(id)).toMatchObject({ status: 'cancelled', cancelReason: 'client_cancelled' });
        expect((await next(api, lamp)).body.data).toBeNull();
      } finally {
        await mcp.close();
      }
    });

    it(`recalls the action the device already fetched when the ${era} SDK client aborts the call`, async () => {
      await clearQueue();
      const mcp = await connect(server.url, agent.token, era);
      try {
        const { id, abortCall } = await callInFlight(mcp, false);
        expect((await next(api, lamp)).body.data).toMatchObject({ id });
        await abortCall();
        await expect.poll(() => actionById(id)).toMatchObject({ status: 'received', cancelReason: 'client_cancelled' });
        expect((await actionById(id)).cancelRequestedAt).toEqual(expect.any(Number));
      } finally {
        await mcp.close();
      }
    });
  }

  it('cancels on a 2025-era notifications/cancelled for the call’s id while its stream is still open, and only that caller’s call', async () => {
    await clearQueue();
    const other = await createAgent(api, owner, { name: 'stop-other', access: 'act', principal: 'agent:stop-other' });
    await grant(api, owner, other.principal, lamp.id, ['set_power']);
    const legacy = { 'mcp-protocol-version': '2025-06-18', 'mcp-method': undefined, 'mcp-name': undefined };
    const callBody = JSON.stringify({
      jsonrpc: '2.0',
      id: 77,
      method: 'tools/call',
      params: { name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 30 } },
    });
    const mine = await queuedBy(() => void rawMcp(server.url, { token: agent.token, method: 'tools/call', headers: legacy, body: callBody }).catch(() => {}));
    // Another agent's call with the same JSON-RPC id: a notification from this caller must not reach it.
    const theirs = await queuedBy(() => void rawMcp(server.url, { token: other.token, method: 'tools/call', headers: legacy, body: callBody }).catch(() => {}));

    const cancel = await rawMcp(server.url, {
      token: agent.token,
      method: 'notifications/cancelled',
      headers: legacy,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 77, reason: 'user stopped it' } }),
    });
    expect(cancel.status).toBe(202);
    await expect.poll(() => actionById(mine)).toMatchObject({ status: 'cancelled', cancelReason: 'client_cancelled' });
    expect(await actionById(theirs)).toMatchObject({ status: 'queued', cancelReason: null });
    await clearQueue();
  });

  it('answers a call cancelled by a 2025-era notifications/cancelled with the action as cancelled, never as queued', async () => {
    await clearQueue();
    const legacy = { 'mcp-protocol-version': '2025-06-18', 'mcp-method': undefined, 'mcp-name': undefined };
    const callBody = JSON.stringify({
      jsonrpc: '2.0',
      id: 78,
      method: 'tools/call',
      params: { name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 30 } },
    });
    let answer: Promise<Awaited<ReturnType<typeof rawMcp>>> | undefined;
    const id = await queuedBy(() => {
      answer = rawMcp(server.url, { token: agent.token, method: 'tools/call', headers: legacy, body: callBody });
    });
    await rawMcp(server.url, {
      token: agent.token,
      method: 'notifications/cancelled',
      headers: legacy,
      body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 78 } }),
    });
    const res = await answer!;
    const said = res.json?.result?.structuredContent;
    // Either nothing (the stream ended) or the action as it now is: cancelled.
    if (said !== undefined) expect(said).toMatchObject({ id, status: 'cancelled', cancelReason: 'client_cancelled' });
    expect(await actionById(id)).toMatchObject({ status: 'cancelled' });
  });

  it('leaves alone the action of a call whose answer was delivered', async () => {
    await clearQueue();
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/call',
      name: setPower,
      params: { name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 0 } },
    });
    expect(res.json.result.structuredContent.status).toBe('queued');
    const id = res.json.result.structuredContent.id as string;
    // The next request of the same caller is served after the first one's connection closed.
    await rawMcp(server.url, { token: agent.token, method: 'tools/list' });
    expect(await actionById(id)).toMatchObject({ status: 'queued', cancelReason: null, cancelRequestedAt: null });
    await clearQueue();
  });
});

describe('a device tool call with _meta dfc/idempotencyKey and dfc/ttlSeconds', () => {
  it('replays the first call’s action for a retry with the same key after the first answer was dropped: the device acts once', async () => {
    await clearQueue();
    const device = simulateDevice(api, lamp, ({ args }) => ({ ok: true, result: { on: args.on } }));
    const mcp = await connect(server.url, agent.token, 'modern');
    try {
      const meta = { 'dfc/idempotencyKey': 'lamp-on-1', 'dfc/ttlSeconds': 60 };
      // The first answer is "lost": the client never looks at it.
      await mcp.callTool({ name: setPower, arguments: { on: true }, _meta: meta });
      const count = (await actions()).length;
      const retry = await mcp.callTool({ name: setPower, arguments: { on: true }, _meta: meta });
      expect(retry.structuredContent).toMatchObject({ status: 'succeeded', result: { on: true } });
      expect((await actions()).length).toBe(count);
      expect(device.handled.filter((h) => h.id === (retry.structuredContent as { id: string }).id)).toHaveLength(1);
      expect(device.handled).toHaveLength(1);
    } finally {
      await mcp.close();
      await device.stop();
    }
  });

  it('gives the same answer on the direct path and the SDK path, and TTL sets the deadline', async () => {
    await clearQueue();
    const meta = { 'dfc/idempotencyKey': 'both-paths', 'dfc/ttlSeconds': 120, 'dfc/waitSeconds': 0 };
    const call = (extra: Record<string, unknown>) =>
      rawMcp(server.url, {
        token: agent.token,
        method: 'tools/call',
        name: setPower,
        params: { name: setPower, arguments: { on: false }, _meta: { ...meta, ...extra } },
      });
    const direct = await call({});
    const viaSdk = await call(SDK_ONLY);
    const first = direct.json.result.structuredContent;
    expect(viaSdk.json.result.structuredContent.id).toBe(first.id);
    expect(first.expiresAt - first.createdAt).toBe(120_000);
    expect(await queuedIds()).toEqual([first.id]);
    await clearQueue();
  });

  it('answers a different call with the same key idempotency_key_reused and queues nothing', async () => {
    await clearQueue();
    const mcp = await connect(server.url, agent.token, 'legacy');
    try {
      const meta = { 'dfc/idempotencyKey': 'reused', 'dfc/waitSeconds': 0 };
      await mcp.callTool({ name: setPower, arguments: { on: true }, _meta: meta });
      const count = (await actions()).length;
      const other = await mcp.callTool({ name: setPower, arguments: { on: false }, _meta: meta });
      expect(other.isError).toBe(true);
      expect(errorEnvelope(other).error.code).toBe('idempotency_key_reused');
      const longer = await mcp.callTool({ name: setPower, arguments: { on: true }, _meta: { ...meta, 'dfc/ttlSeconds': 90 } });
      expect(errorEnvelope(longer).error.code).toBe('idempotency_key_reused');
      expect((await actions()).length).toBe(count);
    } finally {
      await mcp.close();
      await clearQueue();
    }
  });

  const refused: [string, Record<string, unknown>][] = [
    ['an empty key', { 'dfc/idempotencyKey': '' }],
    ['a key of 129 characters', { 'dfc/idempotencyKey': 'k'.repeat(129) }],
    ['a key that is a number', { 'dfc/idempotencyKey': 42 }],
    ['a TTL of 0', { 'dfc/ttlSeconds': 0 }],
    ['a TTL over 300', { 'dfc/ttlSeconds': 301 }],
    ['a TTL that is not an integer', { 'dfc/ttlSeconds': 1.5 }],
    ['a TTL that is text', { 'dfc/ttlSeconds': '30' }],
  ];
  for (const [what, meta] of refused) {
    it(`refuses ${what} with validation_failed at _meta.<key>, on both paths, and queues nothing`, async () => {
      const count = (await actions()).length;
      const key = Object.keys(meta)[0]!;
      for (const extra of [{}, SDK_ONLY]) {
        const res = await rawMcp(server.url, {
          token: agent.token,
          method: 'tools/call',
          name: setPower,
          params: { name: setPower, arguments: { on: true }, _meta: { ...meta, ...extra } },
        });
        expect(res.json.result.isError, res.text).toBe(true);
        const { error } = errorEnvelope(res.json.result);
        expect(error.code).toBe('validation_failed');
        expect(error.issues).toEqual([{ path: `_meta.${key}`, message: expect.any(String) }]);
      }
      expect((await actions()).length).toBe(count);
    });
  }
});

import { beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * A 2025-era JSON-RPC batch used to cost one request of the caller's rate
 * limit however many tool calls it carried (up to the SDK's 100). Now each message counts,
 * and a batch over 10 messages is refused before anything runs.
 */
const BURST = 12;

let owner: string;
let lamp: AttachedDevice;

/**
 * A 2025-03-26 batch (the revision that has batches): no `_meta`, no routing headers. Its
 * answers come as an event stream; `answers` holds every JSON-RPC message of it.
 */
async function batch(token: string, messages: unknown[]) {
  const res = await rawMcp(server.url, {
    token,
    method: 'batch',
    headers: { 'mcp-protocol-version': '2025-03-26', 'mcp-method': undefined },
    body: JSON.stringify(messages),
  });
  const answers = res.headers.get('content-type')?.includes('text/event-stream')
    ? res.text
        .split('\n')
        .filter((line) => line.startsWith('data:'))
        .map((line) => JSON.parse(line.slice(5)) as { id: number })
    : [];
  return { ...res, answers };
}

const list = (id: number) => ({ jsonrpc: '2.0', id, method: 'tools/list', params: {} });
const call = (id: number, name: string) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name, arguments: {}, _meta: { 'dfc/waitSeconds': 0 } } });

async function actionCount(): Promise<number> {
  const res = await api.get('/v1/actions', { token: owner });
  expect(res.status).toBe(200);
  return res.body.data.length;
}

// A bucket that does not refill during the test: every token drawn shows.
const server = useTestServer({ env: { RATE_LIMIT_AGENT_PER_SECOND: '0.001', RATE_LIMIT_AGENT_BURST: String(BURST) } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-batches');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
});

describe('POST /mcp JSON-RPC batches', () => {
  it('answers a batch within the bound, each message drawing one token of the rate limit', async () => {
    const agent = await createAgent(api, owner, { name: 'batcher', access: 'act', principal: 'agent:batcher' });
    const first = await batch(
      agent.token,
      Array.from({ length: 10 }, (_, i) => list(i + 1)),
    );
    expect(first.status, first.text).toBe(200);
    expect(first.answers.map((a) => a.id).sort((a, b) => a - b)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    // 12 - 10 = 2 tokens left: a second batch of 10 is refused whole, with Retry-After.
    const second = await batch(
      agent.token,
      Array.from({ length: 10 }, (_, i) => list(i + 1)),
    );
    expect(second.status, second.text).toBe(429);
    expect(second.json.error.code).toBe('rate_limited');
    expect(Number(second.headers.get('retry-after'))).toBeGreaterThan(0);
    // Its first message took the one token authentication draws; the last one is still there.
    expect((await rawMcp(server.url, { token: agent.token, method: 'tools/list' })).status).toBe(200);
    expect((await rawMcp(server.url, { token: agent.token, method: 'tools/list' })).status).toBe(429);
  });

  it('refuses a batch over 10 messages with -32600 before any tool runs', async () => {
    const agent = await createAgent(api, owner, { name: 'amplifier', access: 'act', principal: 'agent:amplifier' });
    await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    const name = toolName('get_state', lamp.id);
    const before = await actionCount();
    const res = await batch(
      agent.token,
      Array.from({ length: 11 }, (_, i) => call(i + 1, name)),
    );
    expect(res.status, res.text).toBe(400);
    expect(res.json).toMatchObject({ jsonrpc: '2.0', id: null, error: { code: -32600, message: expect.stringContaining('10') } });
    expect(await actionCount()).toBe(before);
    // A batch of 2 calls within the bound runs both.
    const ok = await batch(agent.token, [call(1, name), call(2, name)]);
    expect(ok.status, ok.text).toBe(200);
    expect(ok.answers).toHaveLength(2);
    expect(await actionCount()).toBe(before + 2);
  });
});

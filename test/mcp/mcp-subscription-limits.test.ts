import { describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { createAgent } from '../helpers/fixtures.js';
import { useTestServer, type TestServer } from '../helpers/server.js';
import { listen, listenRequest, type Listening } from '../helpers/tasks-client.js';

/**
 * subscriptions/listen streams are bounded (docs/agents/tasks.md "Limits"): per agent
 * connection and per workspace (429 `capacity_exceeded`), per instance (503 `unavailable`),
 * each with `Retry-After`; and each lasts at most MCP_LISTEN_MAX_SECONDS.
 */
/** The same limits, and streams that last 2 seconds. */
const LIMITS = { MCP_LISTEN_PER_CONNECTION: '2', MCP_LISTEN_PER_WORKSPACE: '3', MCP_LISTEN_PER_INSTANCE: '4' };

const brief = useTestServer({ env: { ...LIMITS, MCP_LISTEN_MAX_SECONDS: '2' } });

const server = useTestServer({ env: LIMITS });
const api = server.api;

const acknowledged = (m: Record<string, any>) => m.method === 'notifications/subscriptions/acknowledged';

async function opened(token: string, on: TestServer = server): Promise<Listening> {
  const stream = await listen(on.url, token, { toolsListChanged: true });
  expect(stream.status).toBe(200);
  await stream.next(acknowledged);
  return stream;
}

async function refusal(token: string): Promise<{ status: number; retryAfter: string | null; body: Record<string, any> }> {
  const res = await listenRequest(server.url, token, { toolsListChanged: true });
  return { status: res.status, retryAfter: res.headers.get('retry-after'), body: (await res.json()) as Record<string, any> };
}

describe('open subscriptions/listen streams are capped', () => {
  it('refuses a connection’s stream past MCP_LISTEN_PER_CONNECTION, then the workspace’s past MCP_LISTEN_PER_WORKSPACE, then the instance’s', async () => {
    const owner = await server.ownerToken('owner-limits-a');
    const agent = await createAgent(api, owner, { name: 'greedy', access: 'act', principal: 'agent:greedy' });
    const second = await createAgent(api, owner, { name: 'second', access: 'act', principal: 'agent:second' });
    const streams = [await opened(agent.token), await opened(agent.token)];
    try {
      const overConnection = await refusal(agent.token);
      expect(overConnection.status).toBe(429);
      expect(overConnection.retryAfter).toBe('5');
      expect(overConnection.body.error).toMatchObject({ code: 'capacity_exceeded' });
      expect(overConnection.body.error.message).toContain('MCP_LISTEN_PER_CONNECTION');

      streams.push(await opened(second.token));
      const overWorkspace = await refusal(second.token);
      expect(overWorkspace.status).toBe(429);
      expect(overWorkspace.body.error.message).toContain('MCP_LISTEN_PER_WORKSPACE');

      const elsewhere = await server.ownerToken('owner-limits-b');
      const other = await createAgent(api, elsewhere, { name: 'other', access: 'act', principal: 'agent:other' });
      streams.push(await opened(other.token));
      const overInstance = await refusal(other.token);
      expect(overInstance.status).toBe(503);
      expect(overInstance.retryAfter).toBe('5');
      expect(overInstance.body.error).toMatchObject({ code: 'unavailable' });
      expect(overInstance.body.error.message).toContain('MCP_LISTEN_PER_INSTANCE');
    } finally {
      for (const stream of streams) stream.close();
    }
  });
});

describe('a subscriptions/listen stream lasts at most MCP_LISTEN_MAX_SECONDS', () => {
  it('ends the stream with the listen request’s result when its lifetime is over, and gives its place back', async () => {
    const owner = await brief.ownerToken('owner-limits-d');
    const agent = await createAgent(client(brief.url), owner, { name: 'long', access: 'act', principal: 'agent:long' });
    const pair = [await opened(agent.token, brief), await opened(agent.token, brief)];
    for (const stream of pair) {
      const last = await stream.next((m) => m.id === 'listen-1', 6000);
      expect(last.result).toMatchObject({ resultType: 'complete' });
      await stream.ended;
    }
    const again = await opened(agent.token, brief);
    again.close();
  });
});

import { describe, expect, it } from 'vitest';
import { createAgent } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { listen } from '../helpers/tasks-client.js';

/**
 * A subscriptions/listen stream is written to the connection as it goes (src/http/event-sink.ts):
 * it still answers with the event-stream headers and the request id, and a client that goes
 * away still ends its subscription and gives its place back (docs/agents/tasks.md "Limits").
 */
const server = useTestServer({ env: { MCP_LISTEN_PER_CONNECTION: '1' } });
const api = server.api;

const acknowledged = (m: Record<string, any>) => m.method === 'notifications/subscriptions/acknowledged';

function listenRequest(token: string, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.url}/mcp`, {
    method: 'POST',
    signal,
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': '2026-07-28',
      'mcp-method': 'subscriptions/listen',
      'x-request-id': 'listen-stream-request',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'listen-1',
      method: 'subscriptions/listen',
      params: {
        notifications: { toolsListChanged: true },
        _meta: {
          'io.modelcontextprotocol/protocolVersion': '2026-07-28',
          'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
          'io.modelcontextprotocol/clientCapabilities': {},
        },
      },
    }),
  });
}

describe('a subscriptions/listen stream is an event stream', () => {
  it('answers with the event-stream headers and the request id, and acknowledges first', async () => {
    const owner = await server.ownerToken('owner-stream-a');
    const agent = await createAgent(api, owner, { name: 'reader', access: 'act', principal: 'agent:reader' });
    const abort = new AbortController();
    const res = await listenRequest(agent.token, abort.signal);
    try {
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe('text/event-stream');
      expect(res.headers.get('cache-control')).toBe('no-cache, no-transform');
      expect(res.headers.get('x-request-id')).toBe('listen-stream-request');
      const reader = res.body!.getReader();
      let text = '';
      while (!text.includes('\n\n')) text += new TextDecoder().decode((await reader.read()).value);
      const first = JSON.parse(
        text
          .split('\n\n')[0]!
          .split('\n')
          .find((l) => l.startsWith('data:'))!
          .slice(5),
      );
      expect(first).toMatchObject({
        jsonrpc: '2.0',
        method: 'notifications/subscriptions/acknowledged',
        params: { notifications: { toolsListChanged: true } },
      });
    } finally {
      abort.abort();
    }
  });
});

describe('a client that goes away ends its subscription', () => {
  it('gives the stream’s place back, so the connection can listen again', async () => {
    const owner = await server.ownerToken('owner-stream-b');
    const agent = await createAgent(api, owner, { name: 'leaver', access: 'act', principal: 'agent:leaver' });
    const first = await listen(server.url, agent.token, { toolsListChanged: true });
    await first.next(acknowledged);
    // MCP_LISTEN_PER_CONNECTION is 1: a second stream is refused while the first is open.
    const refused = await listenRequest(agent.token);
    expect(refused.status).toBe(429);
    await refused.body?.cancel();
    first.close();
    // The server learns of the closed connection on its own time: listen until it has.
    let again: Awaited<ReturnType<typeof listen>> | undefined;
    for (let attempt = 0; attempt < 100 && !again; attempt++) {
      const stream = await listen(server.url, agent.token, { toolsListChanged: true });
      if (stream.status === 200) again = stream;
      else await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(again?.status).toBe(200);
    await again!.next(acknowledged);
    again!.close();
  });
});

import net from 'node:net';
import { describe, expect, it } from 'vitest';
import { grant, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { declaringTasks, listen, listenRequest, postMcp } from '../helpers/tasks-client.js';

/**
 * A subscriptions/listen stream is written to the connection as it goes (src/http/event-sink.ts):
 * it still answers with the event-stream headers and the request id, a stream the server ends
 * is a whole HTTP answer on a connection that stays usable, and a client that goes away still
 * ends its subscription and gives its place back (docs/agents/tasks.md "Limits").
 */
const server = useTestServer({ env: { MCP_LISTEN_PER_CONNECTION: '1' } });
const api = server.api;

const acknowledged = (m: Record<string, any>) => m.method === 'notifications/subscriptions/acknowledged';

/** The raw listen request of these tests, with a request id the answer must carry. */
const listenFor = (token: string, signal?: AbortSignal) =>
  listenRequest(server.url, token, { toolsListChanged: true }, { ...(signal ? { signal } : {}), headers: { 'x-request-id': 'listen-stream-request' } });

describe('a subscriptions/listen stream is an event stream', () => {
  it('answers with the event-stream headers and the request id, and acknowledges first', async () => {
    const owner = await server.ownerToken('owner-stream-a');
    const agent = await createAgent(api, owner, { name: 'reader', access: 'act', principal: 'agent:reader' });
    const abort = new AbortController();
    const res = await listenFor(agent.token, abort.signal);
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
    const refused = await listenFor(agent.token);
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

/** Two requests on one kept-alive connection, sent one after the other; every byte the server sent back. */
function twoOnOneConnection(url: string, first: string, second: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port), hostname);
    let text = '';
    let sentSecond = false;
    const timer = setTimeout(() => {
      socket.destroy();
      resolve(text);
    }, 5_000);
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      text += chunk.toString('latin1');
      // The first answer's body ends with its last chunk; only then does the second request go.
      if (!sentSecond && text.includes('\r\n0\r\n\r\n')) {
        sentSecond = true;
        socket.write(second);
      }
      if (sentSecond && /\r\n\r\n[\s\S]*\r\n0\r\n\r\n[\s\S]*HTTP\/1\.1 [\s\S]*\r\n\r\n\{/.test(text) && text.endsWith('}')) {
        clearTimeout(timer);
        socket.destroy();
        resolve(text);
      }
    });
    socket.write(first);
  });
}

function mcpPost(host: string, token: string, method: string, body: Record<string, unknown>): string {
  const json = JSON.stringify(body);
  const head = [
    'POST /mcp HTTP/1.1',
    `host: ${host}`,
    `authorization: Bearer ${token}`,
    'content-type: application/json',
    'accept: application/json, text/event-stream',
    'mcp-protocol-version: 2026-07-28',
    `mcp-method: ${method}`,
    ...(method === 'tasks/get' ? [`mcp-name: ${(body.params as { taskId: string }).taskId}`] : []),
    `content-length: ${Buffer.byteLength(json)}`,
  ];
  return `${head.join('\r\n')}\r\n\r\n${json}`;
}

/** The body of a chunked answer that starts `text`, and what follows its last chunk. */
function dechunk(text: string): { body: string; rest: string } {
  let at = text.indexOf('\r\n\r\n') + 4;
  let body = '';
  for (;;) {
    const lineEnd = text.indexOf('\r\n', at);
    const size = parseInt(text.slice(at, lineEnd), 16);
    at = lineEnd + 2;
    if (size === 0) return { body, rest: text.slice(at + 2) };
    body += text.slice(at, at + size);
    at += size + 2;
  }
}

describe('a stream the server ends is a whole answer', () => {
  it('sends the final task state and the listen result before the end of its body, and the connection serves the next request', async () => {
    const owner = await server.ownerToken('owner-stream-c');
    const lamp = await attachDevice(api, owner, { name: 'Lamp' });
    const agent = await createAgent(api, owner, { name: 'finisher', access: 'act', principal: 'agent:finisher' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const call = await postMcp(server.url, agent.token, {
      method: 'tools/call',
      params: { name: toolName('set_power', lamp.id), arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
    });
    const taskId = call.result.taskId as string;
    await next(api, lamp);
    await report(api, lamp, { actionId: taskId, ok: true, result: { on: true } });

    const host = new URL(server.url).host;
    const text = await twoOnOneConnection(
      server.url,
      mcpPost(host, agent.token, 'subscriptions/listen', {
        jsonrpc: '2.0',
        id: 'listen-1',
        method: 'subscriptions/listen',
        params: { notifications: { taskIds: [taskId] }, _meta: declaringTasks() },
      }),
      mcpPost(host, agent.token, 'tasks/get', { jsonrpc: '2.0', id: 'get-1', method: 'tasks/get', params: { taskId, _meta: declaringTasks() } }),
    );
    const { body, rest } = dechunk(text);
    const messages = body
      .split('\n')
      .filter((l) => l.startsWith('data:'))
      .map((l) => JSON.parse(l.slice(5)));
    expect(messages.map((m) => m.method ?? 'result')).toEqual(['notifications/subscriptions/acknowledged', 'notifications/tasks', 'result']);
    expect(messages[1].params).toMatchObject({ taskId, status: 'completed' });
    expect(messages[2]).toMatchObject({ id: 'listen-1', result: { resultType: 'complete' } });
    expect(rest).toMatch(/^HTTP\/1\.1 200 /);
    expect(JSON.parse(rest.slice(rest.indexOf('\r\n\r\n') + 4))).toMatchObject({ id: 'get-1', result: { taskId, status: 'completed' } });
  });
});

describe('a burst of tool-list announcements', () => {
  it('costs a listening stream one read of its tools, not one per announcement', async () => {
    const owner = await server.ownerToken('owner-stream-burst');
    const agent = await createAgent(api, owner, { name: 'burst', access: 'act', principal: 'agent:burst' });
    const stream = await listen(server.url, agent.token, { toolsListChanged: true });
    await stream.next(acknowledged);
    await new Promise((resolve) => setTimeout(resolve, 300));
    const workspaces = await server.store.all<{ id: string }>('SELECT id FROM workspaces');
    const store = server.store;
    const reads = { count: 0 };
    const { all, get } = store;
    store.all = (...args) => (reads.count++, all.apply(store, args)) as never;
    store.get = (...args) => (reads.count++, get.apply(store, args)) as never;
    try {
      // What a device republishing in a loop, or an owner flipping a switch, announces.
      for (let i = 0; i < 50; i++) for (const { id } of workspaces) server.service.events.publish({ type: 'journal', workspaceId: id });
      await new Promise((resolve) => setTimeout(resolve, 500));
    } finally {
      store.all = all;
      store.get = get;
      stream.close();
    }
    expect(reads.count).toBeGreaterThan(0);
    expect(reads.count).toBeLessThanOrEqual(10);
  });
});

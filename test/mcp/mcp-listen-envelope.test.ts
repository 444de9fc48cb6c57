import { describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { MODERN, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { listenRequest } from '../helpers/tasks-client.js';

/**
 * Every subscriptions/listen, whatever its envelope, is answered by the service's own path,
 * with its caps, lifetime and revocation, or refused before any stream opens
 * (src/mcp/subscriptions/listen.ts); and a client's mistakes are no errors of the service in
 * its log (docs/operators/logs-and-metrics.md "Logs").
 */
const server = useTestServer({ env: { MCP_LISTEN_PER_CONNECTION: '1' } });
const api = server.api;

const envelope = {
  'io.modelcontextprotocol/protocolVersion': MODERN,
  'io.modelcontextprotocol/clientInfo': { name: 'raw', version: '1' },
  'io.modelcontextprotocol/clientCapabilities': {},
};

/** A listen for tool-list changes whose message (or `_meta`) carries what `extra` adds. */
function oddListen(token: string, extra: { meta?: Record<string, unknown>; message?: Record<string, unknown> }, signal?: AbortSignal): Promise<Response> {
  return fetch(`${server.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${token}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'subscriptions/listen',
    },
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 'odd-listen',
      method: 'subscriptions/listen',
      params: { notifications: { toolsListChanged: true }, _meta: { ...envelope, ...extra.meta } },
      ...extra.message,
    }),
    ...(signal ? { signal } : {}),
  });
}

/** The JSON-RPC messages of an event-stream answer, read until `until` accepts one. */
async function readUntil(res: Response, until: (message: Record<string, any>) => boolean): Promise<Record<string, any>[]> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  const messages: Record<string, any>[] = [];
  let text = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return messages;
    text += decoder.decode(value, { stream: true });
    let cut: number;
    while ((cut = text.indexOf('\n\n')) >= 0) {
      const data = text
        .slice(0, cut)
        .split('\n')
        .find((line) => line.startsWith('data:'));
      text = text.slice(cut + 2);
      if (data) messages.push(JSON.parse(data.slice(5)));
      if (messages.length > 0 && until(messages.at(-1)!)) {
        await reader.cancel();
        return messages;
      }
    }
  }
}

describe('a subscriptions/listen with other _meta keys', () => {
  it('is the service’s own stream: counted against the connection’s cap and ended by its revocation', async () => {
    const owner = await server.ownerToken('owner-listen-envelope');
    const agent = await createAgent(api, owner, { name: 'tracer', access: 'act', principal: 'agent:tracer' });
    const stream = await oddListen(agent.token, { meta: { 'com.example/trace': 'abc', progressToken: 7 } });
    expect(stream.status).toBe(200);
    expect(stream.headers.get('content-type')).toBe('text/event-stream');
    // MCP_LISTEN_PER_CONNECTION is 1: the second is refused by the service's cap, in its envelope.
    const second = await oddListen(agent.token, { meta: { 'com.example/trace': 'def' } });
    expect(second.status).toBe(429);
    expect(((await second.json()) as { error: { code: string } }).error.code).toBe('capacity_exceeded');
    const revoked = await api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    // Acknowledged as this service acknowledges, then ended with the listen request's result.
    const messages = await readUntil(stream, (m) => m.id === 'odd-listen');
    expect(messages[0]).toMatchObject({
      method: 'notifications/subscriptions/acknowledged',
      params: { notifications: { toolsListChanged: true, taskIds: [] }, _meta: { 'io.modelcontextprotocol/subscriptionId': 'odd-listen' } },
    });
    expect(messages.at(-1)).toMatchObject({ id: 'odd-listen', result: { resultType: 'complete' } });
  });
});

describe('a subscriptions/listen the service’s path does not take', () => {
  it('is refused without a stream, by the SDK whose listen router serves none', async () => {
    const owner = await server.ownerToken('owner-listen-odd');
    const agent = await createAgent(api, owner, { name: 'odd', access: 'act', principal: 'agent:odd' });
    const res = await oddListen(agent.token, { message: { extra: true } });
    expect(res.headers.get('content-type')).not.toContain('text/event-stream');
    const body = await res.json();
    expect(body).toMatchObject({ jsonrpc: '2.0', id: 'odd-listen', error: { code: expect.any(Number) } });
    // The connection's one place was never taken.
    const plain = await listenRequest(server.url, agent.token, { toolsListChanged: true });
    expect(plain.status).toBe(200);
    await plain.body?.cancel();
  });
});

describe('a client’s mistakes in the log', () => {
  it('are info lines without a stack, never error lines', async () => {
    const owner = await server.ownerToken('owner-listen-mistakes');
    const lamp = await attachDevice(api, owner, { name: 'Lamp mistakes' });
    const agent = await createAgent(api, owner, { name: 'clumsy', access: 'act', principal: 'agent:clumsy' });
    await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    const before = server.logs.length;
    const post = (headers: Record<string, string>, message: Record<string, unknown>) =>
      fetch(`${server.url}/mcp`, {
        method: 'POST',
        headers: {
          authorization: `Bearer ${agent.token}`,
          'content-type': 'application/json',
          accept: 'application/json, text/event-stream',
          'mcp-protocol-version': MODERN,
          ...headers,
        },
        body: JSON.stringify({ jsonrpc: '2.0', id: 1, ...message }),
      });
    // A name header that does not match the body, a bad envelope, a listen past its cap.
    const name = toolName('get_state', lamp);
    const mismatch = await post(
      { 'mcp-method': 'tools/call', 'mcp-name': 'someone_else__000000000000' },
      { method: 'tools/call', params: { name, arguments: {}, _meta: envelope } },
    );
    expect(mismatch.status).toBe(400);
    const badEnvelope = await post(
      { 'mcp-method': 'tools/list' },
      { method: 'tools/list', params: { _meta: { ...envelope, 'io.modelcontextprotocol/protocolVersion': '2099-01-01' } } },
    );
    expect(badEnvelope.status).toBe(400);
    const open = await listenRequest(server.url, agent.token, { toolsListChanged: true });
    const pastCap = await listenRequest(server.url, agent.token, { toolsListChanged: true });
    expect(pastCap.status).toBe(429);
    await open.body?.cancel();
    const lines = server.logs.slice(before).map((line) => JSON.parse(line) as Record<string, unknown>);
    expect(lines.filter((line) => line.level === 'error')).toEqual([]);
    const refusals = lines.filter((line) => line.msg === 'mcp request refused');
    expect(refusals.length).toBeGreaterThanOrEqual(2);
    for (const line of refusals) {
      expect(line.level).toBe('info');
      expect(String(line.reason)).not.toMatch(/\n\s+at /);
    }
  });
});

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startProxy } from '../../scripts/conformance-proxy.js';

/**
 * The conformance run's proxy (scripts/conformance-proxy.ts) between the MCP conformance suite
 * and the service: it adds the agent's bearer and maps fixture tool names to the fixture
 * device's, and rewrites nothing else. A real HTTP upstream records what reaches it.
 */
const TOOL = 'greet__0123456789ab';
const names = { toTool: new Map([['greet', TOOL]]), toFixture: new Map([[TOOL, 'greet']]) };

interface Seen {
  headers: http.IncomingHttpHeaders;
  body: string;
}
const seen: Seen[] = [];
/** What the upstream answers next: content type and body. */
let answer = { type: 'application/json', body: '{}' };

let upstream: http.Server;
let proxy: http.Server;
let proxyUrl: string;

beforeAll(async () => {
  upstream = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      seen.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(200, { 'content-type': answer.type });
      res.end(answer.body);
    });
  });
  await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve));
  const target = new URL(`http://127.0.0.1:${(upstream.address() as AddressInfo).port}`);
  proxy = await startProxy(() => ({ target, token: 'dfc_agent_test', names }));
  proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}/mcp`;
});
afterAll(async () => {
  await new Promise<void>((resolve) => proxy.close(() => resolve()));
  await new Promise<void>((resolve) => upstream.close(() => resolve()));
});

async function send(body: string, headers: Record<string, string> = {}): Promise<{ upstream: Seen; text: string }> {
  const res = await fetch(proxyUrl, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body });
  const text = await res.text();
  return { upstream: seen.at(-1)!, text };
}

describe('the conformance proxy adds the bearer and renames fixture tools, nothing else', () => {
  it('renames a tools/call of a fixture in params.name and Mcp-Name', async () => {
    const body = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name: 'greet', arguments: { name: 'World' } } });
    const { upstream: got } = await send(body, { 'mcp-method': 'tools/call', 'mcp-name': 'greet' });
    expect(JSON.parse(got.body).params).toEqual({ name: TOOL, arguments: { name: 'World' } });
    expect(got.headers['mcp-name']).toBe(TOOL);
    expect(got.headers['content-length']).toBe(String(Buffer.byteLength(got.body)));
    expect(got.headers.authorization).toBe('Bearer dfc_agent_test');
  });

  it('forwards a request with no fixture name byte for byte, Host and Origin included', async () => {
    // A tools/call of another tool; another method whose name-shaped field is a fixture name; a body that is not JSON.
    const requests = [
      { body: '{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "other_tool", "arguments": {}}}', name: 'other_tool' },
      { body: '{"jsonrpc":"2.0","id":3,"method":"resources/read","params":{"uri":"greet"}}', name: 'greet' },
      { body: '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "greet"', name: 'greet' },
    ];
    for (const { body, name } of requests) {
      const { upstream: got } = await send(body, { 'mcp-name': name, origin: 'http://evil.example' });
      expect(got.body).toBe(body);
      expect(got.headers['mcp-name']).toBe(name);
      expect(got.headers.origin).toBe('http://evil.example');
      expect(got.headers.host).toBe(new URL(proxyUrl).host);
    }
  });

  it('names the fixture back in a tools/list result, as JSON and as an event stream', async () => {
    const list = JSON.stringify({ jsonrpc: '2.0', id: 5, result: { tools: [{ name: TOOL }, { name: 'list_devices' }] } });
    answer = { type: 'application/json', body: list };
    const json = await send(JSON.stringify({ jsonrpc: '2.0', id: 5, method: 'tools/list' }));
    expect(JSON.parse(json.text).result.tools.map((t: { name: string }) => t.name)).toEqual(['greet', 'list_devices']);

    answer = { type: 'text/event-stream', body: `event: message\ndata: ${list}\n\n` };
    const stream = await send(JSON.stringify({ jsonrpc: '2.0', id: 6, method: 'tools/list' }));
    const data = stream.text.split('\n').find((line) => line.startsWith('data:'))!;
    expect(JSON.parse(data.slice(5)).result.tools[0].name).toBe('greet');
  });

  it('leaves the device tool name in any other answer', async () => {
    answer = { type: 'application/json', body: JSON.stringify({ jsonrpc: '2.0', id: 7, result: { tools: [{ name: TOOL }] } }) };
    const { text } = await send(JSON.stringify({ jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'other_tool' } }));
    expect(text).toBe(answer.body);
  });
});

describe('the conformance proxy before the service is up', () => {
  it('answers 503 while it has nowhere to send a request, and keeps running', async () => {
    const early = await startProxy(() => undefined);
    try {
      const url = `http://127.0.0.1:${(early.address() as AddressInfo).port}/mcp`;
      for (let i = 0; i < 2; i++) expect((await fetch(url, { method: 'POST', body: '{}' })).status).toBe(503);
    } finally {
      await new Promise<void>((resolve) => early.close(() => resolve()));
    }
  });
});

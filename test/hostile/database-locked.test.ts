import path from 'node:path';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import type { Client as McpClient } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCK_WAIT_MS } from '../../src/store/embedded.js';
import { client, type ApiResponse, type Client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { holdWriteLock } from '../helpers/lock-holder.js';
import { connect, errorEnvelope, toolName } from '../helpers/mcp-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Another process holding the embedded file's write lock (a backup tool, an operator's
 * `sqlite3`, a second instance on the same file) must not freeze the service
 * (docs/operators/database.md "Another process on the file"): writes answer 503 `unavailable`
 * with Retry-After within the lock wait, /healthz and reads keep answering, /readyz names the
 * lock, the event loop never waits on the database, and once the lock is released everything
 * works and nothing acknowledged was lost.
 *
 * The lock is held by a process of its own, for at most 12 s (as in the report that found
 * this); "answered while the lock was still held" is asked of that process, not timed.
 */

let server: TestServer;
let api: Client;
let owner: string;
let agentToken: string;
let lamp: AttachedDevice;
let mcp: McpClient;

const createConnection = (name: string) => api.post('/v1/agent-connections', { token: owner, body: { name, access: 'read' } });
const connectionNames = async (): Promise<string[]> => {
  const res = await api.get('/v1/agent-connections?limit=200', { token: owner });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return (res.body.data as { name: string }[]).map(({ name }) => name);
};

function expectUnavailable(res: ApiResponse) {
  expect(res.status, JSON.stringify(res.body)).toBe(503);
  expect(res.body.error.code).toBe('unavailable');
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  expect(JSON.stringify(res.body)).not.toMatch(/SQLITE|libsql|lock/i);
}

beforeAll(async () => {
  server = await startTestServer();
  api = client(server.url);
  owner = await server.ownerToken('locked-owner');
  agentToken = (await createAgent(api, owner, { access: 'act' })).token;
  lamp = await attachDevice(api, owner);
  await grant(api, owner, (await api.get('/v1/agent-connections', { token: owner })).body.data[0].principal, lamp.id, ['set_brightness']);
  mcp = await connect(server.url, agentToken, 'modern');
}, 60_000);

afterAll(async () => {
  await mcp?.close();
  await server?.close();
});

describe('the embedded database file write-locked by another process', () => {
  it('answers writes 503 unavailable with Retry-After while /healthz, reads and /readyz answer, all while the lock is held, and the event loop never stalls', async () => {
    const acknowledged: string[] = [];
    for (const name of ['before-1', 'before-2']) {
      expect((await createConnection(name)).status).toBe(201);
      acknowledged.push(name);
    }
    const delay = monitorEventLoopDelay({ resolution: 10 });
    const holder = await holdWriteLock(path.join(server.dir, 'service.db'));
    delay.enable();
    let during: ApiResponse[];
    let health: ApiResponse;
    let ready: ApiResponse;
    let listed: string[];
    let tool: Awaited<ReturnType<McpClient['callTool']>>;
    try {
      // A crowd of writes at once, then the probes and a read behind them.
      const writes = Array.from({ length: 20 }, (_, i) => createConnection(`during-${i}`));
      [health, ready, listed, tool, ...during] = await Promise.all([
        api.get('/healthz'),
        api.get('/readyz'),
        connectionNames(),
        mcp.callTool({ name: toolName('set_brightness', lamp), arguments: { level: 30 }, _meta: { 'dfc/waitSeconds': 0 } }),
        ...writes,
      ]);
      // Everything above was answered while the other process still held the lock.
      expect(await holder.held()).toBe(true);
    } finally {
      delay.disable();
      await holder.release();
    }
    expect(health.status).toBe(200);
    expect(ready.status).toBe(503);
    expect(ready.body.error.code).toBe('unavailable');
    expect(Number(ready.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(ready.body.error.issues).toEqual([{ path: 'database', message: 'locked by another process' }]);
    expect(listed.sort()).toEqual([...acknowledged, 'agent'].sort());
    for (const res of during) expectUnavailable(res);
    expect(tool.isError, JSON.stringify(tool.content)).toBe(true);
    expect(errorEnvelope(tool).error.code).toBe('unavailable');
    // No turn of the event loop waited anywhere near the lock wait (the old busy timeout made
    // each write stop it for 5 s).
    expect(delay.max / 1e6).toBeLessThan(LOCK_WAIT_MS);
    if (process.env.FAULT_STATS)
      console.info(`write lock held: longest event-loop delay ${(delay.max / 1e6).toFixed(1)} ms, p99 ${(delay.percentile(99) / 1e6).toFixed(1)} ms`);

    // Released: writes work again without a restart, and nothing acknowledged was lost; nothing
    // answered 503 was written either.
    const after = await createConnection('after');
    expect(after.status, JSON.stringify(after.body)).toBe(201);
    acknowledged.push('after');
    expect((await connectionNames()).sort()).toEqual([...acknowledged, 'agent'].sort());
    const readyAgain = await api.get('/readyz');
    expect(readyAgain.status, JSON.stringify(readyAgain.body)).toBe(200);
    const tried = await mcp.callTool({ name: toolName('set_brightness', lamp), arguments: { level: 30 }, _meta: { 'dfc/waitSeconds': 0 } });
    expect(tried.isError ?? false, JSON.stringify(tried.content)).toBe(false);
    expect(server.logs.filter((line) => line.includes('"level":"error"'))).toEqual([]);
    expect(server.logs.some((line) => line.includes('"dependency unavailable"') && line.includes('"level":"warn"'))).toBe(true);
  }, 60_000);

  it('fails fast once a write has waited out the lock: a run of writes one after another is answered before the lock ends', async () => {
    // One lock wait each would be 30 s, longer than the 12 s the other process holds the lock.
    const holder = await holdWriteLock(path.join(server.dir, 'service.db'));
    const answers: ApiResponse[] = [];
    try {
      for (let i = 0; i < 30; i++) answers.push(await createConnection(`run-${i}`));
      expect(await holder.held()).toBe(true);
      expect((await api.get('/healthz')).status).toBe(200);
    } finally {
      await holder.release();
    }
    for (const res of answers) expectUnavailable(res);
    expect((await createConnection('after-run')).status).toBe(201);
    expect((await connectionNames()).filter((name) => name.startsWith('run-'))).toEqual([]);
  }, 60_000);
});

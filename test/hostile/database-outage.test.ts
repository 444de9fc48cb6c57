import net from 'node:net';
import path from 'node:path';
import Database from 'libsql';
import type { Client as McpClient } from '@modelcontextprotocol/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type ApiResponse, type Client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { connect } from '../helpers/mcp-client.js';
import { connectDevice } from '../helpers/ws.js';
import { freePort } from '../helpers/oauth.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Degrade, never lie (docs/reference/errors.md "Errors", "Probes"): with its libSQL server stopped or out of
 * reach, the service answers 503 `unavailable` with Retry-After on every surface within a
 * bounded time, /readyz names the database, /healthz (liveness) still answers, and once the
 * server is back everything works again without a restart.
 *
 * The service reaches sqld through a TCP relay the test controls, which can also turn into a
 * black hole: it accepts connections and reads them, and never answers (a host whose packets
 * vanish, a hung server).
 */

/** Generous: the remote driver gives up after 8 s, a readiness probe after 2 s. */
const BOUND_MS = 20_000;

interface Relay {
  url: string;
  /** New connections are read and never answered; open ones are cut (so none carries on). */
  blackHole(): void;
  /** New connections reach sqld again. */
  passThrough(): void;
  close(): Promise<void>;
}

async function startRelay(targetPort: number): Promise<Relay> {
  let swallowing = false;
  const open = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    open.add(socket);
    socket.on('close', () => open.delete(socket));
    socket.on('error', () => undefined);
    if (swallowing) {
      socket.on('data', () => undefined);
      return;
    }
    const upstream = net.connect(targetPort, '127.0.0.1');
    open.add(upstream);
    upstream.on('close', () => {
      open.delete(upstream);
      socket.destroy();
    });
    upstream.on('error', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
    socket.pipe(upstream).pipe(socket);
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `http://127.0.0.1:${port}`,
    blackHole() {
      swallowing = true;
      for (const socket of open) socket.destroy();
    },
    passThrough() {
      swallowing = false;
    },
    close: () =>
      new Promise((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

let sqld: TestSqld;
let relay: Relay;
let server: TestServer;
let api: Client;
let agentToken: string;
let lamp: AttachedDevice;
let mcp: McpClient;

const requestAction = () =>
  api.post(`/v1/devices/${lamp.id}/actions`, { token: agentToken, body: { capability: 'set_brightness', arguments: { level: 40 }, ttlSeconds: 60 } });

/** Runs `call` and says how long it took, for the "within a bounded time" checks. */
async function timed<T>(call: () => Promise<T>): Promise<{ answer: T; ms: number }> {
  const started = Date.now();
  const answer = await call();
  return { answer, ms: Date.now() - started };
}

function expectUnavailable(res: ApiResponse) {
  expect(res.status, JSON.stringify(res.body)).toBe(503);
  expect(res.body.error.code).toBe('unavailable');
  expect(Number(res.headers.get('retry-after'))).toBeGreaterThan(0);
  // The driver's words (fetch failed, ECONNREFUSED, an address) stay in the log.
  expect(JSON.stringify(res.body)).not.toMatch(/fetch|ECONN|127\.0\.0\.1|libsql|SQLITE/i);
}

/** Waits, at most BOUND_MS, for /readyz to answer 200. */
async function eventuallyReady() {
  for (let waited = 0; waited < BOUND_MS; waited += 250) {
    if ((await api.get('/readyz')).status === 200) return;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

/** Everything works: an action is accepted, /readyz is 200, an MCP tool answers. */
async function expectServing() {
  const accepted = await requestAction();
  expect(accepted.status, JSON.stringify(accepted.body)).toBe(201);
  const ready = await api.get('/readyz');
  expect(ready.status, JSON.stringify(ready.body)).toBe(200);
  expect(ready.body).toEqual({ status: 'ready', dependencies: [{ name: 'database', state: 'up' }] });
  const listed = await mcp.callTool({ name: 'list_devices', arguments: {} });
  expect(listed.isError ?? false, JSON.stringify(listed.content)).toBe(false);
}

// Both transports of the remote driver (docs/operators/database.md): Hrana over HTTP (`http://`) and
// over a WebSocket (`ws://`, and what `libsql://` takes).
describe.each(['http', 'ws'] as const)('over %s', (transport) => {
  beforeAll(async () => {
    sqld = await startSqld();
    relay = await startRelay(sqld.port);
    // A sweep every second, so the outages below fall on some of its runs.
    const url = transport === 'ws' ? relay.url.replace(/^http/, 'ws') : relay.url;
    server = await startTestServer({ env: { DATABASE_URL: url, EXPIRY_SWEEP_SECONDS: '1' } });
    api = client(server.url);
    const owner = await server.ownerToken('outage-owner');
    const agent = await createAgent(api, owner, { access: 'act' });
    agentToken = agent.token;
    lamp = await attachDevice(api, owner);
    await grant(api, owner, agent.principal, lamp.id, ['set_brightness']);
    mcp = await connect(server.url, agentToken, 'modern');
  }, 60_000);

  afterAll(async () => {
    await mcp?.close();
    await server?.close();
    await relay?.close();
    await sqld?.stop();
  });

  describe('GET /readyz', () => {
    it('answers 200 naming each dependency while the database answers', async () => {
      const res = await api.get('/readyz');
      expect(res.status).toBe(200);
      expect(res.body).toEqual({ status: 'ready', dependencies: [{ name: 'database', state: 'up' }] });
    });
  });

  describe('the database server stopped', () => {
    it('answers 503 unavailable with Retry-After on REST, /readyz and MCP, and serves again once sqld is back, without a restart', async () => {
      await expectServing();
      const socket = await connectDevice(api, server.url, lamp);
      await sqld.stop();
      try {
        const action = await timed(requestAction);
        expectUnavailable(action.answer);
        expect(action.ms).toBeLessThan(BOUND_MS);

        const ready = await timed(() => api.get('/readyz'));
        expectUnavailable(ready.answer);
        expect(ready.answer.body.error.message).toMatch(/database/);
        expect(ready.answer.body.error.issues).toEqual([{ path: 'database', message: 'not answering' }]);
        expect(ready.ms).toBeLessThan(BOUND_MS);

        // Liveness: the process answers; a Kubernetes liveness probe must not restart it for this.
        expect((await api.get('/healthz')).status).toBe(200);

        // MCP: the credential cannot be checked, so the request is refused before the SDK runs,
        // as HTTP 503 with the same envelope (like the kill switch); the client's error names it.
        await expect(mcp.callTool({ name: 'list_devices', arguments: {} })).rejects.toThrow(/"code":"unavailable"/);

        // A device asking for a wake-socket ticket is told the same.
        expectUnavailable(await api.post(`/v1/device/${lamp.id}/events-ticket`, { token: lamp.token }));
      } finally {
        await sqld.start();
      }
      await expectServing();
      // The wake socket opened before the outage stayed open through it and still wakes its device.
      expect(socket.ws.readyState).toBe(socket.ws.OPEN);
      expect(await socket.nextFrame()).toMatchObject({ type: 'wake' });
      socket.ws.close();
      expect(server.logs.filter((line) => line.includes('"internal error"'))).toEqual([]);
      expect(server.logs.some((line) => line.includes('"dependency unavailable"') && line.includes('"level":"warn"'))).toBe(true);
    }, 60_000);
  });

  describe('the database host out of reach (connections accepted, never answered)', () => {
    it('answers 503 unavailable within the bound instead of hanging, and serves again once the host answers', async () => {
      relay.blackHole();
      try {
        const [action, ready] = await Promise.all([timed(requestAction), timed(() => api.get('/readyz'))]);
        expectUnavailable(action.answer);
        expect(action.ms).toBeLessThan(BOUND_MS);
        expectUnavailable(ready.answer);
        expect(ready.answer.body.error.issues).toEqual([{ path: 'database', message: 'not answering' }]);
        expect(ready.ms).toBeLessThan(BOUND_MS);
      } finally {
        relay.passThrough();
      }
      // Over a WebSocket, the socket opened into the black hole is given up at the driver's
      // bound (docs/operators/probes.md "Probes"): readiness comes back within it, by itself.
      await eventuallyReady();
      await expectServing();
      // The expiry sweep that ran into the black hole gave up at the driver's bound, said so as
      // a warning (a degradation, not a bug), and the sweep goes on.
      const sweepWarned = () => server.logs.some((line) => line.includes('"expiry sweep failed"') && line.includes('"level":"warn"'));
      for (let waited = 0; !sweepWarned() && waited < BOUND_MS; waited += 100) await new Promise((resolve) => setTimeout(resolve, 100));
      expect(sweepWarned()).toBe(true);
      expect(server.logs.filter((line) => line.includes('"level":"error"'))).toEqual([]);
    }, 60_000);
  });
});

describe('the embedded database locked by another process past the lock wait', () => {
  it('answers 503 unavailable with Retry-After, and serves again once the lock is released', async () => {
    const embedded = await startTestServer();
    const local = client(embedded.url);
    try {
      const owner = await embedded.ownerToken('busy-owner');
      // Another program holding the file's write lock (a backup tool, a second service on the same file).
      const other = new Database(path.join(embedded.dir, 'service.db'));
      other.exec('BEGIN IMMEDIATE');
      try {
        const res = await local.post('/v1/agent-connections', { token: owner, body: { name: 'agent', access: 'read' } });
        expectUnavailable(res);
      } finally {
        other.exec('ROLLBACK');
        other.close();
      }
      const res = await local.post('/v1/agent-connections', { token: owner, body: { name: 'agent', access: 'read' } });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(embedded.logs.filter((line) => line.includes('"internal error"'))).toEqual([]);
    } finally {
      await embedded.close();
    }
  }, 60_000);
});

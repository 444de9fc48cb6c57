import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { startChildService, type ChildService } from '../helpers/child-service.js';
import { grant, next, queue, report } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { connect, toolName, type Era } from '../helpers/mcp-client.js';
import { freePort } from '../helpers/oauth.js';
import { redisOutsider, startRedis, startTlsRedis, type RedisOutsider, type TestRedis } from '../helpers/redis.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { connectDevice } from '../helpers/ws.js';

/**
 * Scale-out under a hostile operator's conditions (docs/operators/scale-out.md "What instances share", "Probes",
 * docs/operators/scale-out-security.md): credentials in REDIS_URL, TLS, a Redis that accepts connections
 * and never answers, corrupted, forged and replayed messages on the events channel, and what
 * the channel shows to anyone subscribed. Real redis-server, in-process instances (an
 * unhandled rejection fails the run).
 */

let redis: TestRedis;
beforeAll(async () => {
  redis = await startRedis();
}, 30_000);
afterAll(() => redis?.stop());

/** Generous: a Redis command gives up after 0.5 s, a readiness check after 2 s. */
const BOUND_MS = 5000;

/** Sends one command to Redis over a raw socket (RESP), for messages no instance would publish. */
function rawCommand(port: number, args: string[]): Promise<string> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let answer = '';
    socket.on('error', reject);
    socket.on('data', (data) => {
      answer += data.toString();
      if (answer.endsWith('\r\n')) {
        socket.end();
        resolve(answer);
      }
    });
    socket.on('connect', () => {
      socket.write(`*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`);
    });
  });
}

/** How many rate-limit buckets under `prefix` an agent connection has in Redis (its key names its workspace too). */
async function agentBuckets(port: number, prefix: string, connectionId: string): Promise<number> {
  const answer = await rawCommand(port, ['KEYS', `${prefix}:bucket:agent:*:${connectionId}`]);
  return Number(/^\*(\d+)/.exec(answer)?.[1]);
}

/** A TCP relay in front of a server that can stop answering, as a hung host does: open connections stay open, nothing comes back. */
async function startHangingRelay(targetPort: number, scheme = 'redis') {
  let hung = false;
  let connections = 0;
  let swallowed = 0;
  let swallowedScripts = 0;
  const open = new Set<net.Socket>();
  const server = net.createServer((socket) => {
    connections += 1;
    open.add(socket);
    socket.on('error', () => undefined);
    const upstream = net.connect(targetPort, '127.0.0.1');
    open.add(upstream);
    upstream.on('error', () => socket.destroy());
    upstream.on('close', () => socket.destroy());
    socket.on('close', () => upstream.destroy());
    socket.on('data', (data) => {
      if (!hung) upstream.write(data);
      else {
        swallowed += 1;
        swallowedScripts += data.toString('latin1').match(/evalsha/gi)?.length ?? 0;
      }
    });
    upstream.on('data', (data) => {
      if (!hung) socket.write(data);
    });
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return {
    url: `${scheme}://127.0.0.1:${port}`,
    hang: () => {
      hung = true;
    },
    answer: () => {
      hung = false;
    },
    /** Connections accepted so far. */
    connections: () => connections,
    /** Writes from the client that reached the relay while it was hung (each command a write, at least). */
    swallowed: () => swallowed,
    /** Script commands (the rate limiter's bucket) among them: several can share one write. */
    swallowedScripts: () => swallowedScripts,
    close: () =>
      new Promise<void>((resolve) => {
        for (const socket of open) socket.destroy();
        server.close(() => resolve());
      }),
  };
}

describe('REDIS_URL credentials', () => {
  it.each([
    ['a password with an @ in it', (port: number) => `redis://:s3cr@t-word-xyz@127.0.0.1:${port}`, 't-word-xyz'],
    ['a password in the query', (port: number) => `redis://127.0.0.1:${port}/0?password=hunter2-xyz`, 'hunter2-xyz'],
  ])('stay out of every log line and the /readyz body: %s', async (_, url, secret) => {
    // Nothing listens there: the instance logs that Redis is down, naming where.
    const server = await startTestServer({ env: { REDIS_URL: url(await freePort()) } });
    try {
      await expect.poll(() => server.logs.filter((l) => l.includes('"redis is down')).length).toBe(1);
      const ready = await client(server.url).get('/readyz');
      expect(ready.status).toBe(503);
      expect(JSON.stringify(ready.body)).not.toContain(secret);
      expect(server.logs.some((l) => l.includes('"dependency unavailable"'))).toBe(true);
      expect(server.logs.filter((l) => l.includes(secret))).toEqual([]);
    } finally {
      await server.close();
    }
  });
});

/**
 * `rediss://` (docs/operators/scale-out-security.md "Setting Redis up"): the client speaks TLS and
 * checks the server's certificate. The service runs as its own process here, because the CA
 * it trusts comes from its environment (NODE_EXTRA_CA_CERTS), read once as Node starts.
 */
describe('REDIS_URL with rediss://', () => {
  it('connects over TLS to a Redis whose certificate it trusts, and refuses one it cannot verify', async () => {
    const tlsRedis = await startTlsRedis();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-rediss-'));
    const env = (name: string) => ({ PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: `file:${path.join(dir, `${name}.db`)}`, REDIS_URL: tlsRedis.url });
    const children: ChildService[] = [];
    try {
      const trusting = await startChildService({ ...env('trusting'), NODE_EXTRA_CA_CERTS: tlsRedis.caFile });
      children.push(trusting);
      await expect.poll(async () => (await client(trusting.url).get('/readyz')).status, { timeout: BOUND_MS }).toBe(200);
      expect(trusting.output()).toContain('"msg":"redis connected"');

      const doubting = await startChildService(env('doubting'));
      children.push(doubting);
      await expect.poll(() => doubting.output(), { timeout: BOUND_MS }).toContain('"msg":"redis is down');
      expect(doubting.output()).toMatch(/self-signed certificate|unable to verify|unable to get local issuer/);
      expect((await client(doubting.url).get('/readyz')).status).toBe(503);
    } finally {
      for (const child of children) {
        child.process.kill('SIGTERM');
        await child.exited;
      }
      await tlsRedis.stop();
    }
  }, 60_000);
});

describe('Redis hung: connections open, no answers', () => {
  it('keeps serving from the database within a bounded time, readiness names Redis, and shutdown completes', async () => {
    const relay = await startHangingRelay(redis.port);
    const server = await startTestServer({ env: { REDIS_URL: relay.url } });
    try {
      const api = client(server.url);
      const owner = await server.ownerToken('owner-hung');
      await expect
        .poll(() =>
          server.service.readiness
            .find((r) => r.name === 'redis')!
            .check()
            .then(
              () => true,
              () => false,
            ),
        )
        .toBe(true);
      const lamp = await attachDevice(api, owner, { name: 'hung' });
      const agent = await createAgent(api, owner, { name: 'hung', access: 'act', principal: 'agent:hung' });
      await grant(api, owner, agent.principal, lamp.id, ['set_power']);

      relay.hang();
      const started = Date.now();
      const [action, ready] = await Promise.all([queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } }), api.get('/readyz')]);
      expect(action.status).toBe('queued');
      expect(ready.status).toBe(503);
      expect(ready.body.error.issues).toEqual([{ path: 'redis', message: 'not answering' }]);
      expect(Date.now() - started).toBeLessThan(BOUND_MS);
    } finally {
      await server.close();
      await relay.close();
    }
  }, 30_000);

  it('asks the hung Redis for a rate limit at most once a second, not on every request', async () => {
    const relay = await startHangingRelay(redis.port);
    const server = await startTestServer({ env: { REDIS_URL: relay.url } });
    try {
      const api = client(server.url);
      const owner = await server.ownerToken('owner-hung-limits');
      const agent = await createAgent(api, owner, { name: 'hung-limits', access: 'read' });
      await expect.poll(() => server.logs.some((line) => line.includes('"redis connected"'))).toBe(true);
      relay.hang();
      const started = Date.now();
      for (let i = 0; i < 10; i++) expect((await api.get('/v1/functions', { token: agent.token })).status).toBe(200);
      const seconds = Math.ceil((Date.now() - started) / 1000);
      // Each agent request takes one bucket command when Redis is asked; ten requests would be ten.
      expect(relay.swallowed()).toBeGreaterThanOrEqual(1);
      expect(relay.swallowed()).toBeLessThanOrEqual(seconds + 1);
    } finally {
      await server.close();
      await relay.close();
    }
  }, 30_000);
  it('after the first failure, asks the hung Redis once a second even when requests arrive together', async () => {
    const relay = await startHangingRelay(redis.port);
    const server = await startTestServer({ env: { REDIS_URL: relay.url } });
    try {
      const api = client(server.url);
      const owner = await server.ownerToken('owner-hung-burst');
      const agent = await createAgent(api, owner, { name: 'hung-burst', access: 'read' });
      await expect.poll(() => server.logs.some((line) => line.includes('"redis connected"'))).toBe(true);
      relay.hang();
      const burst = async () => {
        for (const answer of await Promise.all(Array.from({ length: 10 }, () => api.get('/v1/functions', { token: agent.token })))) {
          expect(answer.status).toBe(200);
        }
      };
      // The first burst finds out that Redis hangs: each of its requests may have asked.
      await burst();
      const before = relay.swallowedScripts();
      const started = Date.now();
      for (let round = 0; round < 3; round++) {
        // Each burst comes after the pause has passed: Redis may be asked again, once.
        await new Promise((resolve) => setTimeout(resolve, 1100));
        await burst();
      }
      const seconds = Math.ceil((Date.now() - started) / 1000);
      // Ten requests a burst: without one asker at a time, every burst after a pause sends ten.
      expect(relay.swallowedScripts() - before).toBeLessThanOrEqual(seconds + 1);
    } finally {
      await server.close();
      await relay.close();
    }
  }, 30_000);
});

describe('the database server hung, reached over the WebSocket transport (ws://)', () => {
  it('answers 503 unavailable within the bound instead of hanging, and serves again once the host answers', async () => {
    const sqld = await startSqld();
    const relay = await startHangingRelay(sqld.port, 'ws');
    const server = await startTestServer({ env: { DATABASE_URL: relay.url } });
    try {
      const api = client(server.url);
      const owner = await server.ownerToken('owner-ws-hung');
      const lamp = await attachDevice(api, owner, { name: 'ws-hung' });
      const agent = await createAgent(api, owner, { name: 'ws-hung', access: 'act', principal: 'agent:ws-hung' });
      await grant(api, owner, agent.principal, lamp.id, ['set_power']);
      const request = () => api.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'set_power', arguments: { on: true } } });

      relay.hang();
      const started = Date.now();
      const refused = await request();
      expect(refused.status, JSON.stringify(refused.body)).toBe(503);
      expect(refused.body.error.code).toBe('unavailable');
      // The driver's bound is 8 s; a hung socket without it holds the request for good.
      expect(Date.now() - started).toBeLessThan(20_000);

      relay.answer();
      await expect.poll(async () => (await request()).status, { timeout: 30_000, interval: 500 }).toBe(201);
    } finally {
      await server.close();
      await relay.close();
      await sqld.stop();
    }
  }, 90_000);
});

describe('GET /readyz flooded while the database hangs', () => {
  it('asks the database once for all the probes in flight, not once per probe', async () => {
    const sqld = await startSqld();
    const relay = await startHangingRelay(sqld.port, 'http');
    const server = await startTestServer({ env: { DATABASE_URL: relay.url } });
    try {
      relay.hang();
      const before = relay.connections();
      const answers = await Promise.all(Array.from({ length: 100 }, () => client(server.url).get('/readyz')));
      expect(answers.map((r) => r.status)).toEqual(answers.map(() => 503));
      // A public, unlimited probe must not turn a flood into one pending database request
      // each while the database is the thing that is down.
      expect(relay.connections() - before).toBeLessThanOrEqual(5);
    } finally {
      relay.answer();
      await server.close();
      await relay.close();
      await sqld.stop();
    }
  }, 60_000);
});

describe('corrupted messages on the events channel', () => {
  let sqld: TestSqld;
  let a: TestServer;
  let b: TestServer;
  beforeAll(async () => {
    sqld = await startSqld();
    a = await startTestServer({ env: { DATABASE_URL: sqld.url, REDIS_URL: redis.url } });
    b = await startTestServer({ env: { DATABASE_URL: sqld.url, REDIS_URL: redis.url } });
  }, 30_000);
  afterAll(async () => {
    await Promise.all([a?.close(), b?.close()]);
    await sqld?.stop();
  });

  it('are dropped with a log line, and the next real event still crosses', async () => {
    const api = client(a.url);
    const owner = await a.ownerToken('owner-corrupt');
    const lamp = await attachDevice(api, owner, { name: 'corrupt' });
    const agent = await createAgent(api, owner, { name: 'corrupt', access: 'act', principal: 'agent:corrupt' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const socket = await connectDevice(client(b.url), b.url, lamp);

    const corrupted = [
      'not json',
      'null',
      '[]',
      '"a string"',
      '{"from":"x"}',
      '{"from":"x","event":null}',
      '{"from":"x","event":"x"}',
      '{"from":"x","event":{"type":"action"}}',
      '{"from":"x","event":{"type":"action","action":null,"targetId":null}}',
      `{"from":"x","event":{"type":"device-revoked","deviceId":"00000000-0000-4000-8000-000000000000","workspaceId":{"__proto__":{"polluted":true}}}}`,
      JSON.stringify({ from: 'x', event: { type: 'work-cancelled', key: 'k'.repeat(4 * 1024 * 1024) } }),
    ];
    for (const message of corrupted) expect(await rawCommand(redis.port, ['PUBLISH', 'dfc:events', message])).toMatch(/^:\d+/);

    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: lamp.id, actionId: action.id });
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((await client(b.url).get('/healthz')).status).toBe(200);
    expect((await client(b.url).get('/readyz')).status).toBe(200);
    expect(action.status).toBe('queued');
    expect(b.logs.filter((l) => l.includes('"event from redis not delivered"')).length).toBeGreaterThan(0);
    socket.ws.close();
  }, 30_000);

  it('Redis stopped while an MCP call waits: the call still ends with the result reported on the other instance, and an instance shuts down cleanly meanwhile', async () => {
    const api = client(a.url);
    const owner = await a.ownerToken('owner-mcp-restart');
    const lamp = await attachDevice(api, owner, { name: 'mcp-restart' });
    const agent = await createAgent(api, owner, { name: 'mcp-restart', access: 'act', principal: 'agent:mcp-restart' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const setPower = toolName('set_power', lamp.id);
    const c = await startTestServer({ env: { DATABASE_URL: sqld.url, REDIS_URL: redis.url } });
    const mcp = await connect(a.url, agent.token, 'modern');
    try {
      const answer = mcp.callTool({ name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 3 } });
      let command: Record<string, any> | null = null;
      await expect.poll(async () => (command = (await next(client(b.url), lamp)).body.data)).not.toBeNull();
      await redis.stop();
      expect((await report(client(b.url), lamp, { actionId: command!.id, ok: true, result: { on: true } })).status).toBe(200);
      // The change could not cross: the wait ends at its bound and reads the action as stored.
      expect((await answer).structuredContent).toMatchObject({ id: command!.id, status: 'succeeded', result: { on: true } });
      await c.close();
    } finally {
      await mcp.close();
      await redis.start();
    }
    // The restarted Redis has forgotten the token-bucket script: the next request loads it
    // again and the bucket is shared, not left to per-instance fallback.
    await expect
      .poll(
        () =>
          a.service.readiness
            .find((r) => r.name === 'redis')!
            .check()
            .then(
              () => true,
              () => false,
            ),
        { timeout: 10_000 },
      )
      .toBe(true);
    expect((await api.get('/v1/functions', { token: agent.token })).status).toBe(200);
    expect(await agentBuckets(redis.port, 'dfc', agent.id)).toBe(1);
  }, 30_000);
});

/**
 * Redis is not trusted (docs/operators/scale-out-security.md): whoever can reach it can publish on the
 * events channel and read it. An outsider here is a plain Redis client on the deployment's
 * channel; it sends each forgery in the shape the service's messages have had, the full
 * Action included, and in the hint shape they have now. Two instances on one sqld: sockets and
 * MCP calls on one, the forgeries reach both.
 */
describe('messages on the events channel from a publisher that is not an instance', () => {
  let sqld: TestSqld;
  let a: TestServer;
  let b: TestServer;
  let outsider: RedisOutsider;
  let owner: string;
  beforeAll(async () => {
    sqld = await startSqld();
    const env = { DATABASE_URL: sqld.url, REDIS_URL: redis.url };
    a = await startTestServer({ env });
    b = await startTestServer({ env });
    owner = await a.ownerToken('owner-outsider');
    outsider = await redisOutsider(redis.url);
  }, 30_000);
  afterAll(async () => {
    await outsider?.close();
    await Promise.all([a?.close(), b?.close()]);
    await sqld?.stop();
  });

  const apiA = () => client(a.url);
  const apiB = () => client(b.url);

  async function lamp(name: string, manifest?: Record<string, unknown>) {
    const device = await attachDevice(apiA(), owner, { name, ...(manifest ? { manifest } : {}) });
    const agent = await createAgent(apiA(), owner, { name, access: 'act', principal: `agent:${name}` });
    const capabilities = manifest ? (manifest.capabilities as { name: string }[]).map((c) => c.name) : ['get_state', 'set_power'];
    await grant(apiA(), owner, agent.principal, device.id, capabilities);
    return { device, agent, setPower: toolName('set_power', device.id) };
  }

  /** The workspace id the instances' messages name beside `deviceId`: listening is enough to learn it. */
  async function workspaceIdOf(deviceId: string): Promise<string> {
    let found: string | undefined;
    await expect
      .poll(
        () =>
          (found = outsider.heard
            .map((m) => JSON.parse(m).event as Record<string, string>)
            .find((e) => e.targetId === deviceId || e.deviceId === deviceId)?.workspaceId),
      )
      .toBeDefined();
    return found!;
  }

  async function actionOf(id: string): Promise<Record<string, any>> {
    return (await apiA().get(`/v1/actions/${id}`, { token: owner })).body.data;
  }

  /** A forged change of `action`, as a full Action and as the hint naming it. */
  async function forgeChange(workspaceId: string, targetId: string, action: Record<string, unknown>) {
    await outsider.publish({ from: 'outsider', event: { type: 'action', workspaceId, targetId, action } });
    await outsider.publish({ from: 'outsider', event: { type: 'action-hint', workspaceId, targetId, actionId: action.id, signal: true } });
  }

  describe('a forged revocation of a live device', () => {
    it('does not close its wake socket: the device is not revoked in the database', async () => {
      const { device, agent } = await lamp('forged-revocation');
      const socket = await connectDevice(apiB(), b.url, device);
      const first = await queue(apiA(), agent.token, device.id, { capability: 'get_state', arguments: {} });
      expect(await socket.nextFrame()).toMatchObject({ type: 'wake', actionId: first.id });
      const workspaceId = await workspaceIdOf(device.id);

      await outsider.publish({ from: 'outsider', event: { type: 'device-revoked', workspaceId, deviceId: device.id } });
      await outsider.publish({ from: 'outsider', event: { type: 'revocation-hint', workspaceId, deviceId: device.id } });

      // Published after the forgeries: by the time its wake arrives, they have been heard.
      const second = await queue(apiA(), agent.token, device.id, { capability: 'set_power', arguments: { on: true } });
      expect(await Promise.race([socket.nextFrame(), socket.closed])).toEqual({ type: 'wake', deviceId: device.id, actionId: second.id });
      socket.ws.close();
    });
  });

  describe('a forged "succeeded" for an action an MCP call waits on', () => {
    it.each<Era>(['modern', 'legacy'])('does not answer the %s call: it answers the result the device reports', async (era) => {
      const { device, agent, setPower } = await lamp(`forged-result-${era}`);
      const mcp = await connect(a.url, agent.token, era);
      try {
        const answer = mcp.callTool({ name: setPower, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 60 } });
        let queued: Record<string, any> | undefined;
        await expect
          .poll(async () => (queued = ((await apiA().get('/v1/actions', { token: owner })).body.data as any[]).find((x) => x.deviceId === device.id)))
          .toBeDefined();
        const workspaceId = await workspaceIdOf(device.id);
        const forged = { ...queued!, status: 'succeeded', dispatchedAt: Date.now(), completedAt: Date.now(), result: { on: 'forged' } };
        await forgeChange(workspaceId, device.id, forged);

        let command: Record<string, any> | null = null;
        await expect.poll(async () => (command = (await next(apiB(), device)).body.data)).not.toBeNull();
        expect((await report(apiB(), device, { actionId: command!.id, ok: true, result: { on: true } })).status).toBe(200);
        expect((await answer).structuredContent).toMatchObject({ id: queued!.id, status: 'succeeded', result: { on: true } });
      } finally {
        await mcp.close();
      }
    });
  });

  describe('a forged cancel of a command the device holds', () => {
    it('sends no cancel frame: the database holds no recall', async () => {
      const { device, agent } = await lamp('forged-cancel');
      const socket = await connectDevice(apiB(), b.url, device);
      const held = await queue(apiA(), agent.token, device.id, { capability: 'set_power', arguments: { on: true } });
      expect(await socket.nextFrame()).toMatchObject({ type: 'wake', actionId: held.id });
      expect((await next(apiB(), device)).body.data.id).toBe(held.id);
      const workspaceId = await workspaceIdOf(device.id);

      const stored = await actionOf(held.id);
      await forgeChange(workspaceId, device.id, { ...stored, cancelRequestedAt: Date.now(), cancelReason: 'grant_revoked' });

      const later = await queue(apiA(), agent.token, device.id, { capability: 'get_state', arguments: {} });
      expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: device.id, actionId: later.id });
      expect(socket.frames.filter((f: any) => f.type === 'cancel')).toEqual([]);
      expect(await actionOf(held.id)).toMatchObject({ status: 'received', cancelRequestedAt: null });
      socket.ws.close();
    });
  });

  describe('a forged wake naming another device’s command', () => {
    it('wakes nobody: the database says the command is fetched by the other device', async () => {
      const mine = await lamp('forged-wake-mine');
      const theirs = await lamp('forged-wake-theirs');
      const socket = await connectDevice(apiB(), b.url, mine.device);
      const other = await queue(apiA(), theirs.agent.token, theirs.device.id, { capability: 'set_power', arguments: { on: true } });
      const workspaceId = await workspaceIdOf(theirs.device.id);

      await forgeChange(workspaceId, mine.device.id, await actionOf(other.id));

      const own = await queue(apiA(), mine.agent.token, mine.device.id, { capability: 'get_state', arguments: {} });
      expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: mine.device.id, actionId: own.id });
      expect(socket.frames).toHaveLength(1);
      socket.ws.close();
    });
  });

  describe('real messages replayed', () => {
    it('send nothing once what they announced is over: no wake, no cancel for a finished command', async () => {
      const { device, agent } = await lamp('replayed');
      const from = outsider.heard.length;
      const socket = await connectDevice(apiB(), b.url, device);
      const action = await queue(apiA(), agent.token, device.id, { capability: 'set_power', arguments: { on: true } });
      expect(await socket.nextFrame()).toMatchObject({ type: 'wake', actionId: action.id });
      expect((await next(apiB(), device)).body.data.id).toBe(action.id);
      const revoked = await apiA().post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: device.id } });
      expect(revoked.status).toBe(200);
      expect(await socket.nextFrame()).toMatchObject({ type: 'cancel', actionId: action.id });
      expect((await report(apiB(), device, { actionId: action.id, ok: true, result: { on: true } })).status).toBe(200);
      // Every message of the story so far: the wake, the recall, the result.
      await expect.poll(() => outsider.heard.length - from).toBeGreaterThanOrEqual(3);
      const recorded = outsider.heard.slice(from);
      socket.ws.close();

      await grant(apiA(), owner, agent.principal, device.id, ['get_state']);
      const again = await connectDevice(apiB(), b.url, device);
      for (const message of recorded) await outsider.publish(message);
      const fresh = await queue(apiA(), agent.token, device.id, { capability: 'get_state', arguments: {} });
      expect(await again.nextFrame()).toEqual({ type: 'wake', deviceId: device.id, actionId: fresh.id });
      expect(again.frames).toHaveLength(1);
      expect(await actionOf(action.id)).toMatchObject({ status: 'succeeded', result: { on: true } });
      again.ws.close();
    });
  });

  describe('what the instances publish', () => {
    it('names actions, devices and workspaces by id only: no arguments, results, errors or principals', async () => {
      const manifest = {
        capabilities: [
          {
            name: 'say',
            kind: 'control',
            arguments: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
          },
        ],
      };
      const { device, agent } = await lamp('published-ids', manifest);
      const from = outsider.heard.length;
      const socket = await connectDevice(apiB(), b.url, device);
      const ok = await queue(apiA(), agent.token, device.id, { capability: 'say', arguments: { text: 'argument-secret-1' } });
      const bad = await queue(apiB(), agent.token, device.id, { capability: 'say', arguments: { text: 'argument-secret-2' } });
      expect(await socket.nextFrame()).toMatchObject({ actionId: ok.id });
      expect((await next(apiB(), device)).body.data.id).toBe(ok.id);
      expect((await next(apiA(), device)).body.data.id).toBe(bad.id);
      expect((await report(apiB(), device, { actionId: ok.id, ok: true, result: { said: 'result-secret' } })).status).toBe(200);
      expect((await report(apiA(), device, { actionId: bad.id, ok: false, error: { code: 'jammed', message: 'error-secret' } })).status).toBe(200);
      expect((await apiA().post(`/v1/devices/${device.id}/revoke`, { token: owner })).status).toBe(200);
      expect(await socket.closed).toEqual({ code: 4401, reason: 'device revoked' });

      await expect.poll(() => outsider.heard.slice(from).filter((m) => m.includes(ok.id)).length).toBeGreaterThanOrEqual(3);
      const published = outsider.heard.slice(from);
      for (const secret of ['argument-secret', 'result-secret', 'error-secret', 'jammed', agent.principal, 'succeeded', 'failed']) {
        expect(published.filter((m) => m.includes(secret))).toEqual([]);
      }
      const fields = new Set(published.map((m) => Object.keys(JSON.parse(m).event).sort().join(',')));
      // A journal message (a device coming online) may or may not fall in the window.
      expect(['actionId,signal,targetId,type,workspaceId', 'deviceId,type,workspaceId', 'type,workspaceId']).toEqual(expect.arrayContaining([...fields]));
      expect([...fields]).toEqual(expect.arrayContaining(['actionId,signal,targetId,type,workspaceId', 'deviceId,type,workspaceId']));
    });
  });
});

/**
 * The Redis ACL of docs/operators/scale-out-security.md, as written there: a user that reaches only the
 * deployment's keys and channel and a few commands. The instances serve with it as with a
 * user that may do everything.
 */
describe('a Redis ACL user limited to the deployment’s prefix and commands', () => {
  const ACL = [
    'ACL',
    'SETUSER',
    'dfc-acl',
    'on',
    '>acl-password-xyz',
    'resetkeys',
    '~acl:*',
    'resetchannels',
    '&acl:*',
    'nocommands',
    '+ping',
    '+info',

    '+publish',
    '+subscribe',
    '+unsubscribe',
    '+evalsha',
    '+eval',
    '+hmget',
    '+hset',
    '+pexpire',
    '+time',
  ];
  let sqld: TestSqld;
  let one: TestServer;
  let two: TestServer;
  beforeAll(async () => {
    expect(await rawCommand(redis.port, ACL)).toBe('+OK\r\n');
    sqld = await startSqld();
    const env = { DATABASE_URL: sqld.url, REDIS_URL: `redis://dfc-acl:acl-password-xyz@127.0.0.1:${redis.port}`, REDIS_KEY_PREFIX: 'acl:' };
    one = await startTestServer({ env });
    two = await startTestServer({ env });
  }, 30_000);
  afterAll(async () => {
    await Promise.all([one?.close(), two?.close()]);
    await sqld?.stop();
    await rawCommand(redis.port, ['ACL', 'DELUSER', 'dfc-acl']);
  });

  it('is enough: instances are ready, wakes cross, rate limits are shared, and Redis refuses the user nothing', async () => {
    for (const server of [one, two]) expect((await client(server.url).get('/readyz')).status).toBe(200);
    const api = client(one.url);
    const owner = await one.ownerToken('owner-acl');
    const lamp = await attachDevice(api, owner, { name: 'acl' });
    const agent = await createAgent(api, owner, { access: 'act', principal: 'agent:acl' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const socket = await connectDevice(client(two.url), two.url, lamp);
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: lamp.id, actionId: action.id });
    expect(await agentBuckets(redis.port, 'acl', agent.id)).toBe(1);
    // Redis logs every refused command and key in its ACL log.
    expect(await rawCommand(redis.port, ['ACL', 'LOG'])).toBe('*0\r\n');
    expect([...one.logs, ...two.logs].filter((l) => /NOPERM|fallback/i.test(l))).toEqual([]);
    socket.ws.close();
  });
});

describe('REDIS_KEY_PREFIX: every key and channel of a deployment under it', () => {
  let sqld: TestSqld;
  let alpha1: TestServer;
  let alpha2: TestServer;
  let beta: TestServer;
  beforeAll(async () => {
    sqld = await startSqld();
    const alphaEnv = { DATABASE_URL: sqld.url, REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'alpha:' };
    [alpha1, alpha2, beta] = await Promise.all([
      startTestServer({ env: alphaEnv }),
      startTestServer({ env: alphaEnv }),
      startTestServer({ env: { REDIS_URL: redis.url, REDIS_KEY_PREFIX: 'beta:' } }),
    ]);
  }, 30_000);
  afterAll(async () => {
    await Promise.all([alpha1?.close(), alpha2?.close(), beta?.close()]);
    await sqld?.stop();
  });

  it('each listens on its own channel, and one deployment’s instances still share theirs', async () => {
    await expect
      .poll(async () => rawCommand(redis.port, ['PUBSUB', 'NUMSUB', 'alpha:events', 'beta:events']))
      .toMatch(/alpha:events\r\n:2\r\n.*beta:events\r\n:1\r\n/s);
    const api = client(alpha1.url);
    const owner = await alpha1.ownerToken('owner-prefix');
    const lamp = await attachDevice(api, owner, { name: 'prefixed' });
    const agent = await createAgent(api, owner, { access: 'act', principal: 'agent:prefixed' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const socket = await connectDevice(client(alpha2.url), alpha2.url, lamp);
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: lamp.id, actionId: action.id });
    socket.ws.close();
  });

  it('keeps each deployment’s rate-limit buckets under its own prefix', async () => {
    const api = client(beta.url);
    const owner = await beta.ownerToken('owner-beta');
    const agent = await createAgent(api, owner, { access: 'read', principal: 'agent:beta' });
    expect((await api.get('/v1/functions', { token: agent.token })).status).toBe(200);
    expect(await agentBuckets(redis.port, 'beta', agent.id)).toBe(1);
    expect(await agentBuckets(redis.port, 'alpha', agent.id)).toBe(0);
    expect(await agentBuckets(redis.port, 'dfc', agent.id)).toBe(0);
  });
});

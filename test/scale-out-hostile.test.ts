import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from './helpers/api.js';
import { grant, next, queue, report } from './helpers/actions.js';
import { attachDevice, createAgent } from './helpers/fixtures.js';
import { connect } from './helpers/mcp-client.js';
import { freePort } from './helpers/oauth.js';
import { startRedis, type TestRedis } from './helpers/redis.js';
import { startTestServer, type TestServer } from './helpers/server.js';
import { startSqld, type TestSqld } from './helpers/sqld.js';
import { connectDevice } from './helpers/ws.js';

/**
 * Scale-out under a hostile operator's conditions (README "What instances share", "Probes"):
 * credentials in REDIS_URL, a Redis that accepts connections and never answers, and
 * corrupted messages on the events channel. Real redis-server, in-process instances (an
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
    const setPower = `set_power__${lamp.id.replaceAll('-', '').slice(0, 12)}`;
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
    expect(await rawCommand(redis.port, ['EXISTS', `dfc:bucket:agent:${agent.id}`])).toBe(':1\r\n');
  }, 30_000);
});

describe('two deployments sharing one Redis under different REDIS_KEY_PREFIX', () => {
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
    expect(await rawCommand(redis.port, ['EXISTS', `beta:bucket:agent:${agent.id}`])).toBe(':1\r\n');
    expect(await rawCommand(redis.port, ['EXISTS', `alpha:bucket:agent:${agent.id}`])).toBe(':0\r\n');
    expect(await rawCommand(redis.port, ['EXISTS', `dfc:bucket:agent:${agent.id}`])).toBe(':0\r\n');
  });
});

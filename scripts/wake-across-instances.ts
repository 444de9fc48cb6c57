import os from 'node:os';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import { startRedis } from '../test/helpers/redis.js';
import { RELAXED_LIMITS, startTestServer, type TestServer } from '../test/helpers/server.js';
import { startSqld } from '../test/helpers/sqld.js';

// `npx tsx scripts/wake-across-instances.ts [-- --actions 1000]`
//
// Wake latency across instances (docs/operators/scale-out.md "What instances share"): two instances of the
// service in this process on one sqld and one redis-server (both started here, loopback),
// the device's socket on B, actions requested on A. For each action, sequentially: A
// published the queued action (after its commit) → the wake frame arrived on B's socket,
// through Redis pub/sub. The same with the socket on A gives the in-process baseline.
const { values } = parseArgs({ options: { actions: { type: 'string', default: '1000' } } });
const ACTIONS = Number(values.actions);

const sqld = await startSqld();
const redis = await startRedis();
const servers: TestServer[] = [];
try {
  const env = { DATABASE_URL: sqld.url, REDIS_URL: redis.url, LOG_LEVEL: 'warn', ...RELAXED_LIMITS, WORKSPACE_MAX_QUEUED_ACTIONS: '1000000' };
  const a = await startTestServer({ env });
  servers.push(a);
  const b = await startTestServer({ env });
  servers.push(b);

  const call = async (base: string, route: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> => {
    const response = await fetch(`${base}${route}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const json = (await response.json()) as { data?: unknown };
    if (!response.ok) throw new Error(`${route}: ${response.status} ${JSON.stringify(json)}`);
    return json.data;
  };
  const owner = await a.ownerToken('wake-across');
  const setup = await call(a.url, '/v1/device-setup-tokens', owner, { name: 'latency' });
  const attached = await call(a.url, '/v1/sdk/devices', setup.token, { name: 'lamp' });
  const lamp = { id: attached.device.id as string, token: attached.token as string, workspace: attached.workspace as string };
  await call(a.url, `/v1/device/${lamp.id}/manifest`, lamp.token, {
    capabilities: [{ name: 'set_power', kind: 'control', arguments: { type: 'object', properties: { on: { type: 'boolean' } } } }],
  });
  const agent = await call(a.url, '/v1/agent-connections', owner, { name: 'latency agent', access: 'act' });
  await call(a.url, '/v1/grants', owner, { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_power'] });

  const publishedAt = new Map<string, number>();
  a.service.events.subscribe((event, origin) => {
    if (origin === 'this-instance' && event.type === 'action' && event.action.status === 'queued') publishedAt.set(event.action.id, performance.now());
  });

  const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
  const summary = (label: string, samples: number[]) => {
    const sorted = [...samples].sort((x, y) => x - y);
    const f = (n: number) => `${n.toFixed(2)} ms`.padEnd(10);
    return `${label.padEnd(44)} n=${samples.length} p50 ${f(percentile(sorted, 0.5))} p99 ${f(percentile(sorted, 0.99))} max ${f(sorted.at(-1)!)}`;
  };

  const measure = async (socketOn: TestServer) => {
    const { ticket } = await call(socketOn.url, `/v1/device/${lamp.id}/events-ticket`, lamp.token);
    const socket = new WebSocket(`${socketOn.url.replace(/^http/, 'ws')}/v1/device/${lamp.id}/events?ticket=${ticket}`);
    await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
    const frameAt = new Map<string, number>();
    const waiters = new Map<string, () => void>();
    socket.on('message', (data) => {
      const frame = JSON.parse(String(data)) as { type: string; actionId: string };
      if (frame.type !== 'wake') return;
      frameAt.set(frame.actionId, performance.now());
      waiters.get(frame.actionId)?.();
    });
    const samples: number[] = [];
    for (let i = 0; i < ACTIONS; i += 1) {
      const action = await call(a.url, `/v1/devices/${lamp.id}/actions`, agent.token, { capability: 'set_power', arguments: { on: true } });
      if (!frameAt.has(action.id)) await new Promise<void>((resolve) => waiters.set(action.id, resolve));
      samples.push(frameAt.get(action.id)! - publishedAt.get(action.id)!);
      // Keep the queue empty, outside the timing.
      await call(socketOn.url, `/v1/device/${lamp.id}/next`, lamp.token, undefined, { 'x-service-workspace': lamp.workspace });
      await call(socketOn.url, `/v1/device/${lamp.id}/result`, lamp.token, { actionId: action.id, ok: true });
    }
    socket.close();
    return samples;
  };

  console.log(`wake latency, ${ACTIONS} actions each, sqld + redis-server ${redis.url} on loopback (Node ${process.version}, ${os.cpus().length} cores)`);
  console.log(summary('  requested on A, socket on A (one instance)', await measure(a)));
  console.log(summary('  requested on A, socket on B (through Redis)', await measure(b)));
} finally {
  for (const server of servers) await server.close();
  await Promise.all([sqld.stop(), redis.stop()]);
}

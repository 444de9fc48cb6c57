/**
 * Measures sequential request → next → result round trips (issue 3's "note to leave").
 *
 *   npx tsx scripts/roundtrips.ts [--count 1000] [--warmup 20]   (or: npm run roundtrips)
 *
 * Starts the real service in this process on a loopback port with a fresh temp libSQL file
 * (the embedded default driver, WAL), one agent and one device, then times each round trip:
 * the agent's POST /v1/devices/{id}/actions, the device's POST /v1/device/{id}/next, and its
 * POST /v1/device/{id}/result, one after another over HTTP with keep-alive. Rate limits are
 * raised for the run so the figure is the service's own latency, not the limiter's refill rate
 * (the defaults of 10 device requests per second would otherwise pace the loop).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { signDevelopmentSession } from '../src/auth/owner.js';
import { parseConfig } from '../src/config.js';
import { measuringEnv } from './measuring-env.js';
import { createLogger } from '../src/logger.js';
import { startService } from '../src/service.js';

const { values } = parseArgs({ options: { count: { type: 'string', default: '1000' }, warmup: { type: 'string', default: '20' } } });
const count = Number(values.count);
const warmup = Number(values.warmup);
if (!Number.isInteger(count) || count < 1 || !Number.isInteger(warmup) || warmup < 0) {
  console.error('usage: npx tsx scripts/roundtrips.ts [--count N>=1] [--warmup N>=0]');
  process.exit(2);
}

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-roundtrips-'));
const config = parseConfig(measuringEnv(dir));
const service = await startService(config, { log: createLogger('silent') });

async function call(method: string, route: string, token: string, body?: unknown, headers: Record<string, string> = {}) {
  const response = await fetch(`${service.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await response.json()) as { data?: any; error?: unknown };
  if (!response.ok) throw new Error(`${method} ${route} → ${response.status} ${JSON.stringify(json)}`);
  return json.data;
}

try {
  const owner = await signDevelopmentSession(config, 'roundtrips');
  const setup = await call('POST', '/v1/device-setup-tokens', owner, { name: 'bench' });
  const attached = await call('POST', '/v1/sdk/devices', setup.token, { name: 'Bench lamp' });
  const device = { id: attached.device.id as string, token: attached.token as string, workspace: attached.workspace as string };
  await call('POST', `/v1/device/${device.id}/manifest`, device.token, {
    capabilities: [
      {
        name: 'set_power',
        kind: 'control',
        arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false },
      },
    ],
  });
  const agent = await call('POST', '/v1/agent-connections', owner, { name: 'bench', access: 'act' });
  await call('POST', '/v1/grants', owner, { principal: agent.principal, deviceId: device.id, capabilities: ['set_power'] });

  const roundTrip = async (i: number) => {
    const action = await call('POST', `/v1/devices/${device.id}/actions`, agent.token, { capability: 'set_power', arguments: { on: i % 2 === 0 } });
    const command = await call('POST', `/v1/device/${device.id}/next`, device.token, undefined, { 'x-service-workspace': device.workspace });
    if (command?.id !== action.id) throw new Error(`next handed ${command?.id} instead of ${action.id}`);
    const done = await call('POST', `/v1/device/${device.id}/result`, device.token, { actionId: action.id, ok: true, result: { on: i % 2 === 0 } });
    if (done.status !== 'succeeded') throw new Error(`action ${action.id} ended ${done.status}`);
  };

  for (let i = 0; i < warmup; i++) await roundTrip(i);
  const samples: number[] = [];
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await roundTrip(i);
    samples.push(performance.now() - t0);
  }
  const totalMs = performance.now() - started;

  const sorted = [...samples].sort((a, b) => a - b);
  const pct = (p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
  const round = (ms: number) => Math.round(ms * 1000) / 1000;
  const result = {
    roundTrips: count,
    warmup,
    totalMs: round(totalMs),
    meanMs: round(totalMs / count),
    p50Ms: round(pct(50)),
    p99Ms: round(pct(99)),
    maxMs: round(sorted[sorted.length - 1]!),
    perSecond: Math.round((count / totalMs) * 1000),
    node: process.version,
    database: 'embedded libSQL file (WAL, synchronous=NORMAL)',
  };
  console.log(
    `${count} sequential request → next → result round trips: total ${result.totalMs} ms; per round trip mean ${result.meanMs} ms, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms (${result.perSecond}/s)`,
  );
  console.log(JSON.stringify(result));
} finally {
  await service.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

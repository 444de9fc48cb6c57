/**
 * Measures sequential request → next → result round trips (docs/performance.md "Current figures").
 *
 *   npx tsx scripts/roundtrips.ts [--count 1000] [--warmup 20] [--database embedded|sqld|sqld-http] [--count-statements] [--conditions]   (or: npm run roundtrips)
 *
 * Starts the real service in this process on a loopback port with a fresh temp libSQL file
 * (the embedded default driver, WAL), one agent and one device, then times each round trip:
 * the agent's POST /v1/devices/{id}/actions, the device's POST /v1/device/{id}/next, and its
 * POST /v1/device/{id}/result, one after another over HTTP with keep-alive. Rate limits are
 * raised for the run so the figure is the service's own latency, not the limiter's refill rate
 * (the defaults of 10 device requests per second would otherwise pace the loop).
 *
 * `--database sqld` runs the same loop on a real libSQL server (tools/sqld) over the Hrana
 * WebSocket transport (`ws://`, what the service uses for `libsql://`), `sqld-http` over Hrana
 * HTTP (`http://`). `--count-statements` (HTTP only) goes through a counting proxy
 * (scripts/sqld-counter.ts), also runs the loop with the agent's request as an MCP
 * `tools/call` that waits for the result, and reports the database round trips and
 * statements each request costs; the proxy's own hop makes its timings slower.
 *
 * `--conditions` gives the agent's grant all three grant conditions (docs/owners/grants.md
 * "Conditions"), each one that every request passes: an argument bound, a schedule open all
 * week and a budget no loop spends, so the figures are what checking them costs.
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
import { startSqld } from '../test/helpers/sqld.js';
import { startSqldCounter } from './sqld-counter.js';

const { values } = parseArgs({
  options: {
    count: { type: 'string', default: '1000' },
    warmup: { type: 'string', default: '20' },
    database: { type: 'string', default: 'embedded' },
    'count-statements': { type: 'boolean', default: false },
    conditions: { type: 'boolean', default: false },
  },
});
const count = Number(values.count);
const warmup = Number(values.warmup);
const database = values.database;
if (
  !Number.isInteger(count) ||
  count < 1 ||
  !Number.isInteger(warmup) ||
  warmup < 0 ||
  !['embedded', 'sqld', 'sqld-http'].includes(database) ||
  (values['count-statements'] && database !== 'sqld-http')
) {
  console.error(
    'usage: npx tsx scripts/roundtrips.ts [--count N>=1] [--warmup N>=0] [--database embedded|sqld|sqld-http] [--count-statements (sqld-http only)] [--conditions]',
  );
  process.exit(2);
}

const MCP_VERSION = '2026-07-28';
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-roundtrips-'));
const sqld = database === 'embedded' ? undefined : await startSqld();
const counter = values['count-statements'] ? await startSqldCounter(sqld!.url) : undefined;
const databaseUrl = counter?.url ?? (database === 'sqld' ? sqld?.url.replace(/^http/, 'ws') : sqld?.url);
const config = parseConfig({ ...measuringEnv(dir), ...(databaseUrl ? { DATABASE_URL: databaseUrl } : {}) });
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
  const conditions = {
    arguments: { on: { enum: [true, false] } },
    schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], from: '00:00', to: '00:00' }] },
    budget: { max: 100_000, perSeconds: 3600 },
  };
  await call('POST', '/v1/grants', owner, {
    principal: agent.principal,
    deviceId: device.id,
    capabilities: ['set_power'],
    ...(values.conditions ? { conditions } : {}),
  });

  /** Database round trips and statements of each step, summed over the measured loop (sqld only). */
  const costs = new Map<string, { roundTrips: number; statements: number }>();
  let measuring = false;
  const counted = async <T>(step: string, fn: () => Promise<T>): Promise<T> => {
    const before = counter?.counts();
    const value = await fn();
    if (counter && before && measuring) {
      const after = counter.counts();
      const cost = costs.get(step) ?? { roundTrips: 0, statements: 0 };
      cost.roundTrips += after.roundTrips - before.roundTrips;
      cost.statements += after.statements - before.statements;
      costs.set(step, cost);
    }
    return value;
  };
  const deviceSteps = async (actionId: string, on: boolean) => {
    const command = await counted('device next', () =>
      call('POST', `/v1/device/${device.id}/next`, device.token, undefined, { 'x-service-workspace': device.workspace }),
    );
    if (command?.id !== actionId) throw new Error(`next handed ${command?.id} instead of ${actionId}`);
    const done = await counted('device result', () => call('POST', `/v1/device/${device.id}/result`, device.token, { actionId, ok: true, result: { on } }));
    if (done.status !== 'succeeded') throw new Error(`action ${actionId} ended ${done.status}`);
  };
  const roundTrip = async (i: number) => {
    const action = await counted('REST request', () =>
      call('POST', `/v1/devices/${device.id}/actions`, agent.token, { capability: 'set_power', arguments: { on: i % 2 === 0 } }),
    );
    await deviceSteps(action.id, i % 2 === 0);
  };
  const tool = `set_power__${device.id.replaceAll('-', '').slice(0, 12)}`;
  /** The agent's MCP tools/call waits for the result while the device fetches and reports it. */
  const mcpRoundTrip = async (i: number) => {
    const before = counter?.counts();
    const answer = fetch(`${service.url}/mcp`, {
      method: 'POST',
      headers: {
        authorization: `Bearer ${agent.token}`,
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MCP_VERSION,
        'mcp-method': 'tools/call',
        'mcp-name': tool,
      },
      body: JSON.stringify({
        jsonrpc: '2.0',
        id: i,
        method: 'tools/call',
        params: {
          name: tool,
          arguments: { on: i % 2 === 0 },
          _meta: { 'io.modelcontextprotocol/protocolVersion': MCP_VERSION, 'io.modelcontextprotocol/clientCapabilities': {} },
        },
      }),
    }).then((response) => response.text());
    // The call queues the action and waits; the device asks once it is queued, so empty
    // `next` answers do not count against the call.
    await new Promise((resolve) => setTimeout(resolve, 50));
    let command: { id: string } | null = null;
    while (!command) command = await call('POST', `/v1/device/${device.id}/next`, device.token, undefined, { 'x-service-workspace': device.workspace });
    await call('POST', `/v1/device/${device.id}/result`, device.token, { actionId: command.id, ok: true, result: { on: i % 2 === 0 } });
    const text = await answer;
    if (!text.includes('succeeded')) throw new Error(`MCP round trip: ${text.slice(0, 300)}`);
    if (counter && before && measuring) {
      const after = counter.counts();
      const cost = costs.get('MCP round trip (all three requests)') ?? { roundTrips: 0, statements: 0 };
      cost.roundTrips += after.roundTrips - before.roundTrips;
      cost.statements += after.statements - before.statements;
      costs.set('MCP round trip (all three requests)', cost);
    }
  };

  for (let i = 0; i < warmup; i++) await roundTrip(i);
  const samples: number[] = [];
  measuring = true;
  const started = performance.now();
  for (let i = 0; i < count; i++) {
    const t0 = performance.now();
    await roundTrip(i);
    samples.push(performance.now() - t0);
  }
  const totalMs = performance.now() - started;
  if (counter) {
    measuring = false;
    for (let i = 0; i < warmup; i++) await mcpRoundTrip(i);
    measuring = true;
    for (let i = 0; i < Math.min(count, 200); i++) await mcpRoundTrip(i);
    const mcpCount = Math.min(count, 200);
    for (const [step, cost] of costs) {
      const n = step.startsWith('MCP') ? mcpCount : count;
      console.log(`${step}: ${Math.round((cost.roundTrips / n) * 10) / 10} database round trips, ${Math.round((cost.statements / n) * 10) / 10} statements`);
    }
  }

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
    database:
      database === 'embedded'
        ? 'embedded libSQL file (WAL, synchronous=NORMAL)'
        : `sqld over ${database === 'sqld' ? 'WebSocket' : counter ? 'HTTP (counting proxy)' : 'HTTP'}`,
    grantConditions: values.conditions,
  };
  console.log(
    `${count} sequential request → next → result round trips: total ${result.totalMs} ms; per round trip mean ${result.meanMs} ms, p50 ${result.p50Ms} ms, p99 ${result.p99Ms} ms (${result.perSecond}/s)`,
  );
  console.log(JSON.stringify(result));
} finally {
  await service.close();
  await counter?.close();
  await sqld?.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  if (sqld) fs.rmSync(sqld.dir, { recursive: true, force: true });
}

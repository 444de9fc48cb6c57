/**
 * `npm run soak [-- --duration 10m --ttl 10 --max-rss-mb 512 --json report.json]` — the
 * service as it runs scaled out, under mixed load and breakage, for a while (docs/operators/soak.md).
 *
 * Starts three instances of the service (its build, `dist/main.js`, made first if the sources
 * changed since the last one; each its own process) on one sqld
 * (tools/sqld's binary) and one redis-server, all on 127.0.0.1, and drives them through the
 * public API only (scripts/soak-load.ts): agents over REST and over MCP, devices on wake
 * sockets (the device SDK) and polling, the owner on the event stream, and three webhook
 * receivers (one steady, one that refuses some deliveries, one that leaves some hanging).
 * Meanwhile, on a schedule, it SIGKILLs an instance and starts it again, restarts Redis and
 * restarts sqld (both killed, so nothing is flushed on the way out).
 *
 * When the load ends it lets every action reach its end (the TTL, then the expiry sweep)
 * and every webhook drain, then checks:
 *   - every acknowledged action ended in a terminal state, and the journal shows it reaching
 *     no more than one terminal state;
 *   - no action was handed out twice (counted at the devices, on the wire);
 *   - every journal event a webhook subscribed to reached its receiver at least once (a
 *     webhook the service disabled is owed nothing, and the report says so);
 *   - the owner's stream never had to be reset;
 *   - each instance's RSS (VmRSS in /proc/<pid>/status, sampled every second) stayed under
 *     the bound.
 * It prints one JSON report on stdout (and to `--json`), and exits 1 when a check failed.
 * Every loop ends with the duration and after a bounded number of operations; a watchdog
 * ends the run, with exit code 3, if it overstays its time by much.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import type { Device, DeviceCredentials } from '@dfc/device';
import { startChildService, testIdentity, type ChildService } from '../test/helpers/child-service.js';
import { BuildFailed, buildIfChanged } from './build-if-changed.mjs';
import { freePort } from '../test/helpers/oauth.js';
import { startRedis } from '../test/helpers/redis.js';
import { startSqld } from '../test/helpers/sqld.js';
import {
  call,
  followJournal,
  MANIFEST,
  mcpAgent,
  pollingDevice,
  restAgent,
  sleep,
  socketDevice,
  startReceiver,
  type Acknowledged,
  type HandOuts,
  type LoopStats,
  type Pool,
  type Receiver,
} from './soak-load.js';

const USAGE = 'usage: npm run soak -- [--duration 10m|90s|600] [--ttl SECONDS] [--max-rss-mb MB] [--json FILE]';
const { values: opts } = parseArgs({
  options: {
    duration: { type: 'string', default: '10m' },
    ttl: { type: 'string', default: '10' },
    'max-rss-mb': { type: 'string', default: '512' },
    json: { type: 'string' },
  },
});

function round(mb: number): number {
  return Math.round(mb * 10) / 10;
}

/** `600`, `600s`, `10m` or `1h`: milliseconds. */
function parseDuration(text: string): number {
  const match = /^(\d+(?:\.\d+)?)(s|m|h)?$/.exec(text);
  if (!match) return NaN;
  return Number(match[1]) * { s: 1_000, m: 60_000, h: 3_600_000 }[(match[2] ?? 's') as 's' | 'm' | 'h'];
}

const DURATION_MS = parseDuration(opts.duration);
const TTL_SECONDS = Number(opts.ttl);
const MAX_RSS_MB = Number(opts['max-rss-mb']);
if (!(DURATION_MS >= 10_000) || !(TTL_SECONDS >= 1 && TTL_SECONDS <= 300) || !(MAX_RSS_MB > 0)) {
  console.error(`${USAGE}\n(--duration at least 10s, --ttl 1..300)`);
  process.exit(2);
}

// The instances run the build (test/helpers/child-service.ts): the current sources', as `npm start` runs them.
try {
  buildIfChanged('npm run soak');
} catch (error) {
  if (!(error instanceof BuildFailed)) throw error;
  console.error(error.message);
  process.exit(error.status);
}

const INSTANCES = 3;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired', 'rejected']);
/** A delivery's timeout; the slow receiver holds its hanging answers twice as long. */
const WEBHOOK_TIMEOUT_SECONDS = 1;
const WEBHOOK_EVENTS = ['action.created', 'action.updated'];
/** After the load: the TTL for the last actions, then this for sweeps, reports and webhook retries. */
const SETTLE_MS = 60_000;

// One breakage every fifth of the run (at most a minute apart), rotating through the kinds,
// the last one well before the load ends so the run also shows recovery.
const CHAOS_EVERY_MS = Math.min(60_000, Math.max(5_000, DURATION_MS / 5));

const started = Date.now();
const watchdog = setTimeout(
  () => {
    console.error('soak: overran its time; stopping');
    void cleanUp().finally(() => process.exit(3));
  },
  DURATION_MS + SETTLE_MS + TTL_SECONDS * 1000 + 180_000,
);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-soak-'));
const identity = await testIdentity(dir);
const sqld = await startSqld();
const redis = await startRedis();

const ENV: Record<string, string> = {
  ...identity.env,
  DATABASE_URL: sqld.url,
  REDIS_URL: redis.url,
  // The receivers listen on loopback over http: the test-only switch admits them.
  OAUTH_CIMD_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_SECONDS: '0.5',
  WEBHOOK_TIMEOUT_SECONDS: String(WEBHOOK_TIMEOUT_SECONDS),
  WEBHOOK_RETRY_SECONDS: '1,1,2,2,3,3,5,5,5,5',
  // One workspace, three receivers, about 50 events a second each: with the default caps (2
  // attempts in flight per webhook, 4 per workspace) the receiver that hangs one attempt in ten
  // for a whole timeout can take only about 19 a second, and its backlog would outlast the
  // settling. The soak checks that every event arrives through kills and restarts, not the
  // fairness caps, which test/events/webhooks.test.ts covers (docs/owners/webhooks.md "Fair delivery between workspaces").
  WEBHOOK_MAX_IN_FLIGHT_PER_WEBHOOK: '8',
  WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '16',
  EXPIRY_SWEEP_SECONDS: '1',
  EVENTS_POLL_SECONDS: '1',
  DEVICE_QUEUE_PER_PRINCIPAL: '100000',
  WORKSPACE_MAX_QUEUED_ACTIONS: '100000',
};

interface RssLife {
  instance: number;
  pid: number;
  samples: number;
  firstMb: number;
  maxMb: number;
  lastMb: number;
}

interface Instance {
  index: number;
  port: number;
  child: ChildService | undefined;
  lives: RssLife[];
}

const instances: Instance[] = [];
for (let index = 0; index < INSTANCES; index += 1) instances.push({ index, port: await freePort(), child: undefined, lives: [] });

async function startInstance(instance: Instance): Promise<void> {
  instance.child = await startChildService({ ...ENV, PORT: String(instance.port) });
  instance.lives.push({ instance: instance.index, pid: instance.child.process.pid!, samples: 0, firstMb: 0, maxMb: 0, lastMb: 0 });
}

async function killInstance(instance: Instance): Promise<void> {
  const child = instance.child;
  instance.child = undefined;
  if (!child || child.process.exitCode !== null || child.process.signalCode !== null) return;
  child.process.kill('SIGKILL');
  await child.exited;
}

const receivers: Receiver[] = [];
const socketDevices: Device[] = [];
let sampler: NodeJS.Timeout | undefined;

/** Stops everything the soak started: devices, receivers, instances, Redis, sqld, temp files. */
async function cleanUp(): Promise<void> {
  clearInterval(sampler);
  await Promise.allSettled(socketDevices.map((device) => device.stop()));
  await Promise.allSettled(receivers.map((receiver) => receiver.close()));
  for (const instance of instances) await killInstance(instance);
  await redis.stop();
  await sqld.stop();
  fs.rmSync(dir, { recursive: true, force: true });
  fs.rmSync(sqld.dir, { recursive: true, force: true });
}

// Ctrl-C, or a CI runner giving up: what the soak started must not outlive it.
for (const signal of ['SIGINT', 'SIGTERM'] as const) {
  process.once(signal, () => {
    console.error(`soak: ${signal}; stopping`);
    void cleanUp().finally(() => process.exit(130));
  });
}

let exitCode = 1;
try {
  // One after the other: the first brings the schema up to date.
  for (const instance of instances) await startInstance(instance);

  const pool: Pool = {
    pick() {
      const up = instances.filter((i) => i.child);
      const instance = up[Math.floor(Math.random() * up.length)] ?? instances[0]!;
      return `http://127.0.0.1:${instance.port}`;
    },
  };

  function readRssMb(pid: number): number | undefined {
    try {
      const line = fs
        .readFileSync(`/proc/${pid}/status`, 'utf8')
        .split('\n')
        .find((l) => l.startsWith('VmRSS:'));
      return line ? Number(line.split(/\s+/)[1]) / 1024 : undefined;
    } catch {
      return undefined;
    }
  }

  sampler = setInterval(() => {
    for (const instance of instances) {
      const life = instance.lives.at(-1);
      if (!instance.child || !life) continue;
      const mb = readRssMb(life.pid);
      if (mb === undefined) continue;
      if (life.samples === 0) life.firstMb = mb;
      life.samples += 1;
      life.maxMb = Math.max(life.maxMb, mb);
      life.lastMb = mb;
    }
  }, 1_000);

  // ---------------------------------------------------------------------------------------
  // The world: an owner, agents, devices, grants, webhooks
  // ---------------------------------------------------------------------------------------

  let ownerToken = { value: '', until: 0 };
  async function owner(): Promise<string> {
    if (Date.now() > ownerToken.until) ownerToken = { value: await identity.ownerToken('soak-owner'), until: Date.now() + 30 * 60_000 };
    return ownerToken.value;
  }

  /** A setup-phase request: the world is built before any breakage, so anything but `expected` is fatal. */
  async function must(method: 'GET' | 'POST', route: string, token: string, body: unknown, expected: number) {
    const res = await call(pool.pick(), method, route, token, body);
    if (res.status !== expected) throw new Error(`${method} ${route} answered ${res.status}: ${JSON.stringify(res.body)}`);
    return res.body.data;
  }

  async function attach(name: string): Promise<DeviceCredentials> {
    const setup = await must('POST', '/v1/device-setup-tokens', await owner(), { name: `setup ${name}` }, 201);
    const attached = await must('POST', '/v1/sdk/devices', setup.token, { name }, 201);
    return { deviceId: attached.device.id, token: attached.token, workspace: attached.workspace };
  }

  const socketCredentials = [await attach('socket 1'), await attach('socket 2'), await attach('socket 3')];
  const pollingCredentials = [await attach('poller 1'), await attach('poller 2')];
  for (const credentials of pollingCredentials) {
    await must('POST', `/v1/device/${credentials.deviceId}/manifest`, credentials.token, MANIFEST, 200);
  }

  const handOuts: HandOuts = new Map();
  socketDevices.push(...socketCredentials.map((credentials) => socketDevice(pool, credentials, handOuts)));
  await Promise.all(socketDevices.map((device) => device.start()));

  const deviceIds = [...socketCredentials, ...pollingCredentials].map((c) => c.deviceId);
  const agents: { via: 'rest' | 'mcp'; token: string }[] = [];
  for (const via of ['rest', 'rest', 'mcp', 'mcp'] as const) {
    const agent = await must('POST', '/v1/agent-connections', await owner(), { name: `${via} agent ${agents.length + 1}`, access: 'act' }, 201);
    for (const deviceId of deviceIds)
      await must('POST', '/v1/grants', await owner(), { principal: agent.principal, deviceId, capabilities: ['set_level'] }, 201);
    agents.push({ via, token: agent.token });
  }

  receivers.push(await startReceiver('steady', 0), await startReceiver('flaky', 0), await startReceiver('slow', WEBHOOK_TIMEOUT_SECONDS * 2_000));
  const webhooks: { id: string; receiver: Receiver }[] = [];
  for (const receiver of receivers) {
    const webhook = await must('POST', '/v1/webhooks', await owner(), { url: receiver.url, events: WEBHOOK_EVENTS, description: `soak ${receiver.name}` }, 201);
    webhooks.push({ id: webhook.id, receiver });
  }

  // The journal from here on: every event the webhooks subscribed to is among them.
  const journal = await followJournal(pool, owner);

  // ---------------------------------------------------------------------------------------
  // Load and breakage
  // ---------------------------------------------------------------------------------------

  const loadStarted = Date.now();
  const loadUntil = loadStarted + DURATION_MS;
  const acked: Acknowledged = new Map();
  const agentStats: Record<string, LoopStats> = {};
  const agentLoops = agents.map(({ via, token }, n) => {
    const stats: LoopStats = (agentStats[`${via}-${n + 1}`] = { ok: 0, failed: 0 });
    return via === 'rest' ? restAgent(pool, token, deviceIds, loadUntil, TTL_SECONDS, acked, stats) : mcpAgent(pool, token, deviceIds, loadUntil, acked, stats);
  });
  const pollerStats: LoopStats = { ok: 0, failed: 0 };
  // The devices keep working past the load, so the last commands can still be done.
  const devicesUntil = loadUntil + TTL_SECONDS * 1000 + 5_000;
  const pollers = pollingCredentials.map((credentials) => pollingDevice(pool, credentials, devicesUntil, handOuts, pollerStats));

  const chaos: { at: number; what: string; tookMs: number }[] = [];
  const chaosLoop = (async () => {
    const kinds = ['kill-instance', 'restart-redis', 'restart-sqld'] as const;
    for (let n = 1; loadStarted + n * CHAOS_EVERY_MS <= loadUntil - CHAOS_EVERY_MS / 2; n += 1) {
      await sleep(loadStarted + n * CHAOS_EVERY_MS - Date.now());
      const kind = kinds[(n - 1) % kinds.length]!;
      const began = Date.now();
      let what: string = kind;
      if (kind === 'kill-instance') {
        const instance = instances[Math.floor((n - 1) / kinds.length) % INSTANCES]!;
        what = `kill-instance-${instance.index}`;
        await killInstance(instance);
        await sleep(1_000);
        await startInstance(instance);
      } else {
        const server = kind === 'restart-redis' ? redis : sqld;
        await server.stop();
        await sleep(1_000);
        await server.start();
      }
      chaos.push({ at: Math.round((began - loadStarted) / 1000), what, tookMs: Date.now() - began });
    }
  })();

  await Promise.all([...agentLoops, chaosLoop]);

  // ---------------------------------------------------------------------------------------
  // Settling: every action to its end, every webhook drained
  // ---------------------------------------------------------------------------------------

  /** Every action of the workspace, as the service has it now. */
  async function exportActions(): Promise<Map<string, string>> {
    const res = await call(pool.pick(), 'GET', '/v1/actions/export', await owner());
    if (res.status !== 200) throw new Error(`export answered ${res.status}`);
    return new Map((res.body.data.actions as { id: string; status: string }[]).map((a) => [a.id, a.status]));
  }

  const settleUntil = Date.now() + TTL_SECONDS * 1000 + SETTLE_MS;
  let final = new Map<string, string>();
  for (;;) {
    final = await exportActions().catch(() => final);
    const open = [...acked.keys()].filter((id) => !TERMINAL.has(final.get(id) ?? ''));
    if (open.length === 0 || Date.now() > settleUntil) break;
    await sleep(2_000);
  }
  await Promise.all(pollers);
  await Promise.all(socketDevices.map((device) => device.stop()));

  /** A webhook the service stopped sending to is owed nothing (another part of the service decides that). */
  function isDisabled(record: Record<string, unknown>): boolean {
    return record.revoked === true || record.disabled === true || (record.disabledAt ?? null) !== null || record.status === 'disabled';
  }

  function owedEvents(): Map<string, Set<string>> {
    const owed = new Map<string, Set<string>>();
    for (const { receiver } of webhooks) {
      owed.set(receiver.name, new Set([...journal.events.values()].filter((e) => WEBHOOK_EVENTS.includes(e.type)).map((e) => e.id)));
    }
    return owed;
  }

  function missingFor(receiver: Receiver, owed: Set<string>): string[] {
    const got = new Set(receiver.delivered.values());
    return [...owed].filter((id) => !got.has(id));
  }

  const disabled = new Set<string>();
  for (;;) {
    await sleep(2_000);
    for (const { id, receiver } of webhooks) {
      const record = await call(pool.pick(), 'GET', `/v1/webhooks/${id}`, await owner()).catch(() => undefined);
      if (record?.status === 200 && isDisabled(record.body.data)) disabled.add(receiver.name);
    }
    const owed = owedEvents();
    const pending = webhooks.filter(({ receiver }) => !disabled.has(receiver.name) && missingFor(receiver, owed.get(receiver.name)!).length > 0);
    if (pending.length === 0 || Date.now() > settleUntil + SETTLE_MS) break;
  }
  await journal.stop();

  // ---------------------------------------------------------------------------------------
  // Checks and report
  // ---------------------------------------------------------------------------------------

  const terminalSeen = new Map<string, Set<string>>();
  for (const event of journal.events.values()) {
    if (event.actionId && event.status && TERMINAL.has(event.status)) {
      terminalSeen.set(event.actionId, (terminalSeen.get(event.actionId) ?? new Set()).add(event.status));
    }
  }
  const notTerminal = [...acked.keys()].filter((id) => !TERMINAL.has(final.get(id) ?? ''));
  const twoTerminals = [...terminalSeen].filter(([id, statuses]) => acked.has(id) && (statuses.size > 1 || (final.has(id) && !statuses.has(final.get(id)!))));
  const handedTwice = [...handOuts].filter(([, count]) => count > 1);
  const owed = owedEvents();
  const webhookReport = webhooks.map(({ id, receiver }) => {
    const missing = disabled.has(receiver.name) ? [] : missingFor(receiver, owed.get(receiver.name)!);
    return {
      receiver: receiver.name,
      webhookId: id,
      disabledByService: disabled.has(receiver.name),
      owed: disabled.has(receiver.name) ? 0 : owed.get(receiver.name)!.size,
      delivered: new Set(receiver.delivered.values()).size,
      attempts: receiver.attempts,
      refused: receiver.refused,
      hung: receiver.hung,
      conflictingIds: receiver.conflictingIds,
      missing: missing.length,
      missingSample: missing.slice(0, 5),
    };
  });
  const rss = instances
    .flatMap((instance) => instance.lives)
    .map((life) => ({ ...life, firstMb: round(life.firstMb), maxMb: round(life.maxMb), lastMb: round(life.lastMb) }));
  const byStatus: Record<string, number> = {};
  for (const id of acked.keys()) byStatus[final.get(id) ?? 'missing'] = (byStatus[final.get(id) ?? 'missing'] ?? 0) + 1;

  const checks = {
    everyAcknowledgedActionTerminal: { ok: notTerminal.length === 0, failures: notTerminal.length, sample: notTerminal.slice(0, 5) },
    noActionWithTwoTerminalStates: {
      ok: twoTerminals.length === 0,
      failures: twoTerminals.length,
      sample: twoTerminals.slice(0, 5).map(([id, s]) => ({ id, statuses: [...s] })),
    },
    noActionHandedOutTwice: { ok: handedTwice.length === 0, failures: handedTwice.length, sample: handedTwice.slice(0, 5) },
    everyWebhookEventDelivered: {
      ok: webhookReport.every((w) => w.missing === 0 && w.conflictingIds === 0),
      failures: webhookReport.reduce((n, w) => n + w.missing + w.conflictingIds, 0),
    },
    ownerStreamNeverReset: { ok: journal.resets === 0, failures: journal.resets },
    rssBounded: { ok: rss.every((life) => life.maxMb <= MAX_RSS_MB), limitMb: MAX_RSS_MB, maxMb: Math.max(0, ...rss.map((life) => life.maxMb)) },
    someLoadAndBreakage: {
      ok: acked.size > 0 && handOuts.size > 0 && chaos.length > 0 && webhookReport.some((w) => w.delivered > 0),
    },
  };
  const ok = Object.values(checks).every((check) => check.ok);
  const report = {
    ok,
    durationSeconds: DURATION_MS / 1000,
    wallSeconds: Math.round((Date.now() - started) / 1000),
    instances: INSTANCES,
    ttlSeconds: TTL_SECONDS,
    chaos,
    actions: {
      acknowledged: acked.size,
      viaRest: [...acked.values()].filter((v) => v === 'rest').length,
      viaMcp: [...acked.values()].filter((v) => v === 'mcp').length,
      byFinalStatus: byStatus,
      handedOut: handOuts.size,
      agents: agentStats,
      pollingDeviceReports: pollerStats,
    },
    journal: { events: journal.events.size, reconnects: journal.reconnects, resets: journal.resets },
    webhooks: webhookReport,
    rss,
    checks,
  };

  const text = JSON.stringify(report, null, 2);
  if (opts.json) fs.writeFileSync(opts.json, `${text}\n`);
  console.log(text);
  exitCode = ok ? 0 : 1;
} catch (error) {
  console.error(`soak: stopped by an error: ${(error as Error).stack ?? String(error)}`);
} finally {
  await cleanUp();
  clearTimeout(watchdog);
}
process.exit(exitCode);

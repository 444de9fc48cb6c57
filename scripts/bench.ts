/**
 * `npm run bench` — the performance benchmark of docs/performance.md (not a test). One run
 * reports every figure next to its baseline measured in the same run, as a table and as JSON:
 *
 *   1. GET /healthz rate at the round-trip phase's concurrency (autocannon): the ceiling; and
 *      the same on a bare node:http server answering the same JSON (scripts/bench-bare-server.ts),
 *      whose share is the cost of the service's per-request HTTP layer, and on Hono alone with
 *      no middleware, whose share is what the framework costs by itself.
 *   2. Full action round trips per second with 100 simulated devices on wake WebSockets:
 *      agent MCP `tools/call` (which waits) → wake frame → device `next` → device `result`
 *      → the call returns `succeeded`. Three HTTP requests, so the ideal is healthz ÷ 3.
 *      The same over REST (request, next, result, then the agent's GET: four requests).
 *   3. Wake latency queue → frame received, and request → result, p50/p99, under that
 *      load and one at a time.
 *   3a. MCP task mode (docs/agents/tasks.md): the same round trip with the call answering a task
 *      at once and the agent told of its result on `subscriptions/listen` (four requests, one a
 *      stream), as a multiple of phase 2's cost; and `tasks/get` against `get_action`.
 *   4. `tools/list` p50 for a principal with 1,000 granted functions, as a multiple of the
 *      /healthz round trip, both sequential on the same keep-alive connection.
 *   5. The floor: the same round trip on a bare node:http + libSQL server doing only the
 *      three authenticated POSTs and three durable writes (scripts/bench-floor-server.ts),
 *      and the tools/list answer's size from memory on it. It tells how much of the gap to
 *      the ideal is the machine and how much is the service's own code.
 *   6. Server RSS with 10,000 idle device WebSockets (a fresh server process).
 *   7. Wake latency queue → frame with 1,000 device wake sockets under load (a fresh server
 *      process): the REST round trip of phase 2, driven by as many agent loops as phase 2
 *      has (`--devices`), each taking its turn over its share of the 1,000 devices, so every
 *      socket is woken; the target is p99 < 10 ms (docs/performance.md).
 *   8. Device state (`--only state`, not in the default set; scripts/bench-state.ts): 1,000
 *      devices (`--state-devices`) each reporting a changed value once a second on one
 *      instance, one agent following every device on subscriptions/listen streams: reports
 *      per second, report p99 and report → notification p99, beside the floor's reports at
 *      the same rate (a token lookup and one upsert on bare node:http + libSQL).
 *
 * The service runs as it ships: the bench builds it first (`npm run build`, what `npm start`
 * and the image run) and its server process loads `dist/`, the tsc output, not `src/` through
 * tsx, whose esbuild output names every closure it creates (`__name`, about 1 % of an MCP
 * round trip). The bare, Hono-alone and floor servers are small scripts run through tsx.
 *
 * The server runs in a child process (scripts/bench-server.ts) on a temp libSQL file; with
 * `taskset` present the server is pinned to core 0 and this load generator to core 1, so
 * neither starves the other. Rate limits and the workspace device cap are raised through the
 * environment (the bench measures the service, not its limiter).
 *
 *   npm run bench [-- --duration 8 --devices 100 --workspaces 1 --sockets 10000 --wake-sockets 1000 --profile --no-pin --only healthz,mcp,tasks,rest,tools,floor,sockets,wake,state --state-devices 1000 --json out.json --log-level info]
 *   npm run bench -- --database sqld [--instances 2[,3]] [--transport ws|http] [--only mcp,rest] [--workspaces 10 --devices 20] [--warm-up 1.5] [--instance-cpu 0.3]
 *
 * `--conditions` gives every bench grant all three grant conditions (docs/owners/grants.md
 * "Conditions"), each one that every request passes (an argument bound, a schedule open all week,
 * a budget no run spends), so the round trips show what checking them costs.
 *
 * `--env KEY=VALUE,…` starts every server process with those settings too (for instance
 * `--env WEBHOOK_POLL_SECONDS=3600,EXPIRY_SWEEP_SECONDS=3600` to see what the pollers cost).
 *
 * `--workspaces` W spreads the round-trip phases (MCP, task mode, REST, on embedded and on
 * sqld) over W workspaces, each with its own owner, agent connection and grants and
 * `--devices` devices: `--workspaces 10 --devices 20` is 200 devices and 200 agent loops,
 * each loop acting in its own device's workspace. The default, one workspace, is the load
 * every other figure of docs/performance.md was measured with.
 *
 * `--database sqld` adds, after the embedded phases (the baseline of the same run), the MCP
 * and REST round trips on a real libSQL server (tools/sqld, a fresh data folder, started by
 * this script on the server's core), first with one instance of the service, then with
 * `--instances` N (default 2; a list such as `2,3` measures each in turn) on the same sqld. `--transport` picks how the service reaches
 * sqld: `ws` (DATABASE_URL `ws://`, the Hrana WebSocket transport, the default) or `http`.
 * Every instance runs on the server's core, so N instances have the CPU of one: the ratio
 * says what sharing one database across processes costs, not what more cores would add.
 * `--instance-cpu` C asks the other question, whether an instance adds capacity: every
 * server process (the embedded baseline's too) gets a CPU budget of its own, C of a core (a
 * cgroup quota, scripts/bench-cpu-budget.ts; needs root), and sqld moves to this generator's
 * core, which it shares with the generator: a database with CPU apart from the instances', as
 * in a deployment of several instances. The budgets of the largest count must fit in one core.
 * Without a shared bus, a wake or an MCP call's result reaches only the instance where it
 * happened, so each device's wake socket, `next` and `result` and its agent's requests go
 * to the same instance (device i to instance i mod N); `instanceEnv` is where a bus's URL
 * would be given to every instance for a run that spreads them.
 *
 * `--log-level` (default `silent`) makes the server write its log lines to this process's
 * stdout, so the cost of logging can be measured: run it with stdout piped (`| cat >/dev/null`),
 * as a container's log driver would read it.
 *
 * `--profile` records a V8 CPU profile of the server during each measured phase
 * (profiles/<phase>.cpuprofile; summarise with scripts/profile-summary.ts). Profiling slows
 * the server: figures of a profiled run are not the benchmark's.
 */
import { spawn, execFileSync, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import autocannon from 'autocannon';
import { Agent, Client, request as undiciRequest } from 'undici';
import { WebSocket } from 'ws';
import { signDevelopmentSession } from '../src/auth/owner.js';
import { parseConfig } from '../src/config.js';
import { measuringEnv } from './measuring-env.js';
import { taskGetAgainstGetAction, taskRoundTrip } from './bench-tasks.js';
import { databaseWindow, startBenchSqld, type DatabaseFigures } from './bench-sqld.js';
import { MODERN, mcpHeaders } from './bench-mcp-headers.js';
import { cpuBudget } from './bench-cpu-budget.js';
import { stateBench, stateRows, type StateFigures } from './bench-state.js';

const { values: opts } = parseArgs({
  options: {
    duration: { type: 'string', default: '8' },
    'warm-up': { type: 'string', default: '1.5' },
    devices: { type: 'string', default: '100' },
    sockets: { type: 'string', default: '10000' },
    'wake-sockets': { type: 'string', default: '1000' },
    functions: { type: 'string', default: '1000' },
    'state-devices': { type: 'string', default: '1000' },
    profile: { type: 'boolean', default: false },
    'no-pin': { type: 'boolean', default: false },
    only: { type: 'string' },
    json: { type: 'string' },
    'log-level': { type: 'string', default: 'silent' },
    database: { type: 'string', default: 'embedded' },
    instances: { type: 'string', default: '2' },
    transport: { type: 'string', default: 'ws' },
    workspaces: { type: 'string', default: '1' },
    env: { type: 'string', default: '' },
    'instance-cpu': { type: 'string' },
    'service-dir': { type: 'string' },
    'no-build': { type: 'boolean', default: false },
    conditions: { type: 'boolean', default: false },
  },
});

/** `--conditions`: what the bench grants carry, each condition one that every request passes. */
const GRANT_CONDITIONS = opts.conditions
  ? {
      conditions: {
        arguments: { on: { enum: [true, false] } },
        schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri', 'sat', 'sun'], from: '00:00', to: '00:00' }] },
        budget: { max: 100_000, perSeconds: 3600 },
      },
    }
  : {};
if (
  !['embedded', 'sqld'].includes(opts.database) ||
  !['ws', 'http'].includes(opts.transport) ||
  !opts.instances.split(',').every((n) => Number.isInteger(Number(n)) && Number(n) >= 1) ||
  !Number.isInteger(Number(opts.workspaces)) ||
  !(Number(opts.workspaces) >= 1) ||
  !(Number(opts['warm-up']) >= 0) ||
  (opts['instance-cpu'] !== undefined && !(Number(opts['instance-cpu']) > 0 && Number(opts['instance-cpu']) <= os.cpus().length)) ||
  !opts.env.split(',').every((pair) => pair === '' || /^[A-Z][A-Z0-9_]*=/.test(pair))
) {
  console.error(
    'usage: npm run bench -- [--database embedded|sqld] [--instances N>=1[,M…]] [--transport ws|http] [--workspaces N>=1] [--warm-up SECONDS] [--instance-cpu CORES] [--env KEY=VALUE,…]',
  );
  process.exit(2);
}
/** The instance counts measured after one instance on sqld (`--instances 2,3`: each in turn). */
const INSTANCES = opts.instances
  .split(',')
  .map(Number)
  .filter((n) => n > 1);
const DURATION_S = Number(opts.duration);
/** `--instance-cpu`: the CPU each server process may use, in cores (a cgroup quota), or undefined for no limit. */
const INSTANCE_CPU = opts['instance-cpu'] === undefined ? undefined : Number(opts['instance-cpu']);
/** How long each round-trip phase runs before its measured window (a fresh instance runs unoptimised code at first). */
const WARM_UP_MS = Number(opts['warm-up']) * 1000;
/** Devices in each workspace of the round-trip phases' fleet; WORKSPACES of them. */
const DEVICES = Number(opts.devices);
const WORKSPACES = Number(opts.workspaces);
/** The round-trip phases' devices, and agent loops, over all workspaces. */
const FLEET_DEVICES = DEVICES * WORKSPACES;
const FLEET_LABEL = WORKSPACES === 1 ? `${DEVICES} devices` : `${WORKSPACES} workspaces × ${DEVICES} devices`;
const SOCKETS = Number(opts.sockets);
const WAKE_SOCKETS = Number(opts['wake-sockets']);
const FUNCTIONS = Number(opts.functions);
const PHASES = new Set((opts.only ?? 'healthz,mcp,tasks,rest,tools,floor,sockets,wake').split(','));
const ROOT = path.resolve(import.meta.dirname, '..');
/** `--env`: settings every server process of the run gets on top of the measuring environment. */
const EXTRA_ENV = Object.fromEntries(
  opts.env
    .split(',')
    .filter(Boolean)
    .map((pair) => [pair.slice(0, pair.indexOf('=')), pair.slice(pair.indexOf('=') + 1)]),
);
/**
 * `--service-dir`: the checkout whose build the service's server process loads (its dist/ and
 * node_modules; the load generator and the other servers stay this checkout's), so the same
 * phases measure an earlier commit (`npm run bench:compare`). `--no-build`: it is built already.
 */
const SERVICE_DIR = path.resolve(opts['service-dir'] ?? ROOT);
// The service runs as it ships, from the tsc build (see above); the build is incremental.
if (!opts['no-build']) execFileSync('npm', ['run', '-s', 'build'], { cwd: SERVICE_DIR, stdio: 'inherit' });

const hasTaskset =
  !opts['no-pin'] &&
  os.cpus().length >= 2 &&
  (() => {
    try {
      execFileSync('taskset', ['-V'], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();
if (hasTaskset) execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
// Every budgeted instance runs on the server's core: their budgets together must fit in it,
// or they are not CPU of their own.
const MOST_INSTANCES = opts.database === 'sqld' ? Math.max(1, ...INSTANCES) : 1;
if (INSTANCE_CPU !== undefined && hasTaskset && MOST_INSTANCES * INSTANCE_CPU > 1) {
  console.error(`--instance-cpu ${INSTANCE_CPU} × ${MOST_INSTANCES} instances is more than the server's one core`);
  process.exit(2);
}

// ---------------------------------------------------------------------------------------
// Server child process
// ---------------------------------------------------------------------------------------

interface ServerProcess {
  url: string;
  pid: number;
  /** The child's `ready` message (the floor server sends its credentials in it). */
  ready: Record<string, any>;
  config: ReturnType<typeof parseConfig>;
  ask<T>(message: Record<string, unknown>): Promise<T>;
  stop(): Promise<void>;
}

const tempDirs: string[] = [];
/** Servers and sqld still running: a run that fails or is stopped kills them as it exits, so none lives on to load the next run's cores. */
const liveChildren = new Set<ChildProcess>();
process.on('exit', () => {
  for (const child of liveChildren) child.kill('SIGKILL');
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
});
// A signal sent to this process alone (`kill <pid>`) would otherwise end it without the handler above.
for (const [signal, code] of [
  ['SIGINT', 130],
  ['SIGTERM', 143],
] as const)
  process.once(signal, () => process.exit(code));
/** Tracks a child until it exits, for the exit handler above. */
function tracked(child: ChildProcess): void {
  liveChildren.add(child);
  child.once('exit', () => liveChildren.delete(child));
}

async function startServer(extraEnv: Record<string, string> = {}, script = 'scripts/bench-server.ts'): Promise<ServerProcess> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-bench-'));
  tempDirs.push(dir);
  const env: Record<string, string> = {
    ...measuringEnv(dir),
    LOG_LEVEL: opts['log-level'],
    ...(script === 'scripts/bench-server.ts' ? { BENCH_SERVICE_DIR: SERVICE_DIR } : {}),
    ...EXTRA_ENV,
    ...extraEnv,
  };
  const nodeArgs = ['--expose-gc', '--import', 'tsx', path.join(ROOT, script)];
  const pinnedArgv = hasTaskset ? ['taskset', '-c', '0', process.execPath, ...nodeArgs] : [process.execPath, ...nodeArgs];
  const budget = INSTANCE_CPU === undefined ? undefined : cpuBudget(INSTANCE_CPU);
  const [command, args] = budget ? budget.wrap(pinnedArgv) : [pinnedArgv[0]!, pinnedArgv.slice(1)];
  const child: ChildProcess = spawn(command, args, {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  tracked(child);
  const waiting = new Map<string, (message: any) => void>();
  child.on('message', (message: any) => {
    const resolve = waiting.get(message.type);
    waiting.delete(message.type);
    resolve?.(message);
  });
  const next = <T>(type: string) => new Promise<T>((resolve) => waiting.set(type, resolve));
  const ready = await Promise.race([
    next<{ url: string; pid: number } & Record<string, any>>('ready'),
    new Promise<never>((_, reject) => child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)))),
  ]);
  return {
    url: ready.url,
    pid: ready.pid,
    ready,
    config: parseConfig(env),
    ask<T>(message: Record<string, unknown>) {
      const answer = next<T>(message.type as string);
      child.send(message);
      return answer;
    },
    async stop() {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.send({ type: 'stop' });
      await exited;
      budget?.remove();
    },
  };
}

// ---------------------------------------------------------------------------------------
// HTTP helpers (undici: a much lighter client than fetch, so the generator is not the limit)
// ---------------------------------------------------------------------------------------

const dispatcher = new Agent({ connections: 512, keepAliveTimeout: 30_000, pipelining: 1 });

async function call(base: string, method: 'GET' | 'POST', route: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const response = await undiciRequest(`${base}${route}`, {
    method,
    dispatcher,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}), ...headers },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await response.body.json()) as { data?: unknown; error?: unknown };
  if (response.statusCode >= 300) throw new Error(`${method} ${route} → ${response.statusCode} ${JSON.stringify(json)}`);
  return json.data;
}

const META = { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} };
let rpcId = 0;

function mcpBody(method: string, params: Record<string, unknown> = {}): string {
  return JSON.stringify({ jsonrpc: '2.0', id: ++rpcId, method, params: { ...params, _meta: META } });
}

/** The JSON-RPC message of a JSON answer, or the last one of an event stream. */
function rpcMessage(contentType: string | undefined, text: string): any {
  if (contentType?.includes('text/event-stream')) {
    const frames = text.split('\n').filter((line) => line.startsWith('data:'));
    return JSON.parse(frames.at(-1)!.slice(5));
  }
  return JSON.parse(text);
}

async function mcpCall(base: string, token: string, tool: string, args: Record<string, unknown>): Promise<any> {
  const response = await undiciRequest(`${base}/mcp`, {
    method: 'POST',
    dispatcher,
    headers: mcpHeaders(token, 'tools/call', tool),
    body: mcpBody('tools/call', { name: tool, arguments: args }),
  });
  const text = await response.body.text();
  if (response.statusCode !== 200) throw new Error(`tools/call ${tool} → ${response.statusCode} ${text.slice(0, 300)}`);
  const message = rpcMessage(response.headers['content-type'] as string | undefined, text);
  if (message.error) throw new Error(`tools/call ${tool}: ${JSON.stringify(message.error)}`);
  return message.result.structuredContent;
}

// ---------------------------------------------------------------------------------------
// Statistics and setup
// ---------------------------------------------------------------------------------------

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

function pct(samples: number[], p: number): number {
  if (samples.length === 0) return NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
}

const r2 = (n: number) => Math.round(n * 100) / 100;

/** Runs `fn` over `items` with at most `limit` in flight. */
async function pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const index = next++;
        results[index] = await fn(items[index]!, index);
      }
    }),
  );
  return results;
}

interface BenchDevice {
  id: string;
  token: string;
  workspace: string;
  /** The token of the agent its workspace granted it to (set by `startFleet`). */
  agentToken: string;
  /** The instance this device and its agent's requests talk to. */
  base: string;
}

/** Attaches `count` devices through setup tokens of deviceLimit 20 (the contract's maximum). */
async function attachDevices(base: string, owner: string, count: number, name: string): Promise<BenchDevice[]> {
  const tokens = await pool(Array.from({ length: Math.ceil(count / 20) }), 16, () =>
    call(base, 'POST', '/v1/device-setup-tokens', owner, { name, deviceLimit: 20, ttlSeconds: 3600 }),
  );
  return pool(Array.from({ length: count }), 64, async (_, i) => {
    const attached = await call(base, 'POST', '/v1/sdk/devices', tokens[Math.floor(i / 20)].token, { name: `${name} ${i}` });
    return { id: attached.device.id, token: attached.token, workspace: attached.workspace, agentToken: '', base };
  });
}

const setPower = {
  name: 'set_power',
  kind: 'control',
  description: 'Switch the lamp on or off.',
  arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'], additionalProperties: false },
};

function toolName(capability: string, deviceId: string): string {
  return `${capability}__${deviceId.replaceAll('-', '').slice(0, 12)}`;
}

/** Opens a device's wake socket (ticket first); `onWake` gets every frame's action id. */
async function openSocket(base: string, device: BenchDevice, onWake?: (actionId: string, at: number) => void): Promise<WebSocket> {
  const { ticket } = await call(base, 'POST', `/v1/device/${device.id}/events-ticket`, device.token);
  const socket = new WebSocket(`${base.replace(/^http/, 'ws')}/v1/device/${device.id}/events?ticket=${ticket}`, { perMessageDeflate: false });
  if (onWake) {
    socket.on('message', (data) => {
      const at = nowMs();
      const frame = JSON.parse(String(data)) as { type: string; actionId: string };
      if (frame.type === 'wake') onWake(frame.actionId, at);
    });
  }
  await new Promise<void>((resolve, reject) => socket.once('open', () => resolve()).once('error', reject));
  // A socket the server drops later (its ping sweep, when this generator is starved of CPU)
  // shows in the phase's figures as wakes not seen; unheard, its error would end the run.
  socket.on('error', (error) => console.error(`bench: device socket ${device.id}: ${error.message}`));
  return socket;
}

// ---------------------------------------------------------------------------------------
// Phases
// ---------------------------------------------------------------------------------------

const results: Record<string, unknown> = {};

/**
 * Runs one measured phase, under the CPU profiler of each server when --profile is given
 * (profiles/<name>.cpuprofile; with several instances, profiles/<name>-<instance>.cpuprofile).
 */
async function phase<T>(server: ServerProcess | ServerProcess[], name: string, fn: () => Promise<T>): Promise<T> {
  const servers = Array.isArray(server) ? server : [server];
  if (!opts.profile) return fn();
  await Promise.all(servers.map((one) => one.ask({ type: 'profile-start' })));
  try {
    return await fn();
  } finally {
    const file = (i: number) => path.join(ROOT, 'profiles', `${servers.length === 1 ? name : `${name}-${i}`}.cpuprofile`);
    await Promise.all(servers.map((one, i) => one.ask({ type: 'profile-stop', file: file(i) })));
  }
}
const CONCURRENCY = FLEET_DEVICES;

/**
 * The service's /healthz rate, then the same on a bare node:http server answering the same
 * JSON (scripts/bench-bare-server.ts), then on Hono alone (the same script with one route and
 * no middleware), each pinned the same way, at the same concurrency, after its own warm-up.
 * The service's share of the bare server is what its per-request HTTP layer costs; Hono's
 * share is the part of that the framework costs by itself. Each figure comes with the
 * server's CPU time per request, which a machine shared with other work changes much less
 * than the rate.
 */
async function healthzCeiling(server: ServerProcess) {
  const seconds = Math.max(3, Math.round(DURATION_S / 2));
  const measure = async (target: ServerProcess) => {
    const run = (duration: number) =>
      autocannon({ url: `${target.url}/healthz`, connections: CONCURRENCY, pipelining: 1, duration, workers: 0 }) as Promise<autocannon.Result>;
    await run(1); // warm-up: JIT, connection set-up
    const cpuBefore = await serversCpu([target]);
    const result = await run(seconds);
    const cpu = (await serversCpu([target])) - cpuBefore;
    return {
      requestsPerSecond: Math.round(result.requests.average),
      p50Ms: result.latency.p50,
      p99Ms: result.latency.p99,
      errors: result.errors + result.non2xx,
      cpuMicrosPerRequest: r2(cpu / result.requests.total),
    };
  };
  const alone = async (framework: 'node' | 'hono') => {
    const bare = await startServer({ BARE_FRAMEWORK: framework }, 'scripts/bench-bare-server.ts');
    try {
      return await measure(bare);
    } finally {
      await bare.stop();
    }
  };
  const service = await measure(server);
  const bare = await alone('node');
  const hono = await alone('hono');
  const figure = {
    connections: CONCURRENCY,
    ...service,
    bare,
    hono,
    ratio: r2(service.requestsPerSecond / bare.requestsPerSecond),
    honoRatio: r2(hono.requestsPerSecond / bare.requestsPerSecond),
  };
  results.healthz = figure;
  return figure;
}

interface Fleet {
  devices: BenchDevice[];
  sockets: WebSocket[];
  /** Frame arrival per action id, while recording. */
  frames: Map<string, number>;
  recording: { on: boolean };
  /**
   * Resolvers of REST agents waiting for their device to report, by device id: a bench device
   * has at most one action outstanding, since each agent loop takes its own devices.
   */
  reported: Map<string, () => void>;
  /** `next` calls that found nothing (a wake frame with no command behind it). */
  emptyNexts: number;
}

/**
 * One owner session per workspace (`--workspaces`, default one): each development owner
 * subject is its own workspace.
 */
function owners(server: ServerProcess, label: string, count = WORKSPACES): Promise<string[]> {
  return Promise.all(Array.from({ length: count }, (_, w) => signDevelopmentSession(server.config, count === 1 ? label : `${label}-${w}`)));
}

/**
 * One workspace of the fleet: `count` devices, one agent connection, each device's
 * `set_power` granted to it.
 */
async function workspaceDevices(base: string, owner: string, count: number): Promise<BenchDevice[]> {
  const devices = await attachDevices(base, owner, count, 'bench lamp');
  await pool(devices, 32, (device) => call(base, 'POST', `/v1/device/${device.id}/manifest`, device.token, { capabilities: [setPower] }));
  const agent = await call(base, 'POST', '/v1/agent-connections', owner, { name: 'bench agent', access: 'act' });
  await pool(devices, 32, (device) =>
    call(base, 'POST', '/v1/grants', owner, { principal: agent.principal, deviceId: device.id, capabilities: ['set_power'], ...GRANT_CONDITIONS }),
  );
  for (const device of devices) device.agentToken = agent.token;
  return devices;
}

/**
 * `count` devices in each owner's workspace (100, `--devices`, in one workspace, for the
 * round-trip phases; `--workspaces` spreads the load over more) on wake sockets. Each wake
 * frame announces one queued action, so a device answers each frame with one `next` and its
 * `result`, frames one after another: exactly the three requests of the round trip as
 * docs/performance.md defines it (the device SDK also polls once more after a drain to be
 * sure the queue is empty; a bench device with one outstanding action at a time does not need
 * to). Empty `next` answers are counted: they should not occur.
 */
async function startFleet(servers: ServerProcess[], workspaceOwners: string[], count = DEVICES): Promise<Fleet> {
  const server = servers[0]!;
  const devices = (await pool(workspaceOwners, 4, (owner) => workspaceDevices(server.url, owner, count))).flat();
  devices.forEach((device, i) => (device.base = servers[i % servers.length]!.url));
  const fleet: Fleet = { devices, sockets: [], frames: new Map(), recording: { on: false }, reported: new Map(), emptyNexts: 0 };

  fleet.sockets = await pool(devices, 32, (device) => {
    let chain = Promise.resolve();
    const handle = async () => {
      const command = await call(device.base, 'POST', `/v1/device/${device.id}/next`, device.token, undefined, { 'x-service-workspace': device.workspace });
      if (!command) {
        fleet.emptyNexts++;
        return;
      }
      await call(device.base, 'POST', `/v1/device/${device.id}/result`, device.token, { actionId: command.id, ok: true, result: { on: command.args.on } });
      const waiting = fleet.reported.get(device.id);
      fleet.reported.delete(device.id);
      waiting?.();
    };
    return openSocket(device.base, device, (actionId, at) => {
      if (fleet.recording.on) fleet.frames.set(actionId, at);
      chain = chain.then(handle).catch((error) => console.error('device loop:', error));
    });
  });
  return fleet;
}

/** The CPU time (µs) all instances have used so far. */
async function serversCpu(servers: ServerProcess[]): Promise<number> {
  return (await serversCounters(servers)).cpu;
}

/** What all instances have done so far: CPU time (µs), event-loop sleeps, preemptions, GC pauses (ms). */
async function serversCounters(servers: ServerProcess[]): Promise<ProcessCounters> {
  type Answer = { usage: NodeJS.CpuUsage; sleeps: number; preempted: number; gcMs: number; majorGcMs: number; heapUsed: number; mainThreadMs?: number };
  const answers = await Promise.all(servers.map((server) => server.ask<Answer>({ type: 'cpu' })));
  const total = { cpu: 0, sleeps: 0, preempted: 0, gcMs: 0, majorGcMs: 0, heapUsed: 0, mainThreadMs: 0 };
  for (const { usage, sleeps, preempted, gcMs, majorGcMs, heapUsed, mainThreadMs } of answers) {
    total.mainThreadMs += mainThreadMs ?? 0;
    total.cpu += usage.user + usage.system;
    total.sleeps += sleeps;
    total.preempted += preempted;
    total.gcMs += gcMs;
    total.majorGcMs += majorGcMs;
    total.heapUsed += heapUsed;
  }
  return total;
}

interface ProcessCounters {
  cpu: number;
  sleeps: number;
  preempted: number;
  gcMs: number;
  majorGcMs: number;
  /** Summed over instances, at the moment read. */
  heapUsed: number;
  /** The main threads' CPU time (0 where /proc is not): the rest is helper threads'. */
  mainThreadMs: number;
}

/** Per round trip: service CPU (µs), event-loop sleeps and preemptions summed over instances, and the GC's share of the CPU. */
function perRoundTrip(before: ProcessCounters, after: ProcessCounters, roundTrips: number) {
  const cpu = after.cpu - before.cpu;
  return {
    cpuMicros: r2(cpu / roundTrips),
    sleeps: r2((after.sleeps - before.sleeps) / roundTrips),
    preemptions: r2((after.preempted - before.preempted) / roundTrips),
    gcShareOfCpu: r2(((after.gcMs - before.gcMs) * 1000) / cpu),
    majorGcShareOfCpu: r2(((after.majorGcMs - before.majorGcMs) * 1000) / cpu),
    heapUsedMiB: r2(after.heapUsed / 2 ** 20),
    helperThreadsShareOfCpu: r2(1 - ((after.mainThreadMs - before.mainThreadMs) * 1000) / cpu),
  };
}

/** Every instance's record of when it published each action as queued, since `since`. */
async function published(servers: ServerProcess[], since: number): Promise<[string, number][]> {
  const answers = await Promise.all(servers.map((server) => server.ask<{ entries: [string, number][] }>({ type: 'published', since })));
  return answers.flatMap(({ entries }) => entries);
}

interface LoadFigures {
  roundTripsPerSecond: number;
  completed: number;
  requestToResult: { p50Ms: number; p99Ms: number };
  wake: { p50Ms: number; p99Ms: number; samples: number };
  serverCpuPercent: number;
  generatorCpuPercent: number;
  /** Device `next` calls that found nothing during the window. */
  emptyNexts: number;
  /**
   * MCP round trips of the phase, warm-up included, whose call's wait ended before the device
   * reported, followed up with reads (only with `--instance-cpu`): each lasted over 10 s, so
   * none is among a window of 10 s or less.
   */
  followedUp: number;
  /** On sqld: the database side of the window, per round trip (scripts/bench-sqld.ts). */
  database?: DatabaseFigures;
  /** The service processes' own counters, per round trip (`perRoundTrip`). */
  service: ReturnType<typeof perRoundTrip>;
}

/** Opens a database window at the measured window's start (`databaseWindow`). */
type DatabaseProbe = () => ReturnType<typeof databaseWindow>;

/**
 * Runs `agents` agent loops (by default one per device) for the warm-up and then `seconds`,
 * counting round trips completed inside the window, and joins each wake frame's arrival with
 * the server's record of when the action was queued. Loop l takes the devices l, l + agents,
 * l + 2·agents… in turn: every device is used, and none has two actions outstanding.
 */
async function roundTripLoad(
  servers: ServerProcess[],
  fleet: Fleet,
  roundTrip: (device: BenchDevice, i: number) => Promise<void>,
  seconds: number,
  agents = fleet.devices.length,
  probe?: DatabaseProbe,
): Promise<LoadFigures> {
  let running = true;
  let windowStart = Infinity;
  let windowEnd = Infinity;
  const latencies: number[] = [];
  const shares = Array.from({ length: Math.min(agents, fleet.devices.length) }, (_, l) => fleet.devices.filter((_, d) => d % agents === l));
  const followedBefore = followedUp;
  const loops = shares.map(async (devices, l) => {
    // On a CPU budget the loops start spread over the first half of the warm-up, not all at
    // once: a cold server throttled to a fraction of a core, handed every loop's first
    // request in one burst, answers the last ones seconds late.
    if (INSTANCE_CPU !== undefined) await sleep((l / shares.length) * (WARM_UP_MS / 2));
    for (let i = 0; running; i++) {
      const t0 = nowMs();
      await roundTrip(devices[i % devices.length]!, l * 1_000_000 + i);
      const t1 = nowMs();
      if (t0 >= windowStart && t1 <= windowEnd) latencies.push(t1 - t0);
    }
  });
  await sleep(WARM_UP_MS);
  fleet.frames.clear();
  fleet.recording.on = true;
  const emptyBefore = fleet.emptyNexts;
  const countersBefore = await serversCounters(servers);
  const database = await probe?.();
  const ownBefore = process.cpuUsage();
  windowStart = nowMs();
  windowEnd = windowStart + seconds * 1000;
  await sleep(seconds * 1000);
  const countersAfter = await serversCounters(servers);
  const ownAfter = process.cpuUsage(ownBefore);
  const completedInWindow = latencies.length;
  const databaseFigures = await database?.(Math.max(1, completedInWindow));
  fleet.recording.on = false;
  running = false;
  await Promise.all(loops);
  const entries = await published(servers, windowStart);
  const wakes: number[] = [];
  for (const [actionId, queuedAt] of entries) {
    const frameAt = fleet.frames.get(actionId);
    if (frameAt !== undefined && frameAt <= windowEnd) wakes.push(frameAt - queuedAt);
  }
  const wall = seconds * 1e6;
  return {
    roundTripsPerSecond: Math.round(latencies.length / seconds),
    completed: latencies.length,
    requestToResult: { p50Ms: r2(pct(latencies, 0.5)), p99Ms: r2(pct(latencies, 0.99)) },
    wake: { p50Ms: r2(pct(wakes, 0.5)), p99Ms: r2(pct(wakes, 0.99)), samples: wakes.length },
    serverCpuPercent: Math.round(((countersAfter.cpu - countersBefore.cpu) / wall) * 100),
    generatorCpuPercent: Math.round(((ownAfter.user + ownAfter.system) / wall) * 100),
    emptyNexts: fleet.emptyNexts - emptyBefore,
    followedUp: followedUp - followedBefore,
    ...(databaseFigures ? { database: databaseFigures } : {}),
    service: perRoundTrip(countersBefore, countersAfter, Math.max(1, completedInWindow)),
  };
}

/** Round trips whose tool call's wait ended before the device reported (`mcpRoundTrip`). */
let followedUp = 0;

async function mcpRoundTrip(device: BenchDevice, i: number): Promise<void> {
  let action = await mcpCall(device.base, device.agentToken, toolName('set_power', device.id), { on: i % 2 === 0 });
  if (INSTANCE_CPU !== undefined && (action.status === 'queued' || action.status === 'received')) {
    // The call's wait (10 s) ended first, as it may on a server throttled to a small CPU
    // budget (on an unlimited one it is a fault, and ends the run below). An agent is told to
    // follow such an action up (get_action); the bench reads it over REST until it ends, no
    // more than twice a second, so the device's next round trip does not start while this one
    // is outstanding.
    followedUp++;
    while (action.status === 'queued' || action.status === 'received') {
      await sleep(500);
      action = await call(device.base, 'GET', `/v1/actions/${action.id}`, device.agentToken);
    }
  }
  if (action.status !== 'succeeded') throw new Error(`MCP round trip ended ${action.status}`);
}

function restRoundTrip(fleet: Fleet) {
  return async (device: BenchDevice, i: number) => {
    // REST has no waiting GET, so the bench device tells the agent when it has reported, and
    // the agent reads the action once: the four requests of the round trip. Registered before
    // the POST, so a report that arrives before the POST's answer is not missed.
    const reported = new Promise<void>((resolve) => fleet.reported.set(device.id, resolve));
    const queued = await call(device.base, 'POST', `/v1/devices/${device.id}/actions`, device.agentToken, {
      capability: 'set_power',
      arguments: { on: i % 2 === 0 },
    });
    await reported;
    const action = await call(device.base, 'GET', `/v1/actions/${queued.id}`, device.agentToken);
    if (action.status !== 'succeeded') throw new Error(`REST round trip ended ${action.status}`);
  };
}

/**
 * One round trip at a time on one device: latencies without queueing behind other work, and the
 * service's CPU per round trip with nothing to share it with (no group commit of other requests'
 * writes, no batch of events per wake-up). The service also spends CPU while idle (its pollers,
 * the checkpointer's timer), which one round trip at a time on a loaded machine, taking several
 * milliseconds of wall time each, would count many times over: the idle rate is measured for a
 * second first, and `service.cpuMicros` here is the CPU above it (`idleCpuPercent` says how much
 * was taken off). Unlike the loaded phases' figure it does not depend on how much load the
 * generator manages to offer (a starved generator means fewer requests per wake-up and per
 * commit, so more CPU per round trip), though a busy core still moves it.
 */
async function sequential(server: ServerProcess, fleet: Fleet, count: number, roundTrip: (device: BenchDevice, i: number) => Promise<void> = mcpRoundTrip) {
  const device = fleet.devices[0]!;
  const latencies: number[] = [];
  fleet.frames.clear();
  fleet.recording.on = true;
  const since = nowMs();
  const idleBefore = await serversCounters([server]);
  const idleStarted = nowMs();
  await sleep(1000);
  const countersBefore = await serversCounters([server]);
  const started = nowMs();
  // CPU µs per wall ms while idle.
  const idleRate = (countersBefore.cpu - idleBefore.cpu) / (started - idleStarted);
  for (let i = 0; i < count; i++) {
    const t0 = nowMs();
    await roundTrip(device, i);
    latencies.push(nowMs() - t0);
  }
  const countersAfter = await serversCounters([server]);
  const idle = idleRate * (nowMs() - started);
  fleet.recording.on = false;
  const { entries } = await server.ask<{ entries: [string, number][] }>({ type: 'published', since });
  const wakes = entries.flatMap(([id, at]) => (fleet.frames.has(id) ? [fleet.frames.get(id)! - at] : []));
  return {
    count,
    requestToResult: { p50Ms: r2(pct(latencies, 0.5)), p99Ms: r2(pct(latencies, 0.99)) },
    wake: { p50Ms: r2(pct(wakes, 0.5)), p99Ms: r2(pct(wakes, 0.99)), samples: wakes.length },
    idleCpuPercent: r2(idleRate / 10),
    service: perRoundTrip(countersBefore, { ...countersAfter, cpu: countersAfter.cpu - idle }, count),
  };
}

/** A principal granted FUNCTIONS functions (10 per device); tools/list vs /healthz, sequential on one connection. */
async function toolsList(server: ServerProcess) {
  const owner = await signDevelopmentSession(server.config, 'bench-tools');
  const perDevice = 10;
  const devices = await attachDevices(server.url, owner, Math.ceil(FUNCTIONS / perDevice), 'bench panel');
  const capabilities = Array.from({ length: perDevice }, (_, k) => ({
    name: `set_channel_${k}`,
    kind: k % 3 === 0 ? 'read' : 'control',
    description: `Channel ${k}: level and ramp time.`,
    arguments: {
      type: 'object',
      properties: { level: { type: 'integer', minimum: 0, maximum: 100, description: 'Percent.' }, rampMs: { type: 'integer', minimum: 0, maximum: 60000 } },
      required: ['level'],
      additionalProperties: false,
    },
  }));
  await pool(devices, 32, (device) => call(server.url, 'POST', `/v1/device/${device.id}/manifest`, device.token, { capabilities }));
  const agent = await call(server.url, 'POST', '/v1/agent-connections', owner, { name: 'tools agent', access: 'act' });
  await pool(devices, 32, (device) =>
    call(server.url, 'POST', '/v1/grants', owner, { principal: agent.principal, deviceId: device.id, capabilities: capabilities.map((c) => c.name) }),
  );

  const client = new Client(server.url, { pipelining: 1, keepAliveTimeout: 30_000 });
  const healthz = async () => {
    const t0 = nowMs();
    const response = await client.request({ path: '/healthz', method: 'GET' });
    await response.body.text();
    return nowMs() - t0;
  };
  let bytes = 0;
  let tools = 0;
  const list = async () => {
    const t0 = nowMs();
    const response = await client.request({ path: '/mcp', method: 'POST', headers: mcpHeaders(agent.token, 'tools/list'), body: mcpBody('tools/list') });
    // Timed to the last byte received: the server's work, not the client's decoding and parsing.
    const chunks: Buffer[] = [];
    for await (const chunk of response.body) chunks.push(chunk as Buffer);
    const elapsed = nowMs() - t0;
    const body = Buffer.concat(chunks);
    if (response.statusCode !== 200) throw new Error(`tools/list → ${response.statusCode} ${body.toString().slice(0, 300)}`);
    if (body.length !== bytes) {
      bytes = body.length;
      tools = rpcMessage(response.headers['content-type'] as string | undefined, body.toString()).result.tools.length;
    }
    return elapsed;
  };
  for (let i = 0; i < 10; i++) {
    await healthz();
    await list();
  }
  const h: number[] = [];
  const t: number[] = [];
  await phase(server, 'tools-list', async () => {
    const deadline = nowMs() + 6000;
    for (let i = 0; i < 300 && (i < 20 || nowMs() < deadline); i++) {
      h.push(await healthz());
      t.push(await list());
    }
  });
  await client.close();
  const figure = {
    functions: FUNCTIONS,
    toolsListed: tools,
    responseBytes: bytes,
    samples: t.length,
    toolsListP50Ms: r2(pct(t, 0.5)),
    toolsListP99Ms: r2(pct(t, 0.99)),
    healthzP50Ms: r2(pct(h, 0.5)),
    multiple: r2(pct(t, 0.5) / pct(h, 0.5)),
  };
  results.toolsList = figure;
  return figure;
}

/** A fresh server; SOCKETS devices attached, then RSS before and after opening one idle wake socket each. */
async function idleSockets() {
  const metricsToken = 'bench-metrics-token-0123456789';
  const server = await startServer({ METRICS_TOKEN: metricsToken });
  try {
    const owner = await signDevelopmentSession(server.config, 'bench-sockets');
    const started = nowMs();
    const devices = await attachDevices(server.url, owner, SOCKETS, 'idle lamp');
    const attachSeconds = (nowMs() - started) / 1000;
    await sleep(500);
    const before = await server.ask<{ rss: number; heapUsed: number }>({ type: 'rss' });
    const opened = nowMs();
    const sockets = await pool(devices, 128, (device) => openSocket(server.url, device));
    const openSeconds = (nowMs() - opened) / 1000;
    await sleep(1000);
    const after = await server.ask<{ rss: number; heapUsed: number }>({ type: 'rss' });
    const metrics = await (await undiciRequest(`${server.url}/metrics`, { dispatcher, headers: { authorization: `Bearer ${metricsToken}` } })).body.text();
    const open = Number(/^dfc_device_sockets_open (\d+)/m.exec(metrics)?.[1] ?? NaN);
    for (const socket of sockets) socket.terminate();
    const mb = (bytes: number) => r2(bytes / 1024 / 1024);
    const figure = {
      sockets: SOCKETS,
      serverReportsOpen: open,
      rssMb: mb(after.rss),
      rssBeforeSocketsMb: mb(before.rss),
      deltaMb: mb(after.rss - before.rss),
      perSocketKb: r2((after.rss - before.rss) / 1024 / SOCKETS),
      heapUsedMb: mb(after.heapUsed),
      attachSeconds: r2(attachSeconds),
      openSeconds: r2(openSeconds),
    };
    results.sockets = figure;
    return figure;
  } finally {
    await server.stop();
  }
}

/**
 * A fresh server; WAKE_SOCKETS devices on wake sockets (the round-trip phases' fleet, larger),
 * and the REST round trip driven by CONCURRENCY agent loops spread over all of them: the wake
 * latency queue → frame with that many sockets open under the round-trip phases' load.
 */
async function wakeUnderLoad() {
  const server = await startServer();
  try {
    const fleet = await startFleet([server], await owners(server, 'bench-wake', 1), WAKE_SOCKETS);
    const load = await phase(server, 'wake', () => roundTripLoad([server], fleet, restRoundTrip(fleet), DURATION_S, CONCURRENCY));
    for (const socket of fleet.sockets) socket.close();
    const figure = { sockets: WAKE_SOCKETS, agentLoops: Math.min(CONCURRENCY, WAKE_SOCKETS), requestsPerRoundTrip: 4, ...load };
    results.wake = figure;
    return figure;
  } finally {
    await server.stop();
  }
}

/**
 * The floor (scripts/bench-floor-server.ts): the same round trip's irreducible work on a bare
 * Node server pinned the same way, loaded the same way (one agent loop per device, the
 * device's `next` waiting for work), and the same number of bytes as the tools/list answer
 * next to that server's own /healthz. What the service reaches, as a share of this, is what
 * its own code costs; what the floor reaches, as a share of the ideal, is what the machine
 * and the durable writes cost.
 */
async function floor(bytes: number) {
  const server = await startServer({ FLOOR_DEVICES: String(FLEET_DEVICES) }, 'scripts/bench-floor-server.ts');
  try {
    const { agentToken, devices } = server.ready as { agentToken: string; devices: { id: string; token: string }[] };
    const post = async (route: string, token: string, body: unknown) => {
      const response = await undiciRequest(`${server.url}${route}`, {
        method: 'POST',
        dispatcher,
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      });
      const json = (await response.body.json()) as any;
      if (response.statusCode !== 200) throw new Error(`floor ${route} → ${response.statusCode} ${JSON.stringify(json)}`);
      return json;
    };
    const healthz = await autocannon({
      url: `${server.url}/healthz`,
      connections: CONCURRENCY,
      pipelining: 1,
      duration: Math.max(3, Math.round(DURATION_S / 2)),
      workers: 0,
    });

    let running = true;
    let counting = false;
    let completed = 0;
    const deviceLoops = devices.map(async (device) => {
      while (running) {
        const command = await post(`/next/${device.id}`, device.token, {});
        await post(`/result/${device.id}`, device.token, { actionId: command.id, ok: true, result: { on: command.args.on } });
      }
    });
    const agentLoops = devices.map(async (device, d) => {
      for (let i = 0; running; i++) {
        const action = await post(`/act/${device.id}`, agentToken, { arguments: { on: (d + i) % 2 === 0 } });
        if (action.status !== 'succeeded') throw new Error(`floor round trip ended ${action.status}`);
        if (counting) completed++;
      }
    });
    await sleep(1500);
    const cpuBefore = (await server.ask<{ usage: NodeJS.CpuUsage }>({ type: 'cpu' })).usage;
    const ownBefore = process.cpuUsage();
    counting = true;
    await sleep(DURATION_S * 1000);
    counting = false;
    const cpuAfter = (await server.ask<{ usage: NodeJS.CpuUsage }>({ type: 'cpu' })).usage;
    const ownAfter = process.cpuUsage(ownBefore);
    running = false;
    await Promise.all(agentLoops);
    // The devices' last `next` waits for work that will not come: stopping the server ends it.

    const client = new Client(server.url, { pipelining: 1, keepAliveTimeout: 30_000 });
    const timed = async (route: string) => {
      const t0 = nowMs();
      const response = await client.request({ path: route, method: 'GET' });
      for await (const _chunk of response.body);
      return nowMs() - t0;
    };
    const h: number[] = [];
    const b: number[] = [];
    for (let i = 0; i < 300; i++) {
      const [x, y] = [await timed('/healthz'), await timed(`/bytes/${bytes}`)];
      if (i >= 20) {
        h.push(x);
        b.push(y);
      }
    }
    await client.close();
    void Promise.allSettled(deviceLoops);
    const figure = {
      healthzRequestsPerSecond: Math.round(healthz.requests.average),
      roundTripsPerSecond: Math.round(completed / DURATION_S),
      serverCpuPercent: Math.round(((cpuAfter.user - cpuBefore.user + cpuAfter.system - cpuBefore.system) / (DURATION_S * 1e6)) * 100),
      generatorCpuPercent: Math.round(((ownAfter.user + ownAfter.system) / (DURATION_S * 1e6)) * 100),
      bytes,
      bytesP50Ms: r2(pct(b, 0.5)),
      healthzP50Ms: r2(pct(h, 0.5)),
      bytesMultiple: r2(pct(b, 0.5) / pct(h, 0.5)),
    };
    results.floor = figure;
    return figure;
  } finally {
    await server.stop();
  }
}

/**
 * A fresh sqld, and `count` instances of the service on it. sqld runs on the server's core
 * (the service's database shares the service's CPU, as the embedded database does), or, when
 * each instance has a CPU budget of its own (`--instance-cpu`), on the generator's core: the
 * database then has CPU apart from the instances' (shared with the generator only), as in a
 * deployment of several instances, and the server's core is left to the instances' budgets.
 */
async function onSqld(count: number) {
  const sqld = await startBenchSqld({ pinned: hasTaskset, core: INSTANCE_CPU === undefined ? 0 : 1 });
  tracked(sqld.child);
  tempDirs.push(sqld.dir);
  try {
    const databaseUrl = `${opts.transport}://127.0.0.1:${sqld.port}`;
    // One at a time: the first runs the migrations, the others find them done.
    const servers: ServerProcess[] = [];
    for (let i = 0; i < count; i++) servers.push(await startServer(instanceEnv(databaseUrl)));
    try {
      const fleet = await startFleet(servers, await owners(servers[0]!, `bench-sqld-${count}`));
      const probe = () => databaseWindow(servers, { adminUrl: sqld.adminUrl, pid: sqld.child.pid! });
      const figures: SqldFigures = { instances: count, idle: await idleCost(servers, probe) };
      const name = (kind: string) => `sqld-${count}-${kind}-round-trips`;
      if (PHASES.has('mcp'))
        figures.mcp = await phase(servers, name('mcp'), () => roundTripLoad(servers, fleet, mcpRoundTrip, DURATION_S, fleet.devices.length, probe));
      if (PHASES.has('rest'))
        figures.rest = await phase(servers, name('rest'), () =>
          roundTripLoad(servers, fleet, restRoundTrip(fleet), Math.max(3, Math.round(DURATION_S / 2)), fleet.devices.length, probe),
        );
      for (const socket of fleet.sockets) socket.close();
      return figures;
    } finally {
      await Promise.all(servers.map((server) => server.stop()));
    }
  } finally {
    await sqld.stop();
  }
}

/**
 * What the instances cost with the fleet attached and its sockets open but no load: the
 * pollers every instance runs (expiry sweep, housekeeping, webhook dispatcher, event
 * journal readers). Counts are per second; `serviceCpuPercent` is all instances together.
 */
async function idleCost(servers: ServerProcess[], probe: DatabaseProbe) {
  const seconds = 5;
  await sleep(1000); // the set-up's writes settle
  const cpuBefore = await serversCpu(servers);
  const window = await probe();
  await sleep(seconds * 1000);
  const cpu = (await serversCpu(servers)) - cpuBefore;
  return { seconds, serviceCpuPercent: r2((cpu / (seconds * 1e6)) * 100), database: await window(seconds) };
}

/** What every instance on a shared database is started with (a shared bus's URL goes here too). */
function instanceEnv(databaseUrl: string): Record<string, string> {
  return { DATABASE_URL: databaseUrl };
}

// ---------------------------------------------------------------------------------------
// Main
// ---------------------------------------------------------------------------------------

const runStarted = nowMs();
try {
  const server = await startServer();
  try {
    if (PHASES.has('healthz') || PHASES.has('mcp') || PHASES.has('rest')) await phase(server, 'healthz', () => healthzCeiling(server));
    if (PHASES.has('mcp') || PHASES.has('rest') || PHASES.has('tasks')) {
      const fleet = await startFleet([server], await owners(server, 'bench-owner'));
      if (PHASES.has('mcp')) {
        const load = await phase(server, 'mcp-round-trips', () => roundTripLoad([server], fleet, mcpRoundTrip, DURATION_S));
        results.mcpRoundTrips = { ...load, requestsPerRoundTrip: 3 };
        results.sequential = await sequential(server, fleet, 200);
      }
      if (PHASES.has('tasks')) {
        const taskTrip = (device: BenchDevice, i: number) =>
          taskRoundTrip(dispatcher, device.base, device.agentToken, toolName('set_power', device.id), { on: i % 2 === 0 }).then(() => {});
        const load = await phase(server, 'mcp-task-round-trips', () => roundTripLoad([server], fleet, taskTrip, DURATION_S));
        const device = fleet.devices[0]!;
        const finished = await taskRoundTrip(dispatcher, device.base, device.agentToken, toolName('set_power', device.id), { on: true });
        results.mcpTaskRoundTrips = {
          ...load,
          requestsPerRoundTrip: 4,
          get: await taskGetAgainstGetAction(dispatcher, device.base, device.agentToken, finished, 200),
        };
      }
      if (PHASES.has('rest')) {
        const load = await phase(server, 'rest-round-trips', () =>
          roundTripLoad([server], fleet, restRoundTrip(fleet), Math.max(3, Math.round(DURATION_S / 2))),
        );
        results.restRoundTrips = { ...load, requestsPerRoundTrip: 4 };
        results.sequentialRest = await sequential(server, fleet, 200, restRoundTrip(fleet));
      }
      for (const socket of fleet.sockets) socket.close();
    }
    if (PHASES.has('tools')) await toolsList(server);
  } finally {
    await server.stop();
  }
  if (opts.database === 'sqld' && (PHASES.has('mcp') || PHASES.has('rest'))) {
    const one = await onSqld(1);
    const many: SqldFigures[] = [];
    for (const count of INSTANCES) many.push(await onSqld(count));
    results.sqld = { transport: opts.transport, routing: 'each device and its agent on one instance', workspaces: WORKSPACES, one, many };
  }
  if (PHASES.has('floor')) await floor((results.toolsList as { responseBytes?: number } | undefined)?.responseBytes ?? 945_000);
  if (PHASES.has('sockets')) await idleSockets();
  if (PHASES.has('wake')) await wakeUnderLoad();
  if (PHASES.has('state')) {
    results.state = await stateBench({
      dispatcher,
      startServer,
      owner: (server, label) => signDevelopmentSession((server as ServerProcess).config, label),
      call: (base, method, route, token, body) => call(base, method, route, token, body),
      pool,
      attachDevices,
      phase: (server, name, fn) => phase(server as ServerProcess, name, fn),
      devices: Number(opts['state-devices']),
      durationS: DURATION_S,
      warmUpMs: WARM_UP_MS,
    });
  }
} finally {
  await dispatcher.close();
  for (const dir of tempDirs) fs.rmSync(dir, { recursive: true, force: true });
}

// ---------------------------------------------------------------------------------------
// Report
// ---------------------------------------------------------------------------------------

const healthz = results.healthz as Awaited<ReturnType<typeof healthzCeiling>> | undefined;
const mcp = results.mcpRoundTrips as (LoadFigures & { requestsPerRoundTrip: number }) | undefined;
const tasks = results.mcpTaskRoundTrips as
  (LoadFigures & { requestsPerRoundTrip: number; get: Awaited<ReturnType<typeof taskGetAgainstGetAction>> }) | undefined;
const rest = results.restRoundTrips as (LoadFigures & { requestsPerRoundTrip: number }) | undefined;
const seq = results.sequential as Awaited<ReturnType<typeof sequential>> | undefined;
const seqRest = results.sequentialRest as Awaited<ReturnType<typeof sequential>> | undefined;
const tl = results.toolsList as Awaited<ReturnType<typeof toolsList>> | undefined;
const so = results.sockets as Awaited<ReturnType<typeof idleSockets>> | undefined;
const fl = results.floor as Awaited<ReturnType<typeof floor>> | undefined;
const wk = results.wake as Awaited<ReturnType<typeof wakeUnderLoad>> | undefined;

type Row = [string, string, string, string, string];
type SqldFigures = { instances: number; idle: Awaited<ReturnType<typeof idleCost>>; mcp?: LoadFigures; rest?: LoadFigures };
/** The database side of a load phase on sqld, per round trip (scripts/bench-sqld.ts). */
function databaseRow(db: DatabaseFigures): Row {
  return [
    '  per round trip: writer queue, sqld',
    `${db.writerTurns} turns: wait ${db.writerWaitMsMean} ms, held ${db.writerHeldMsMean} ms, ${db.statementsPerTurn} statements each`,
    `held ${Math.round(db.writerHeldShare * 100)} % of the time (summed), ${db.busyRetries} busy retries`,
    `sqld: ${db.sqldQueries} statements, ${db.sqldStreams} streams`,
    `sqld CPU ${db.sqldCpuPercent} %, ${db.sqldExecutionMsPerQuery} ms/statement`,
  ];
}
function serviceRow({ service }: LoadFigures): Row {
  return [
    '  per round trip: the service processes',
    `${service.cpuMicros} µs CPU, GC ${Math.round(service.gcShareOfCpu * 100)} % of it`,
    `major GC ${Math.round(service.majorGcShareOfCpu * 100)} %, heap ${service.heapUsedMiB} MiB (all)`,
    `${service.sleeps} event-loop sleeps`,
    `${service.preemptions} preemptions, helper threads ${Math.round(service.helperThreadsShareOfCpu * 100)} % of the CPU`,
  ];
}
/** Service CPU per round trip of `figure` as a multiple of `baseline`'s. */
const cpuShare = (figure: LoadFigures, baseline: LoadFigures) =>
  figure.serverCpuPercent / figure.roundTripsPerSecond / (baseline.serverCpuPercent / baseline.roundTripsPerSecond);
/** Beside a rate: round trips it leaves out because their call's wait ended first, where there were any. */
const followed = (figure: LoadFigures) => (figure.followedUp > 0 ? `, ${figure.followedUp} followed up` : '');
const rows: Row[] = [];
const mark = (ok: boolean) => (ok ? 'yes' : 'NO');
if (healthz) {
  const cpu = (figure: { cpuMicrosPerRequest: number }) => `${Math.round(figure.cpuMicrosPerRequest)} µs CPU each`;
  rows.push([`GET /healthz, ${healthz.connections} connections`, `${healthz.requestsPerSecond} req/s (p99 ${healthz.p99Ms} ms)`, 'the ceiling', '', '']);
  rows.push([
    '  as a share of a bare node:http /healthz',
    `${healthz.requestsPerSecond} req/s, ${cpu(healthz)}`,
    `bare ${healthz.bare.requestsPerSecond} req/s, ${cpu(healthz.bare)}`,
    `${Math.round(healthz.ratio * 100)} % (CPU ${Math.round((healthz.bare.cpuMicrosPerRequest / healthz.cpuMicrosPerRequest) * 100)} %)`,
    `≥ 80 %: ${mark(healthz.ratio >= 0.8)}`,
  ]);
  rows.push([
    '  Hono alone (one route, no middleware)',
    `${healthz.hono.requestsPerSecond} req/s, ${cpu(healthz.hono)}`,
    `bare ${healthz.bare.requestsPerSecond} req/s`,
    `${Math.round(healthz.honoRatio * 100)} % (CPU ${Math.round((healthz.bare.cpuMicrosPerRequest / healthz.hono.cpuMicrosPerRequest) * 100)} %)`,
    'the framework',
  ]);
}
if (mcp && healthz) {
  const ideal = healthz.requestsPerSecond / 3;
  const ratio = mcp.roundTripsPerSecond / ideal;
  rows.push([
    `Round trips, MCP tools/call, ${FLEET_LABEL}`,
    `${mcp.roundTripsPerSecond}/s${followed(mcp)}`,
    `ideal ${Math.round(ideal)}/s (healthz ÷ 3)`,
    `${Math.round(ratio * 100)} %`,
    `≥ 50 %: ${mark(ratio >= 0.5)}`,
  ]);
  rows.push([
    '  wake queue → frame, under load',
    `p50 ${mcp.wake.p50Ms} ms, p99 ${mcp.wake.p99Ms} ms`,
    `${mcp.wake.samples} wakes`,
    '',
    `p99 < 20 ms: ${mark(mcp.wake.p99Ms < 20)}`,
  ]);
  rows.push([
    '  request → result, under load',
    `p50 ${mcp.requestToResult.p50Ms} ms, p99 ${mcp.requestToResult.p99Ms} ms`,
    `server CPU ${mcp.serverCpuPercent} %`,
    `generator CPU ${mcp.generatorCpuPercent} %`,
    '',
  ]);
}
if (tasks && mcp) {
  const ratio = mcp.roundTripsPerSecond / tasks.roundTripsPerSecond;
  rows.push([
    `Round trips, MCP task mode (call → task → listen → notification), ${FLEET_LABEL}`,
    `${tasks.roundTripsPerSecond}/s, p50 ${tasks.requestToResult.p50Ms} ms`,
    `synchronous ${mcp.roundTripsPerSecond}/s, p50 ${mcp.requestToResult.p50Ms} ms`,
    `${Math.round(ratio * 100) / 100}× the cost`,
    `≤ 1.2×: ${mark(ratio <= 1.2)}`,
  ]);
  rows.push([
    '  tasks/get, one at a time',
    `p50 ${tasks.get.tasksGetP50Ms} ms`,
    `get_action p50 ${tasks.get.getActionP50Ms} ms`,
    `${tasks.get.ratio}×`,
    `≈ 1×: ${mark(tasks.get.ratio <= 1.2)}`,
  ]);
}
if (seq) {
  rows.push([
    '  wake queue → frame, one at a time',
    `p50 ${seq.wake.p50Ms} ms, p99 ${seq.wake.p99Ms} ms`,
    `${seq.wake.samples} wakes`,
    '',
    `p99 < 20 ms: ${mark(seq.wake.p99Ms < 20)}`,
  ]);
  rows.push([
    '  request → result, one at a time',
    `p50 ${seq.requestToResult.p50Ms} ms, p99 ${seq.requestToResult.p99Ms} ms`,
    `${seq.service.cpuMicros} µs service CPU each`,
    '',
    '',
  ]);
}
if (rest && healthz) {
  const ideal = healthz.requestsPerSecond / 4;
  rows.push([
    `Round trips, REST (+ agent GET), ${FLEET_LABEL}`,
    `${rest.roundTripsPerSecond}/s`,
    `ideal ${Math.round(ideal)}/s (healthz ÷ 4)`,
    `${Math.round((rest.roundTripsPerSecond / ideal) * 100)} %`,
    '',
  ]);
}
if (seqRest) {
  rows.push([
    '  REST request → result, one at a time',
    `p50 ${seqRest.requestToResult.p50Ms} ms, p99 ${seqRest.requestToResult.p99Ms} ms`,
    `${seqRest.service.cpuMicros} µs service CPU each`,
    '',
    '',
  ]);
}
if (tl) {
  rows.push([
    `tools/list, ${tl.toolsListed} tools (${Math.round(tl.responseBytes / 1024)} KiB)`,
    `p50 ${tl.toolsListP50Ms} ms`,
    `healthz p50 ${tl.healthzP50Ms} ms`,
    `${tl.multiple}×`,
    `≤ 2×: ${mark(tl.multiple <= 2)}`,
  ]);
}
if (fl) {
  const ideal = healthz ? healthz.requestsPerSecond / 3 : undefined;
  rows.push([
    `Floor: bare node:http + libSQL, ${FLEET_DEVICES} devices`,
    `${fl.roundTripsPerSecond} round trips/s`,
    ideal ? `ideal ${Math.round(ideal)}/s (service healthz ÷ 3)` : `its healthz ${fl.healthzRequestsPerSecond} req/s`,
    ideal ? `${Math.round((fl.roundTripsPerSecond / ideal) * 100)} %` : '',
    `server CPU ${fl.serverCpuPercent} %, generator ${fl.generatorCpuPercent} %`,
  ]);
  // The targets of docs/performance.md. The CPU share (the floor's server CPU per round trip
  // over the service's) moves much less than the rate when other work shares the machine.
  const cpuPerRoundTrip = (figure: { serverCpuPercent: number; roundTripsPerSecond: number }) => (figure.serverCpuPercent * 1e4) / figure.roundTripsPerSecond;
  const share = (label: string, figure: LoadFigures | undefined, target: number) => {
    if (!figure) return;
    const ratio = figure.roundTripsPerSecond / fl.roundTripsPerSecond;
    rows.push([
      `  ${label} round trips as a share of the floor`,
      `${figure.roundTripsPerSecond}/s, ${Math.round(cpuPerRoundTrip(figure))} µs CPU each`,
      `floor ${fl.roundTripsPerSecond}/s, ${Math.round(cpuPerRoundTrip(fl))} µs CPU each`,
      `${Math.round(ratio * 100)} % (CPU ${Math.round((cpuPerRoundTrip(fl) / cpuPerRoundTrip(figure)) * 100)} %)`,
      `≥ ${target * 100} %: ${mark(ratio >= target)}`,
    ]);
  };
  share('MCP', mcp, 0.5);
  share('REST', rest, 0.45);
  rows.push([
    `  ${Math.round(fl.bytes / 1024)} KiB from memory, bare node:http`,
    `p50 ${fl.bytesP50Ms} ms`,
    `its healthz p50 ${fl.healthzP50Ms} ms`,
    `${fl.bytesMultiple}×`,
    '',
  ]);
}
const sq = results.sqld as { transport: string; one: SqldFigures; many: SqldFigures[] } | undefined;
if (sq) {
  const share = (a: number, b: number) => `${r2(a / b)}×`;
  for (const kind of ['mcp', 'rest'] as const) {
    const embedded = kind === 'mcp' ? mcp : rest;
    const one = sq.one[kind];
    const label = kind === 'mcp' ? 'MCP' : 'REST';
    if (one)
      rows.push([
        `sqld (${sq.transport}), 1 instance, ${label} round trips, ${FLEET_LABEL}`,
        `${one.roundTripsPerSecond}/s (p50 ${one.requestToResult.p50Ms} ms${followed(one)})`,
        embedded ? `embedded ${embedded.roundTripsPerSecond}/s` : '',
        embedded ? share(one.roundTripsPerSecond, embedded.roundTripsPerSecond) : '',
        `service CPU ${one.serverCpuPercent} %`,
      ]);
    if (one?.database) rows.push(databaseRow(one.database), serviceRow(one));
    for (const { instances, [kind]: many } of sq.many)
      if (one && many) {
        rows.push([
          `sqld (${sq.transport}), ${instances} instances, ${label} round trips, ${FLEET_LABEL}`,
          `${many.roundTripsPerSecond}/s (p50 ${many.requestToResult.p50Ms} ms${followed(many)})`,
          `1 instance ${one.roundTripsPerSecond}/s`,
          share(many.roundTripsPerSecond, one.roundTripsPerSecond),
          `service CPU ${many.serverCpuPercent} % (all), ${r2(cpuShare(many, one))}× CPU per round trip`,
        ]);
        if (many.database) rows.push(databaseRow(many.database), serviceRow(many));
      }
  }
  for (const { instances, idle } of [sq.one, ...sq.many])
    rows.push([
      `sqld (${sq.transport}), ${instances} instance${instances === 1 ? '' : 's'}, idle (pollers only)`,
      `service CPU ${idle.serviceCpuPercent} % (all), sqld CPU ${idle.database.sqldCpuPercent} %`,
      `${idle.database.writerTurns} writer turns/s, ${idle.database.readBatches} read batches/s`,
      `${idle.database.sqldQueries} statements/s, ${idle.database.sqldStreams} streams/s`,
      `${idle.database.busyRetries} busy retries/s`,
    ]);
}
if (so) {
  rows.push([
    `RSS, ${so.sockets} idle wake sockets (server counts ${so.serverReportsOpen})`,
    `${so.rssMb} MB`,
    `${so.rssBeforeSocketsMb} MB before sockets`,
    `+${so.perSocketKb} KB/socket`,
    `< 300 MB: ${mark(so.rssMb < 300)}`,
  ]);
}
if (wk) {
  rows.push([
    `wake queue → frame, ${wk.sockets.toLocaleString('en-US')} sockets under load`,
    `p50 ${wk.wake.p50Ms} ms, p99 ${wk.wake.p99Ms} ms`,
    `${wk.wake.samples} wakes, ${wk.roundTripsPerSecond} REST round trips/s`,
    `server CPU ${wk.serverCpuPercent} %`,
    `p99 < 10 ms: ${mark(wk.wake.p99Ms < 10)}`,
  ]);
}

const st = results.state as StateFigures | undefined;
if (st) rows.push(...stateRows(st, mark));

const header: Row = ['Measure', 'Figure', 'Baseline (same run)', 'Ratio', 'Target'];
const widths = header.map((_, c) => Math.max(...[header, ...rows].map((row) => row[c]!.length)));
const line = (row: Row) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`;
console.log(
  `\nnpm run bench — Node ${process.version}, ${os.cpus().length} cores, ${Math.round(os.totalmem() / 2 ** 30)} GiB, ${hasTaskset ? `server on core 0, generator ${INSTANCE_CPU === undefined ? '' : 'and sqld '}on core 1` : 'not pinned'}${INSTANCE_CPU === undefined ? '' : `, each server process limited to ${INSTANCE_CPU} of a core`}, ${r2((nowMs() - runStarted) / 1000)} s\n`,
);
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const row of rows) console.log(line(row));
const report = {
  node: process.version,
  cores: os.cpus().length,
  pinned: hasTaskset,
  instanceCpuCores: INSTANCE_CPU ?? null,
  durationSeconds: DURATION_S,
  devices: DEVICES,
  workspaces: WORKSPACES,
  ...results,
};
console.log(`\n${JSON.stringify(report)}`);
if (opts.json) fs.writeFileSync(opts.json, `${JSON.stringify(report, null, 2)}\n`);
if (opts.profile) console.log(`\nCPU profiles of the server processes: ${path.join(ROOT, 'profiles')}`);

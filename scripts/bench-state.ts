/**
 * The device state phase of `npm run bench` (`--only state`, docs/devices/state.md): DEVICES
 * devices (1,000 by default, `--state-devices`) each report a changed value once a second on
 * one instance (`POST /v1/device/{deviceId}/state`), while one agent follows every device's
 * `device://{deviceId}/state` on subscriptions/listen streams (64 resources each, the bound of
 * one stream). It measures the reports per second the service keeps up with, a report's
 * latency, the latency from a report being sent to its `notifications/resources/updated`
 * arriving, and the service's CPU per report; beside the floor: the same devices reporting at
 * the same rate to the bare node:http + libSQL server (scripts/bench-floor-server.ts
 * `POST /state/{device}`: a token lookup and one upsert, committed).
 */
import { request, type Dispatcher } from 'undici';
import { mcpHeaders, MODERN } from './bench-mcp-headers.js';

export interface StateServer {
  url: string;
  ready: Record<string, any>;
  ask<T>(message: Record<string, unknown>): Promise<T>;
  stop(): Promise<void>;
}

export interface StateBenchDeps {
  dispatcher: Dispatcher;
  startServer(extraEnv?: Record<string, string>, script?: string): Promise<StateServer>;
  /** An owner session for a fresh workspace. */
  owner(server: StateServer, label: string): Promise<string>;
  call(base: string, method: 'GET' | 'POST', route: string, token: string, body?: unknown): Promise<any>;
  pool<T, R>(items: T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]>;
  attachDevices(base: string, owner: string, count: number, name: string): Promise<{ id: string; token: string }[]>;
  phase<T>(server: StateServer, name: string, fn: () => Promise<T>): Promise<T>;
  devices: number;
  durationS: number;
  warmUpMs: number;
}

const readState = {
  name: 'get_state',
  kind: 'read',
  description: 'The sensor reading.',
  arguments: { type: 'object', properties: {}, additionalProperties: false },
  result: { type: 'object', properties: { level: { type: 'integer' } }, required: ['level'], additionalProperties: false },
};
/** The most resources one listen stream follows (src/mcp/subscriptions/state-watch.ts). */
const PER_STREAM = 64;
const REPORT_INTERVAL_MS = 1000;

const nowMs = () => Number(process.hrtime.bigint()) / 1e6;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
const r2 = (n: number) => Math.round(n * 100) / 100;
function pct(samples: number[], p: number): number {
  if (samples.length === 0) return Number.NaN;
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

export interface ReportLoad {
  reportsPerSecond: number;
  offeredPerSecond: number;
  reportP50Ms: number;
  reportP99Ms: number;
  /** Reports sent later than their second (the generator fell behind). */
  late: number;
  serverCpuPercent: number;
  cpuMicrosPerReport: number;
}

/**
 * Every device reports once a second, each at its own offset in the second, until `until`;
 * reports whose answer came within the measured window are counted.
 */
async function reportLoad(
  server: StateServer,
  devices: { id: string; token: string }[],
  deps: StateBenchDeps,
  send: (device: { id: string; token: string }, level: number) => Promise<void>,
  on: { sent?: (deviceId: string, at: number) => void; answered?: (deviceId: string, at: number) => void } = {},
): Promise<ReportLoad> {
  let running = true;
  const window = { from: Number.POSITIVE_INFINITY, to: Number.POSITIVE_INFINITY };
  const latencies: number[] = [];
  let counted = 0;
  let late = 0;
  const start = nowMs();
  const loops = devices.map(async (device, d) => {
    let next = start + (d / devices.length) * REPORT_INTERVAL_MS;
    for (let level = 0; running; level++) {
      await sleep(next - nowMs());
      if (!running) break;
      const sent = nowMs();
      if (sent - next > REPORT_INTERVAL_MS / 2) late++;
      on.sent?.(device.id, sent);
      await send(device, level);
      const done = nowMs();
      on.answered?.(device.id, done);
      if (done >= window.from && done < window.to) {
        counted++;
        latencies.push(done - sent);
      }
      next += REPORT_INTERVAL_MS;
      // A device that fell a whole second behind does not burst to catch up.
      if (next < done) next = done;
    }
  });
  await sleep(deps.warmUpMs);
  const cpuBefore = (await server.ask<{ usage: NodeJS.CpuUsage }>({ type: 'cpu' })).usage;
  window.from = nowMs();
  window.to = window.from + deps.durationS * 1000;
  await sleep(deps.durationS * 1000);
  const cpuAfter = (await server.ask<{ usage: NodeJS.CpuUsage }>({ type: 'cpu' })).usage;
  running = false;
  await Promise.all(loops);
  const cpuMicros = cpuAfter.user - cpuBefore.user + cpuAfter.system - cpuBefore.system;
  return {
    reportsPerSecond: Math.round(counted / deps.durationS),
    offeredPerSecond: Math.round((devices.length * 1000) / REPORT_INTERVAL_MS),
    reportP50Ms: r2(pct(latencies, 0.5)),
    reportP99Ms: r2(pct(latencies, 0.99)),
    late,
    serverCpuPercent: Math.round((cpuMicros / (deps.durationS * 1e6)) * 100),
    cpuMicrosPerReport: Math.round(cpuMicros / Math.max(1, counted)),
  };
}

/** One listen stream following these devices' state; calls `onUpdated` with each notification's device. */
async function listenToState(deps: StateBenchDeps, base: string, token: string, deviceIds: string[], onUpdated: (deviceId: string) => void) {
  const uris = deviceIds.map((id) => `device://${id}/state`);
  const response = await request(`${base}/mcp`, {
    method: 'POST',
    dispatcher: deps.dispatcher,
    headers: mcpHeaders(token, 'subscriptions/listen'),
    body: JSON.stringify({
      jsonrpc: '2.0',
      id: 1,
      method: 'subscriptions/listen',
      params: {
        notifications: { resourceSubscriptions: uris },
        _meta: { 'io.modelcontextprotocol/protocolVersion': MODERN, 'io.modelcontextprotocol/clientCapabilities': {} },
      },
    }),
  });
  if (response.statusCode !== 200) throw new Error(`listen → ${response.statusCode} ${await response.body.text()}`);
  let acknowledge: (count: number) => void = () => {};
  const acknowledged = new Promise<number>((resolve) => (acknowledge = resolve));
  const decoder = new TextDecoder();
  let buffer = '';
  const reading = (async () => {
    for await (const chunk of response.body) {
      buffer += decoder.decode(chunk as Buffer, { stream: true });
      let cut: number;
      while ((cut = buffer.indexOf('\n\n')) >= 0) {
        const data = buffer
          .slice(0, cut)
          .split('\n')
          .find((l) => l.startsWith('data:'));
        buffer = buffer.slice(cut + 2);
        const message = data ? JSON.parse(data.slice(5)) : undefined;
        if (message?.method === 'notifications/subscriptions/acknowledged') acknowledge(message.params.notifications.resourceSubscriptions.length);
        if (message?.method === 'notifications/resources/updated') onUpdated(/^device:\/\/(.+)\/state$/.exec(message.params.uri)![1]!);
      }
    }
  })().catch(() => {});
  const followed = await acknowledged;
  if (followed !== deviceIds.length) throw new Error(`a listen stream follows ${followed} of ${deviceIds.length} state resources`);
  return { close: () => response.body.destroy(), reading };
}

async function onService(deps: StateBenchDeps) {
  const server = await deps.startServer();
  try {
    const owner = await deps.owner(server, 'bench-state');
    const devices = await deps.attachDevices(server.url, owner, deps.devices, 'bench sensor');
    await deps.pool(devices, 32, (device) => deps.call(server.url, 'POST', `/v1/device/${device.id}/manifest`, device.token, { capabilities: [readState] }));
    const agent = await deps.call(server.url, 'POST', '/v1/agent-connections', owner, { name: 'bench state agent', access: 'read' });
    await deps.pool(devices, 32, (device) =>
      deps.call(server.url, 'POST', '/v1/grants', owner, { principal: agent.principal, deviceId: device.id, capabilities: ['get_state'] }),
    );
    // Per device: when its latest report was sent and answered; a notification is timed from
    // both (one that comes before its report's answer counts 0 after it).
    const lastSent = new Map<string, number>();
    const lastAnswered = new Map<string, number>();
    const early = new Set<string>();
    const fromSent: number[] = [];
    const afterAnswer: number[] = [];
    let notifications = 0;
    let measuring = false;
    const onUpdated = (deviceId: string) => {
      const sent = lastSent.get(deviceId);
      if (!measuring || sent === undefined) return;
      const at = nowMs();
      notifications++;
      fromSent.push(at - sent);
      const answered = lastAnswered.get(deviceId) ?? 0;
      if (answered >= sent) afterAnswer.push(at - answered);
      else early.add(deviceId);
    };
    const onAnswered = (deviceId: string, at: number) => {
      lastAnswered.set(deviceId, at);
      if (early.delete(deviceId) && measuring) afterAnswer.push(0);
    };
    const ids = devices.map((d) => d.id);
    const streams = await deps.pool(
      Array.from({ length: Math.ceil(ids.length / PER_STREAM) }, (_, i) => ids.slice(i * PER_STREAM, (i + 1) * PER_STREAM)),
      8,
      (chunk) => listenToState(deps, server.url, agent.token, chunk, onUpdated),
    );
    const send = async (device: { id: string; token: string }, level: number) => {
      await deps.call(server.url, 'POST', `/v1/device/${device.id}/state`, device.token, { values: { get_state: { level } } });
    };
    const load = await deps.phase(server, 'state-reports', async () => {
      setTimeout(() => (measuring = true), deps.warmUpMs).unref();
      const figures = await reportLoad(server, devices, deps, send, { sent: (id, at) => lastSent.set(id, at), answered: onAnswered });
      measuring = false;
      return figures;
    });
    for (const stream of streams) stream.close();
    return {
      ...load,
      streams: streams.length,
      notificationsPerSecond: Math.round(notifications / deps.durationS),
      notifyP50Ms: r2(pct(fromSent, 0.5)),
      notifyP99Ms: r2(pct(fromSent, 0.99)),
      notifyAfterAnswerP50Ms: r2(pct(afterAnswer, 0.5)),
      notifyAfterAnswerP99Ms: r2(pct(afterAnswer, 0.99)),
    };
  } finally {
    await server.stop();
  }
}

async function onFloor(deps: StateBenchDeps): Promise<ReportLoad> {
  const server = await deps.startServer({ FLOOR_DEVICES: String(deps.devices) }, 'scripts/bench-floor-server.ts');
  try {
    const devices = server.ready.devices as { id: string; token: string }[];
    const send = async (device: { id: string; token: string }, level: number) => {
      const response = await request(`${server.url}/state/${device.id}`, {
        method: 'POST',
        dispatcher: deps.dispatcher,
        headers: { authorization: `Bearer ${device.token}`, 'content-type': 'application/json' },
        body: JSON.stringify({ values: { get_state: { level } } }),
      });
      await response.body.text();
      if (response.statusCode !== 200) throw new Error(`floor state → ${response.statusCode}`);
    };
    return await reportLoad(server, devices, deps, send);
  } finally {
    await server.stop();
  }
}

/** The state phase: the service, then the floor at the same offered rate. */
export async function stateBench(deps: StateBenchDeps) {
  const service = await onService(deps);
  const floor = await onFloor(deps);
  return { devices: deps.devices, service, floor };
}

export type StateFigures = Awaited<ReturnType<typeof stateBench>>;

/** The rows of the report: reports/s and notification p99 beside the floor. */
export function stateRows(figures: StateFigures, mark: (ok: boolean) => string): [string, string, string, string, string][] {
  const { service: s, floor: f } = figures;
  const label = `${figures.devices.toLocaleString('en-US')} devices reporting once a second`;
  return [
    [
      `State reports, ${label}`,
      `${s.reportsPerSecond}/s of ${s.offeredPerSecond}, p99 ${s.reportP99Ms} ms, ${s.cpuMicrosPerReport} µs CPU each`,
      `floor ${f.reportsPerSecond}/s, p99 ${f.reportP99Ms} ms, ${f.cpuMicrosPerReport} µs CPU each`,
      `CPU ${Math.round((f.cpuMicrosPerReport / Math.max(1, s.cpuMicrosPerReport)) * 100)} % of the floor's share`,
      `≥ 95 % of offered: ${mark(s.reportsPerSecond >= 0.95 * s.offeredPerSecond)}`,
    ],
    [
      `  report answered → notifications/resources/updated (${s.streams} listen streams)`,
      `p50 ${s.notifyAfterAnswerP50Ms} ms, p99 ${s.notifyAfterAnswerP99Ms} ms (from sent: p99 ${s.notifyP99Ms} ms)`,
      `${s.notificationsPerSecond} notifications/s`,
      `server CPU ${s.serverCpuPercent} % (floor ${f.serverCpuPercent} %)`,
      `p99 < 100 ms: ${mark(s.notifyAfterAnswerP99Ms < 100)}`,
    ],
  ];
}

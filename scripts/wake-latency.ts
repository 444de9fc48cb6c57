import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { WebSocket } from 'ws';
import { signDevelopmentSession } from '../src/auth/owner.js';
import { lampManifest } from '../src/cli/simulated.js';
import { parseConfig } from '../src/config.js';
import { measuringEnv } from './measuring-env.js';
import { startService } from '../src/service.js';

// `npm run wake-latency [-- --actions 1000 --poll-samples 20 --poll-interval-ms 1000]`
//
// 1. Wake latency: for each of N actions, queue (agent POST) → wake frame received on the
//    device's socket. Two clocks, both in this process: from the moment the service
//    published the queued action (after its transaction committed) and from the moment the
//    agent sent the request. Sequential, one device, one socket.
// 2. Polling vs wake: request sent → the device holds the command (its `next` returned it),
//    for a device woken over the socket and for one polling `next` every second.
const { values } = parseArgs({
  options: {
    actions: { type: 'string', default: '1000' },
    'wake-samples': { type: 'string', default: '200' },
    'poll-samples': { type: 'string', default: '20' },
    'poll-interval-ms': { type: 'string', default: '1000' },
  },
});
const ACTIONS = Number(values.actions);
const WAKE_SAMPLES = Number(values['wake-samples']);
const POLL_SAMPLES = Number(values['poll-samples']);
const POLL_INTERVAL_MS = Number(values['poll-interval-ms']);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-wake-latency-'));
// Rate limits are raised: this measures the wake path, not the limiter.
const config = parseConfig(measuringEnv(dir));
const service = await startService(config);
const url = service.url;

async function call(route: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<any> {
  const response = await fetch(`${url}${route}`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}`, ...headers, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  const json = (await response.json()) as { data?: unknown; error?: unknown };
  if (!response.ok) throw new Error(`${route}: ${response.status} ${JSON.stringify(json)}`);
  return json.data;
}

const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(p * sorted.length) - 1))]!;
function summary(label: string, samples: number[]): string {
  const sorted = [...samples].sort((a, b) => a - b);
  const mean = samples.reduce((a, b) => a + b, 0) / samples.length;
  const f = (n: number) => `${n.toFixed(2)} ms`;
  return `${label.padEnd(46)} n=${String(samples.length).padEnd(5)} p50 ${f(percentile(sorted, 0.5)).padEnd(12)} p99 ${f(percentile(sorted, 0.99)).padEnd(12)} mean ${f(mean).padEnd(12)} max ${f(sorted[sorted.length - 1]!)}`;
}

try {
  const owner = await signDevelopmentSession(config, 'latency-owner');
  const setup = await call('/v1/device-setup-tokens', owner, { name: 'latency', deviceLimit: 2 });
  const attach = async (name: string) => {
    const attached = await call('/v1/sdk/devices', setup.token, { name });
    await call(`/v1/device/${attached.device.id}/manifest`, attached.token, lampManifest);
    return { id: attached.device.id as string, token: attached.token as string, workspace: attached.workspace as string };
  };
  const woken = await attach('woken lamp');
  const poller = await attach('polling lamp');
  const agent = await call('/v1/agent-connections', owner, { name: 'latency agent', access: 'act' });
  for (const device of [woken, poller]) {
    await call('/v1/grants', owner, { principal: agent.principal, deviceId: device.id, capabilities: ['set_power'] });
  }
  const request = (deviceId: string) => call(`/v1/devices/${deviceId}/actions`, agent.token, { capability: 'set_power', arguments: { on: true } });
  const next = (device: typeof woken) => call(`/v1/device/${device.id}/next`, device.token, undefined, { 'x-service-workspace': device.workspace });
  const complete = (device: typeof woken, actionId: string) => call(`/v1/device/${device.id}/result`, device.token, { actionId, ok: true });

  // When the service published each queued action: the "queue" instant.
  const publishedAt = new Map<string, number>();
  service.events.subscribe((event) => {
    if (event.type === 'action' && event.action.status === 'queued') publishedAt.set(event.action.id, performance.now());
  });

  const { ticket } = await call(`/v1/device/${woken.id}/events-ticket`, woken.token);
  const socket = new WebSocket(`${url.replace(/^http/, 'ws')}/v1/device/${woken.id}/events?ticket=${ticket}`);
  await new Promise((resolve, reject) => socket.once('open', resolve).once('error', reject));
  const frameAt = new Map<string, number>();
  const frameWaiters = new Map<string, () => void>();
  socket.on('message', (data) => {
    const at = performance.now();
    const frame = JSON.parse(String(data)) as { actionId: string };
    frameAt.set(frame.actionId, at);
    frameWaiters.get(frame.actionId)?.();
  });
  const frameFor = (actionId: string) => (frameAt.has(actionId) ? Promise.resolve() : new Promise<void>((resolve) => frameWaiters.set(actionId, resolve)));

  // 1. Wake latency.
  const fromPublish: number[] = [];
  const fromRequest: number[] = [];
  const started = performance.now();
  for (let i = 0; i < ACTIONS; i += 1) {
    const sent = performance.now();
    const action = await request(woken.id);
    await frameFor(action.id);
    fromPublish.push(frameAt.get(action.id)! - publishedAt.get(action.id)!);
    fromRequest.push(frameAt.get(action.id)! - sent);
    await next(woken); // keep the queue empty (outside the timing)
    await complete(woken, action.id);
  }
  const wakeSeconds = (performance.now() - started) / 1000;

  // 2a. Request → device holds the command, woken: wake frame, then `next`.
  const wokenHolds: number[] = [];
  for (let i = 0; i < WAKE_SAMPLES; i += 1) {
    const sent = performance.now();
    const action = await request(woken.id);
    await frameFor(action.id);
    const command = await next(woken);
    wokenHolds.push(performance.now() - sent);
    await complete(woken, command.id);
  }

  // 2b. The same for a device polling `next` every POLL_INTERVAL_MS, requests at random phase.
  const pollingHolds: number[] = [];
  let pollRequests = 0;
  let pending: { id: string; sent: number; done: () => void } | undefined;
  let polling = true;
  const pollLoop = (async () => {
    while (polling) {
      const command = await next(poller);
      pollRequests += 1;
      if (command && pending && command.id === pending.id) {
        pollingHolds.push(performance.now() - pending.sent);
        await complete(poller, command.id);
        pending.done();
      }
      await new Promise((resolve) => setTimeout(resolve, POLL_INTERVAL_MS));
    }
  })();
  const pollStarted = performance.now();
  for (let i = 0; i < POLL_SAMPLES; i += 1) {
    await new Promise((resolve) => setTimeout(resolve, Math.random() * POLL_INTERVAL_MS));
    const sent = performance.now();
    const held = new Promise<void>((resolve) => (pending = { id: '', sent, done: resolve }));
    pending!.id = (await request(poller.id)).id;
    await held;
  }
  polling = false;
  await pollLoop;
  const pollSeconds = (performance.now() - pollStarted) / 1000;

  console.log(`wake latency, ${ACTIONS} actions sequentially on one socket (${wakeSeconds.toFixed(1)} s, Node ${process.version}, ${os.cpus().length} cores)`);
  console.log(summary('  queued (published after commit) → frame', fromPublish));
  console.log(summary('  agent request sent → frame', fromRequest));
  console.log('');
  console.log('request sent → device holds the command (its `next` returned it)');
  console.log(summary('  woken over the socket, then next', wokenHolds));
  console.log(summary(`  polling next every ${POLL_INTERVAL_MS} ms`, pollingHolds));
  console.log(
    `  idle cost: polling made ${pollRequests} HTTP requests in ${pollSeconds.toFixed(1)} s (${(pollRequests / pollSeconds).toFixed(2)}/s per device); a woken device makes none (one ping every ${config.wsPingMs / 1000} s)`,
  );
  socket.close();
} finally {
  await service.close();
  fs.rmSync(dir, { recursive: true, force: true });
}

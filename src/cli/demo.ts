import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { signDevelopmentSession } from '../auth/owner.js';
import { parseConfig } from '../config.js';
import { attachDevice, Device } from '@dfc/device';
import { startService } from '../service.js';
import { lampManifest, simulateLamp } from './simulated.js';

// `npm run demo`: the whole loop in one process, on a throwaway database. An owner (signed
// by the development identity provider) attaches a simulated lamp through the device SDK,
// creates an agent connection and a grant; the agent requests actions; the lamp is woken
// over its WebSocket, runs them and reports; the agent reads the results. Prints timings.

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-demo-'));
const config = parseConfig({ PORT: '0', HOST: '127.0.0.1', DATABASE_URL: `file:${path.join(dir, 'service.db')}`, LOG_LEVEL: 'silent' });
const service = await startService(config);
const url = service.url;
const t0 = performance.now();
const ms = (from: number, to = performance.now()) => `${(to - from).toFixed(1)} ms`;
const step = (text: string) => console.log(`[${ms(t0).padStart(9)}] ${text}`);

// `any` bodies: the demo reads a few known fields of its own API's answers and prints them;
// a wrong field fails the demo loudly at run time, which is all a walk-through needs.
type Answer = { status: number; body: any };

async function call(method: string, route: string, token: string, body?: unknown): Promise<Answer> {
  const response = await fetch(`${url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
    ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
  });
  return { status: response.status, body: await response.json() };
}

async function expectStatus(status: number, pending: Promise<Answer>) {
  const res = await pending;
  if (res.status !== status) throw new Error(`expected ${status}, got ${res.status}: ${JSON.stringify(res.body)}`);
  return res.body;
}

let device: Device | undefined;
let failed = false;
try {
  step(`service listening at ${url} (database in ${dir})`);
  const owner = await signDevelopmentSession(config, 'demo-owner');
  step('owner session signed by the development identity provider');

  const setup = (await expectStatus(201, call('POST', '/v1/device-setup-tokens', owner, { name: 'demo lamp setup' }))).data;
  step(`setup token created (${setup.token.slice(0, 14)}…, attaches ${setup.deviceLimit} device)`);

  const credentials = await attachDevice({ url, setupToken: setup.token, name: 'Demo lamp' });
  step(`device attached with the SDK: ${credentials.deviceId}`);

  // Per action: when the lamp heard of it, ran it, and reported it.
  const seen = new Map<string, { wake?: number; run?: number; reported?: number }>();
  const mark = (id: string, key: 'wake' | 'run' | 'reported') => seen.set(id, { ...seen.get(id), [key]: performance.now() });
  let connected!: () => void;
  const isConnected = new Promise<void>((resolve) => (connected = resolve));
  device = new Device({
    url,
    credentials,
    manifest: lampManifest,
    onEvent: (event) => {
      if (event.type === 'connected') connected();
      if (event.type === 'wake') mark(event.actionId, 'wake');
      if (event.type === 'command') mark(event.command.id, 'run');
      if (event.type === 'result') mark(event.actionId, 'reported');
    },
  });
  simulateLamp(device);
  await device.start();
  await isConnected;
  step('lamp published its manifest (get_state, set_power, set_brightness) and opened its wake socket');

  const agent = (await expectStatus(201, call('POST', '/v1/agent-connections', owner, { name: 'demo agent', access: 'act' }))).data;
  step(`agent connection created: principal ${agent.principal}, ceiling act`);
  await expectStatus(
    201,
    call('POST', '/v1/grants', owner, {
      principal: agent.principal,
      deviceId: credentials.deviceId,
      capabilities: ['get_state', 'set_power', 'set_brightness'],
    }),
  );
  step('owner granted the agent get_state, set_power and set_brightness on the lamp');
  console.log('');

  // The last one fails on purpose: the lamp refuses brightness while off, and says why.
  const requests: [string, Record<string, unknown>, 'succeeded' | 'failed'][] = [
    ['set_power', { on: true }, 'succeeded'],
    ['set_brightness', { level: 40 }, 'succeeded'],
    ['get_state', {}, 'succeeded'],
    ['set_power', { on: false }, 'succeeded'],
    ['set_brightness', { level: 70 }, 'failed'],
  ];
  console.log('  action                          201 queued   woken     ran       reported  agent saw  outcome');
  for (const [capability, args, expected] of requests) {
    const start = performance.now();
    const action = (await expectStatus(201, call('POST', `/v1/devices/${credentials.deviceId}/actions`, agent.token, { capability, arguments: args }))).data;
    const queued = performance.now();
    let state = action;
    while (state.status === 'queued' || state.status === 'received') {
      await new Promise((resolve) => setTimeout(resolve, 5));
      state = (await expectStatus(200, call('GET', `/v1/actions/${action.id}`, agent.token))).data;
    }
    const done = performance.now();
    const marks = seen.get(action.id) ?? {};
    const at = (t: number | undefined) => (t === undefined ? '-' : ms(start, t)).padEnd(10);
    const outcome = state.status === 'succeeded' ? `${state.status} ${JSON.stringify(state.result)}` : `${state.status} ${JSON.stringify(state.error)}`;
    console.log(
      `  ${`${capability} ${JSON.stringify(args)}`.padEnd(32)}${at(queued)} ${at(marks.wake)}${at(marks.run)}${at(marks.reported)}${at(done)} ${outcome}`,
    );
    if (state.status !== expected) failed = true;
  }
  console.log('  (times from the agent sending the request; the wake can beat the 201 back to the agent)\n');

  const invalid = await call('POST', `/v1/devices/${credentials.deviceId}/actions`, agent.token, { capability: 'set_brightness', arguments: { level: 140 } });
  step(
    `arguments outside the published schema are refused before queuing: ${invalid.status} ${invalid.body.error.code} (${invalid.body.error.issues?.[0]?.path}: ${invalid.body.error.issues?.[0]?.message})`,
  );
  await expectStatus(200, call('POST', '/v1/grants/revoke', owner, { principal: agent.principal, deviceId: credentials.deviceId, capability: 'set_power' }));
  const refused = await call('POST', `/v1/devices/${credentials.deviceId}/actions`, agent.token, { capability: 'set_power', arguments: { on: true } });
  step(`owner revoked the set_power grant; the next request: ${refused.status} ${refused.body.error.code}`);
  if (invalid.status !== 400 || refused.status !== 403) failed = true;
} catch (error) {
  failed = true;
  console.error(`demo failed: ${(error as Error).stack ?? String(error)}`);
} finally {
  await device?.stop();
  await service.close();
  fs.rmSync(dir, { recursive: true, force: true });
  step(failed ? 'stopped (with a failure)' : 'lamp stopped, service closed, temp database removed');
}
process.exit(failed ? 1 : 0);

import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { lampManifest as sdkLampManifest } from '../../src/cli/simulated.js';
import { attachDevice, backoffDelay, CommandError, Device, type DeviceEvent, type DeviceOptions } from '@dfc/device';
import { client } from '../helpers/api.js';
import { createAgent, createSetupToken } from '../helpers/fixtures.js';
import { startTestServer, useTestServer, type TestServer } from '../helpers/server.js';

let owner: string;
let agent: { token: string; principal: string };
const running: Device[] = [];

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('sdk-owner');
  agent = await createAgent(api, owner, { access: 'act' });
});
afterAll(async () => {
  await Promise.all(running.map((d) => d.stop()));
});

/** Waits until `check` returns a value (no timed assertion: the test timeout bounds it). */
async function until<T>(check: () => T | undefined | Promise<T | undefined>, pauseMs = 10): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}

/** A device built with the SDK, its events recorded. */
async function sdkDevice(options: Partial<DeviceOptions> & { kind?: 'device' | 'gateway'; url?: DeviceOptions['url'] } = {}) {
  const setup = await createSetupToken(api, owner);
  const credentials = await attachDevice({ url: server.url, setupToken: setup.token, name: 'SDK lamp', kind: options.kind ?? 'device' });
  const events: DeviceEvent[] = [];
  const device = new Device({
    url: server.url,
    credentials,
    manifest: sdkLampManifest,
    backoff: { initialMs: 20, maxMs: 200 },
    ...options,
    onEvent: (e) => events.push(e),
  });
  running.push(device);
  return { device, credentials, events };
}

async function grant(deviceId: string, capabilities = ['get_state', 'set_power', 'set_brightness']) {
  const res = await api.post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId, capabilities } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

async function request(deviceId: string, capability: string, args: Record<string, unknown>, base = api): Promise<string> {
  const res = await base.post(`/v1/devices/${deviceId}/actions`, { token: agent.token, body: { capability, arguments: args, ttlSeconds: 120 } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id;
}

async function finished(actionId: string, base = api) {
  return until(async () => {
    const res = await base.get(`/v1/actions/${actionId}`, { token: agent.token });
    return ['queued', 'received'].includes(res.body.data?.status) ? undefined : res.body.data;
  });
}

describe('Device: attach, manifest, wake, run, report', () => {
  it('attaches with a setup token, publishes its manifest and runs a woken command once, reporting the result', async () => {
    const calls: unknown[] = [];
    const { device, credentials, events } = await sdkDevice();
    device.handle<{ on: boolean }>('set_power', (args, ctx) => {
      calls.push({ args, ctx: { actionId: ctx.actionId, deviceId: ctx.deviceId, childKey: ctx.childKey, capability: ctx.capability } });
      return { on: args.on };
    });
    await device.start();
    await until(() => (device.connected ? true : undefined));
    const listed = (await api.get('/v1/devices', { token: owner })).body.data.find((d: { id: string }) => d.id === credentials.deviceId);
    expect(listed.capabilities.map((c: { name: string }) => c.name)).toEqual(['get_state', 'set_power', 'set_brightness']);

    await grant(credentials.deviceId);
    const actionId = await request(credentials.deviceId, 'set_power', { on: true });
    expect(await finished(actionId)).toMatchObject({ status: 'succeeded', result: { on: true } });
    expect(calls).toEqual([{ args: { on: true }, ctx: { actionId, deviceId: credentials.deviceId, childKey: null, capability: 'set_power' } }]);
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['manifest', 'connected', 'wake', 'command', 'result']));
    await device.stop();
  });

  it('reports a CommandError as failed with its code, and a capability without a handler as unknown_capability', async () => {
    const { device, credentials } = await sdkDevice();
    device.handle('set_power', () => {
      throw new CommandError('overheated', 'Too hot to switch.');
    });
    await device.start();
    await grant(credentials.deviceId);
    const refused = await request(credentials.deviceId, 'set_power', { on: true });
    expect(await finished(refused)).toMatchObject({ status: 'failed', error: { code: 'overheated', message: 'Too hot to switch.' } });
    const unhandled = await request(credentials.deviceId, 'get_state', {});
    expect(await finished(unhandled)).toMatchObject({ status: 'failed', error: { code: 'unknown_capability' } });
    await device.stop();
  });

  it('runs gateway children by manifest key or child device id, telling the handler which child', async () => {
    const manifest = {
      capabilities: [],
      children: [
        { key: 'lamp-1', name: 'Lamp 1', kind: 'device' as const, capabilities: sdkLampManifest.capabilities },
        { key: 'lamp-2', name: 'Lamp 2', kind: 'device' as const, capabilities: sdkLampManifest.capabilities },
      ],
    };
    const { device, events } = await sdkDevice({ kind: 'gateway', manifest });
    const ran: string[] = [];
    device.child('lamp-1').handle('set_power', (_args, ctx) => {
      ran.push(`lamp-1 via key (${ctx.childKey})`);
      return { child: 1 };
    });
    await device.start();
    const lamp2 = device.childId('lamp-2')!;
    device.child(lamp2).handle('set_power', (_args, ctx) => {
      ran.push(`lamp-2 via id (${ctx.childKey})`);
      return { child: 2 };
    });
    expect(events.find((e) => e.type === 'manifest')).toMatchObject({
      children: expect.arrayContaining([{ key: 'lamp-1', deviceId: device.childId('lamp-1') }]),
    });
    await grant(device.childId('lamp-1')!);
    await grant(lamp2);
    const first = await request(device.childId('lamp-1')!, 'set_power', { on: true });
    const second = await request(lamp2, 'set_power', { on: false });
    expect(await finished(first)).toMatchObject({ status: 'succeeded', result: { child: 1 } });
    expect(await finished(second)).toMatchObject({ status: 'succeeded', result: { child: 2 } });
    expect(ran).toEqual(['lamp-1 via key (lamp-1)', 'lamp-2 via id (lamp-2)']);
    await device.stop();
  });

  it('stops with a revoked event when the owner revokes the device (socket closed with 4401)', async () => {
    const { device, credentials, events } = await sdkDevice();
    await device.start();
    await until(() => (device.connected ? true : undefined));
    await api.post(`/v1/devices/${credentials.deviceId}/revoke`, { token: owner });
    await until(() => (device.stopped ? true : undefined));
    expect(events.filter((e) => e.type === 'revoked')).toHaveLength(1);
  });
});

describe('Device: last-known values', () => {
  it("reports a value on its own with report(function, value), and a read handler's result becomes the value by itself", async () => {
    const { device, credentials } = await sdkDevice();
    device.handle('get_state', () => ({ on: false, level: 7 }));
    await device.start();
    await until(() => (device.connected ? true : undefined));
    await device.report('get_state', { on: true, level: 3 });
    const state = async () => (await api.get(`/v1/devices/${credentials.deviceId}/state`, { token: owner })).body.data;
    expect((await state()).values).toMatchObject([{ capability: 'get_state', value: { on: true, level: 3 }, source: 'report' }]);
    await expect(device.report('set_power', { on: true })).rejects.toThrow();

    await grant(credentials.deviceId);
    const actionId = await request(credentials.deviceId, 'get_state', {});
    await finished(actionId);
    expect((await state()).values).toMatchObject([{ capability: 'get_state', value: { on: false, level: 7 }, source: 'result', actionId }]);
    await device.stop();
  });
});

describe('Device: polling when the wake socket is down', () => {
  it('still runs commands by polling `next` behind a proxy that refuses WebSocket upgrades', async () => {
    // A real HTTP proxy that forwards requests but not upgrades, as some corporate proxies do.
    const target = new URL(server.url);
    const proxy = http.createServer((req, res) => {
      const upstream = http.request({ host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      req.pipe(upstream);
    });
    proxy.on('upgrade', (_req, socket) => socket.end('HTTP/1.1 501 Not Implemented\r\nContent-Length: 0\r\nConnection: close\r\n\r\n'));
    await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
    const proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
    try {
      const { device, credentials, events } = await sdkDevice({ url: proxyUrl, fallbackPollMs: 50 });
      device.handle('get_state', () => ({ on: false }));
      await device.start();
      await grant(credentials.deviceId);
      const actionId = await request(credentials.deviceId, 'get_state', {});
      expect(await finished(actionId)).toMatchObject({ status: 'succeeded', result: { on: false } });
      expect(device.connected).toBe(false);
      expect(events.some((e) => e.type === 'disconnected' && e.reason.includes('501'))).toBe(true);
      expect(events.some((e) => e.type === 'wake')).toBe(false);
      await device.stop();
    } finally {
      await new Promise((resolve) => proxy.close(resolve));
    }
  });
});

describe('Device: a server restart on the same database', () => {
  it('loses no command and runs none twice: queued before the stop, in flight across it, and queued after the restart', async () => {
    const first = await startTestServer();
    const dir = first.dir;
    let current: TestServer = first;
    let firstApi = client(first.url);
    const restartOwner = await first.ownerToken('restart-owner');
    const restartAgent = await createAgent(firstApi, restartOwner, { access: 'act' });
    const setup = await createSetupToken(firstApi, restartOwner);
    const credentials = await attachDevice({ url: first.url, setupToken: setup.token, name: 'Restart lamp' });

    const runs = new Map<string, number>();
    let gateEntered!: () => void;
    const entered = new Promise<void>((resolve) => (gateEntered = resolve));
    let openGate!: () => void;
    const gate = new Promise<void>((resolve) => (openGate = resolve));
    const events: DeviceEvent[] = [];
    const device = new Device({
      url: () => current.url, // a URL provider, in case the restart cannot have the same port
      credentials,
      manifest: sdkLampManifest,
      backoff: { initialMs: 20, maxMs: 200 },
      fallbackPollMs: 50,
      onEvent: (e) => events.push(e),
    });
    running.push(device);
    device.handle<{ level: number }>('set_brightness', async ({ level }, ctx) => {
      runs.set(ctx.actionId, (runs.get(ctx.actionId) ?? 0) + 1);
      if (level === 3) {
        gateEntered();
        await gate; // held while the server goes down, so the result POST meets a dead server
      }
      return { level };
    });
    const queue = async (level: number) => {
      const res = await client(current.url).post(`/v1/devices/${credentials.deviceId}/actions`, {
        token: restartAgent.token,
        body: { capability: 'set_brightness', arguments: { level }, ttlSeconds: 120 },
      });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      return res.body.data.id as string;
    };
    const status = async (id: string) => (await client(current.url).get(`/v1/actions/${id}`, { token: restartAgent.token })).body.data;

    await device.start();
    await until(() => (device.connected ? true : undefined));
    const granted = await firstApi.post('/v1/grants', {
      token: restartOwner,
      body: { principal: restartAgent.principal, deviceId: credentials.deviceId, capabilities: ['set_brightness'] },
    });
    expect(granted.status).toBe(201);
    const before = [await queue(1), await queue(2)];
    for (const id of before) await until(async () => ((await status(id)).status === 'succeeded' ? true : undefined));

    const inFlight = await queue(3);
    await entered;
    const queuedBeforeStop = await queue(4); // the drain is busy: this one waits in the queue
    await first.close();
    openGate();
    await until(() => (events.some((e) => e.type === 'report-retry' && e.actionId === inFlight) ? true : undefined));

    try {
      current = await startTestServer({ dir, env: { PORT: String(new URL(first.url).port) } });
    } catch {
      current = await startTestServer({ dir }); // the port was taken meanwhile: the URL provider follows
    }
    try {
      firstApi = client(current.url);
      const after = [await queue(5), await queue(6)];
      const all = [...before, inFlight, queuedBeforeStop, ...after];
      for (const id of all) await until(async () => (['succeeded', 'failed', 'expired'].includes((await status(id)).status) ? true : undefined));
      for (const id of all) expect((await status(id)).status, id).toBe('succeeded');
      expect([...runs.keys()].sort()).toEqual([...all].sort());
      expect([...runs.values()].every((n) => n === 1)).toBe(true);
      // The socket comes back too, though the commands may all have been fetched by the
      // polling fallback before its jittered backoff let it reconnect (the test's timeout bounds the wait).
      await until(() => (events.filter((e) => e.type === 'connected').length >= 2 ? true : undefined));
      await device.stop();
    } finally {
      await current.close();
    }
  }, 30_000);
});

describe('backoffDelay', () => {
  it('grows exponentially from the initial delay, is jittered within the upper half, and stops at the maximum', () => {
    expect(backoffDelay(0, 250, 30_000, () => 0)).toBe(125);
    expect(backoffDelay(0, 250, 30_000, () => 1)).toBe(250);
    expect(backoffDelay(3, 250, 30_000, () => 0.5)).toBe(1500);
    expect(backoffDelay(20, 250, 30_000, () => 1)).toBe(30_000);
    expect(backoffDelay(20, 250, 30_000, () => 0)).toBe(15_000);
  });
});

describe('npm run demo', () => {
  it('runs the whole loop on a temp database and exits 0', async () => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/demo.ts'], { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.stderr.on('data', (chunk: Buffer) => (output += String(chunk)));
    const code = await new Promise<number | null>((resolve) => child.on('close', resolve));
    expect(code, output).toBe(0);
    expect(output).toContain('succeeded {"on":true');
    expect(output).toContain('403 grant_required');
    expect(output).not.toMatch(/dfc_(agent|device|ticket)_[A-Za-z0-9_-]{20}/); // no secret printed
  }, 60_000);
});

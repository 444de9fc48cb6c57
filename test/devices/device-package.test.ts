import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createAgent, createSetupToken } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The device SDK as a device maker gets it (packages/device-sdk/README.md "Build a device"): `npm pack` of
 * packages/device-sdk, installed from the tarball into a fresh project outside the repository
 * (ws from the registry), and the thermostat of its README run there with plain `node` against a
 * live service.
 */
const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '../..');
const SDK = path.join(ROOT, 'packages/device-sdk');
const EXAMPLE = path.join(SDK, 'examples/thermostat.mjs');

// npm as a device maker runs it: without the npm_* variables `npm test` sets for this repository
// (its workspace, its package), but with the user's own registry, cache and config.
const KEPT = new Set(['npm_config_registry', 'npm_config_cache', 'npm_config_userconfig']);
const npmEnv = Object.fromEntries(Object.entries(process.env).filter(([name]) => !name.toLowerCase().startsWith('npm_') || KEPT.has(name.toLowerCase())));

interface Packed {
  filename: string;
  size: number;
  unpackedSize: number;
  files: { path: string }[];
}

let dir: string;
let project: string;
let packed: Packed;
const devices: ChildProcess[] = [];

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-device-package-'));
  const { stdout } = await run('npm', ['pack', '--json', '--loglevel=error', '--pack-destination', dir], { cwd: SDK, env: npmEnv });
  // The JSON report follows whatever prepack's build printed.
  packed = (JSON.parse(stdout.slice(stdout.search(/^\[/m))) as Packed[])[0]!;

  project = path.join(dir, 'thermostat');
  fs.mkdirSync(project);
  fs.writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'thermostat', private: true, type: 'module' }));
  await run('npm', ['install', path.join(dir, packed.filename), '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], {
    cwd: project,
    env: npmEnv,
  });
}, 90_000);

afterAll(async () => {
  for (const device of devices) device.kill();
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('The packed device SDK (@dfc/device)', () => {
  it('ships built JavaScript with type declarations, and no source, server file or install script', () => {
    const files = packed.files.map((f) => f.path).sort();
    expect(files).toEqual(expect.arrayContaining(['dist/index.js', 'dist/index.d.ts', 'dist/device.js', 'dist/device.d.ts', 'dist/http.js', 'dist/http.d.ts']));
    expect(files.filter((f) => !/^(dist\/[a-z-]+\.(js|d\.ts)|examples\/[a-z-]+\.mjs|package\.json|README\.md)$/.test(f))).toEqual([]);

    const manifest = JSON.parse(fs.readFileSync(path.join(project, 'node_modules/@dfc/device/package.json'), 'utf8'));
    expect(Object.keys(manifest.scripts ?? {}).filter((s) => ['preinstall', 'install', 'postinstall', 'prepare'].includes(s))).toEqual([]);
    expect(Object.keys(manifest.dependencies)).toEqual(['ws']);
    expect(fs.readdirSync(path.join(project, 'node_modules')).sort()).toEqual(['.package-lock.json', '@dfc', 'ws']);
  });

  it('type-checks a TypeScript consumer against its declarations', { timeout: 60_000 }, async () => {
    fs.writeFileSync(
      path.join(project, 'check.ts'),
      [
        "import { attachDevice, CommandError, CommandRecalled, Device, type DeviceEvent, type Manifest } from '@dfc/device';",
        "const manifest: Manifest = { capabilities: [{ name: 'read_temperature', kind: 'read', arguments: { type: 'object' } }] };",
        "const credentials = await attachDevice({ url: 'http://127.0.0.1:1', setupToken: 'dfc_setup_x', name: 'x' });",
        "const device = new Device({ url: () => 'http://127.0.0.1:1', credentials, manifest, onEvent: (e: DeviceEvent) => e.type });",
        "device.handle<{ celsius: number }>('set_target', ({ celsius }, ctx) => (ctx.signal.aborted ? celsius : new CommandError('x', 'y')));",
        "device.child('bedroom').handle('read_temperature', () => 18.5).handle('read_humidity', (_args, ctx) => ctx.childKey);",
        "device.handle('x', (_args, ctx) => (ctx.signal.reason instanceof CommandRecalled ? ctx.signal.reason.reason : null));",
        '// @ts-expect-error kind is read or control',
        "const wrong: Manifest = { capabilities: [{ name: 'x', kind: 'write', arguments: {} }] };",
        'export { wrong };',
      ].join('\n'),
    );
    const tsc = path.join(ROOT, 'node_modules/typescript/bin/tsc');
    // skipLibCheck: the consumer's code is what is checked against the declarations, not @types/node itself.
    const flags = [
      '--noEmit',
      '--strict',
      '--skipLibCheck',
      '--module',
      'nodenext',
      '--target',
      'es2022',
      '--typeRoots',
      path.join(ROOT, 'node_modules/@types'),
      '--types',
      'node',
    ];
    await expect(run(process.execPath, [tsc, ...flags, 'check.ts'], { cwd: project })).resolves.toBeDefined();
  });
});

/** Waits until `check` returns a value (no timed assertion: the test timeout bounds it). */
async function until<T>(check: () => T | undefined | Promise<T | undefined>): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

/** Runs the example with plain node in the fresh project; its stdout is one JSON event a line. */
function startThermostat(env: Record<string, string>) {
  fs.copyFileSync(EXAMPLE, path.join(project, 'thermostat.mjs'));
  const child = spawn(process.execPath, ['thermostat.mjs'], {
    cwd: project,
    env: { PATH: process.env.PATH, DFC_URL: server.url, DFC_CREDENTIALS: path.join(project, 'credentials.json'), ...env },
  });
  devices.push(child);
  const events: { type: string }[] = [];
  let output = '';
  let pending = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    pending += chunk;
    for (let end = pending.indexOf('\n'); end >= 0; end = pending.indexOf('\n')) {
      events.push(JSON.parse(pending.slice(0, end)));
      pending = pending.slice(end + 1);
    }
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (output += chunk));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const connected = until(async () => {
    if (child.exitCode !== null) throw new Error(`The thermostat exited (${child.exitCode}): ${output}`);
    return events.some((e) => e.type === 'connected') ? true : undefined;
  });
  return { child, events, exited, connected };
}

describe('packages/device-sdk/README.md "Build a device": the thermostat example on the installed package', () => {
  it('attaches as a gateway with a child, runs commands and reports results and errors; a restart reuses its credential', { timeout: 60_000 }, async () => {
    const owner = await server.ownerToken('thermostat-owner');
    const setup = await createSetupToken(api, owner, { name: 'thermostat' });
    const first = startThermostat({ DFC_SETUP_TOKEN: setup.token });
    await first.connected;

    const listed = (await api.get('/v1/devices', { token: owner })).body.data as { id: string; name: string; kind: string; parentId: string | null }[];
    const hall = listed.find((d) => d.name === 'Hall thermostat')!;
    const bedroom = listed.find((d) => d.name === 'Bedroom sensor')!;
    expect(hall).toMatchObject({ kind: 'gateway', parentId: null });
    expect(bedroom).toMatchObject({ kind: 'device', parentId: hall.id });
    expect(fs.readFileSync(path.join(project, 'credentials.json'), 'utf8')).toContain(hall.id);

    const agent = await createAgent(api, owner, { access: 'act' });
    for (const [deviceId, capabilities] of [
      [hall.id, ['read_temperature', 'set_target']],
      [bedroom.id, ['read_temperature']],
    ] as const) {
      const granted = await api.post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId, capabilities } });
      expect(granted.status, JSON.stringify(granted.body)).toBe(201);
    }
    const act = async (deviceId: string, capability: string, args: Record<string, unknown>) => {
      const res = await api.post(`/v1/devices/${deviceId}/actions`, { token: agent.token, body: { capability, arguments: args, ttlSeconds: 60 } });
      if (res.status !== 201) return res;
      return until(async () => {
        const action = await api.get(`/v1/actions/${res.body.data.id}`, { token: agent.token });
        return ['queued', 'received'].includes(action.body.data.status) ? undefined : action;
      });
    };

    expect((await act(hall.id, 'set_target', { celsius: 22.5 })).body.data).toMatchObject({ status: 'succeeded', result: { target: 22.5, celsius: 20.5 } });
    expect((await act(hall.id, 'read_temperature', {})).body.data).toMatchObject({ status: 'succeeded', result: { celsius: 20.5, target: 22.5 } });
    expect((await act(bedroom.id, 'read_temperature', {})).body.data).toMatchObject({ status: 'succeeded', result: { celsius: 18.5 } });
    expect((await act(hall.id, 'set_target', { celsius: 28 })).body.data).toMatchObject({
      status: 'failed',
      error: { code: 'above_heater_limit', message: 'This heater reaches 26 °C at most.' },
    });
    const outside = await act(hall.id, 'set_target', { celsius: 22.2 });
    expect(outside.status).toBe(400);
    expect(outside.body.error.code).toBe('validation_failed');
    expect(first.events.map((e) => e.type)).toEqual(expect.arrayContaining(['manifest', 'connected', 'wake', 'command', 'result']));

    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);
    expect(first.events.at(-1)).toEqual({ type: 'stopped' });

    // No setup token this time (it is spent): the stored credential attaches the same device.
    const second = startThermostat({});
    await second.connected;
    expect((await act(bedroom.id, 'read_temperature', {})).body.data).toMatchObject({ status: 'succeeded', result: { celsius: 18.5 } });
    second.child.kill('SIGTERM');
    expect(await second.exited).toBe(0);
  });
});

describe('Production install (npm ci --omit=dev)', () => {
  it('runs no install script of this project and pulls no Node binary: the conformance tools stay in tools/conformance', () => {
    const pkg = JSON.parse(fs.readFileSync(path.join(ROOT, 'package.json'), 'utf8'));
    const lock = JSON.parse(fs.readFileSync(path.join(ROOT, 'package-lock.json'), 'utf8')) as { packages: Record<string, { dev?: boolean }> };
    expect(Object.keys(pkg.scripts).filter((s) => ['preinstall', 'install', 'postinstall', 'prepare'].includes(s))).toEqual([]);
    expect(pkg.workspaces).toEqual(['packages/*']);
    const runtime = Object.keys(lock.packages).filter((name) => lock.packages[name]!.dev !== true);
    expect(runtime.filter((name) => /(^|\/)node_modules\/(node|node-[a-z]+-[a-z0-9]+)$/.test(name))).toEqual([]);
    expect(runtime.filter((name) => name.startsWith('tools/'))).toEqual([]);
  });
});

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant, queue } from '../helpers/actions.js';
import { createAgent, createSetupToken } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The single-file MicroPython-style client (docs/devices/micropython/client.py) against the
 * real service. No MicroPython interpreter installs from the registries this project uses
 * (Debian has no unix port), so it runs under CPython with `urequests` shimmed over urllib
 * (test/devices/micropython-shim/urequests.py). DFC_PYTHON names the interpreter, as for the
 * Python SDK's tests.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const CLIENT = path.join(ROOT, 'docs/devices/micropython/client.py');
const SHIM = path.join(ROOT, 'test/devices/micropython-shim');
const PYTHON = process.env.DFC_PYTHON ?? '/usr/bin/python3';

const server = useTestServer();
const api = server.api;
let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-micropython-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** Runs the client to its end: exit code and everything it printed. */
function client(args: string[]): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(PYTHON, [CLIENT, ...args], {
      cwd: dir,
      env: { ...process.env, PYTHONPATH: SHIM, PYTHONDONTWRITEBYTECODE: '1' },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 60_000,
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.stderr.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

async function devicesNamed(owner: string, name: string) {
  const res = await api.get('/v1/devices', { token: owner });
  return (res.body.data as { id: string; name: string; capabilities: { name: string }[] }[]).filter((d) => d.name === name);
}

describe('the MicroPython client (docs/devices/micropython/client.py)', () => {
  it('attaches from the QR text, publishes, long-polls, runs two commands and reports them', async () => {
    const owner = await server.ownerToken('micropython-owner');
    const agent = await createAgent(api, owner, { access: 'act' });
    const setup = await createSetupToken(api, owner, { name: 'Desk LED' });
    const credential = path.join(dir, 'credential.json');
    const running = client(['http://unused.invalid', `${server.url}/#setup-token=${setup.token}`, credential, '2']);

    // It names itself nothing: the setup token's name is the device's.
    await expect
      .poll(async () => (await devicesNamed(owner, 'Desk LED')).map((d) => d.capabilities.map((c) => c.name).sort()), { timeout: 15_000 })
      .toEqual([['get_state', 'set_led']]);
    const [device] = await devicesNamed(owner, 'Desk LED');
    await grant(api, owner, agent.principal, device!.id, ['set_led', 'get_state']);

    const on = await queue(api, agent.token, device!.id, { capability: 'set_led', arguments: { on: true } });
    await expect.poll(async () => (await api.get(`/v1/actions/${on.id}`, { token: owner })).body.data.status, { timeout: 15_000 }).toBe('succeeded');
    const read = await queue(api, agent.token, device!.id, { capability: 'get_state', arguments: {} });
    const done = await running;
    expect(done.code, done.output).toBe(0);
    const action = (await api.get(`/v1/actions/${read.id}`, { token: owner })).body.data;
    expect(action).toMatchObject({ status: 'succeeded', result: { on: true } });

    // The credential it kept serves the next start: no second attach, and the spent token is not needed.
    const saved = JSON.parse(fs.readFileSync(credential, 'utf8')) as Record<string, string>;
    expect(saved).toMatchObject({ service: server.url, deviceId: device!.id });
    const again = await client(['http://unused.invalid', 'spent', credential, '0']);
    expect(again.code, again.output).toBe(0);
    expect(await devicesNamed(owner, 'Desk LED')).toHaveLength(1);
  });

  it('ends in one line with exit code 1 when the setup token is spent', async () => {
    const owner = await server.ownerToken('micropython-spent');
    const setup = await createSetupToken(api, owner, { name: 'Spent' });
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body: {} })).status).toBe(201);
    const done = await client([server.url, setup.token, path.join(dir, 'spent.json'), '0']);
    expect(done.code).toBe(1);
    expect(done.output.trim().split('\n')).toEqual([expect.stringMatching(/^dfc: the setup token was refused/)]);
  });

  it('ends in one line with exit code 2 when the service cannot be reached', async () => {
    const done = await client(['http://127.0.0.1:9', 'dfc_setup_x', path.join(dir, 'unreachable.json'), '0']);
    expect(done.code).toBe(2);
    expect(done.output.trim().split('\n')).toEqual([expect.stringMatching(/^dfc: cannot reach the service/)]);
  });
});

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/oauth.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { SERVICE_MAIN } from '../helpers/entry-point.js';

/**
 * The first minute of a newcomer (docs/getting-started.md "2. Open the console"): the service as `npm start` runs it,
 * with no configuration but a database in a temp folder, reached in a real browser at the
 * address it prints and under the other names people type (localhost, a LAN host name).
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-first-contact-'));

interface Started {
  child: ChildProcess;
  stdout: () => string;
  exited: Promise<number | null>;
}

/** The entry point with only what the test must set: loopback, any port, a temp database. */
function start(name: string, env: Record<string, string> = {}): Started {
  const child = spawn(process.execPath, [SERVICE_MAIN], {
    cwd: ROOT,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', DATABASE_URL: `file:${path.join(dir, `${name}.db`)}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout!.on('data', (chunk: Buffer) => (stdout += String(chunk)));
  child.stderr!.on('data', (chunk: Buffer) => (stdout += String(chunk)));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  return { child, stdout: () => stdout, exited };
}

async function listening(started: Started): Promise<Record<string, string>> {
  for (let i = 0; i < 600; i++) {
    const line = started
      .stdout()
      .split('\n')
      .find((l) => l.includes('"msg":"listening"'));
    if (line) return JSON.parse(line) as Record<string, string>;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(`the service did not say it listens:\n${started.stdout()}`);
}

let service: Started;
let url: string;
let port: string;
let browser: Browser;

beforeAll(async () => {
  service = start('plain');
  url = (await listening(service)).url!;
  port = new URL(url).port;
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      ...CHROMIUM_ARGS,
      // Other names for this machine, as a LAN's DNS or /etc/hosts would give them.
      '--host-resolver-rules=MAP raspberrypi.local 127.0.0.1, MAP dfc 127.0.0.1, MAP dfc.example.com 127.0.0.1',
    ],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  service?.child.kill('SIGKILL');
  fs.rmSync(dir, { recursive: true, force: true });
});

/** Opens `address` in a fresh browser context, follows it to the sign-in and signs in as `owner`. */
async function signInAt(address: string, owner: string) {
  const context = await browser.newContext();
  const page = await context.newPage();
  await page.goto(address);
  await page.fill('#sub', owner);
  await page.click('#development-sign-in');
  const error = (await page.locator('#error').count()) > 0 ? await page.textContent('#error') : null;
  const result = { path: new URL(page.url()).pathname, error };
  await context.close();
  return result;
}

describe('the console at the address the service prints', () => {
  it('the listening line names the console, the API reference and the MCP endpoint', async () => {
    const line = await listening(service);
    expect(line).toMatchObject({ console: `${url}/console`, apiReference: `${url}/docs`, mcp: `${url}/mcp` });
  });

  it('a browser at / is led to the console, and the development sign-in works at 127.0.0.1', async () => {
    const result = await signInAt(`${url}/`, 'alice');
    expect(result.error).toBeNull();
    expect(result.path).toBe('/console');
  });

  it.each([
    ['localhost', 'localhost', '/console/'],
    ['a LAN host name', 'raspberrypi.local', '/console'],
    ["a container's name", 'dfc', '/console'],
  ])('the development sign-in works at %s', async (_name, host, where) => {
    const result = await signInAt(`http://${host}:${port}${where}`, 'bob');
    expect(result.error).toBeNull();
    expect(result.path).toBe('/console');
  });

  it('a public name without PUBLIC_BASE_URL is refused with the setting that fixes it', async () => {
    const result = await signInAt(`http://dfc.example.com:${port}/console`, 'carol');
    expect(result.error).toContain(`PUBLIC_BASE_URL=http://dfc.example.com:${port}`);
  });
});

describe('the origin rule on console forms', () => {
  const post = (origin: string, host?: string) =>
    fetch(`${url}/console/sign-in/development`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin, 'content-type': 'application/x-www-form-urlencoded', ...(host ? { host } : {}) },
      body: 'sub=mallory',
    });

  it("refuses a post from another site's page", async () => {
    const response = await post('http://evil.example');
    expect(response.status).toBe(403);
    expect(await response.text()).toContain('only be posted from this service&#39;s own pages');
  });

  it('with PUBLIC_BASE_URL set, refuses every other origin and names the variable', async () => {
    const strict = start('strict', { PUBLIC_BASE_URL: 'http://dfc.internal:8787' });
    try {
      const address = (await listening(strict)).url!;
      const response = await fetch(`${address}/console/sign-in/development`, {
        method: 'POST',
        redirect: 'manual',
        headers: { origin: address, 'content-type': 'application/x-www-form-urlencoded' },
        body: 'sub=dave',
      });
      expect(response.status).toBe(403);
      const page = await response.text();
      expect(page).toContain('PUBLIC_BASE_URL is http://dfc.internal:8787');
    } finally {
      strict.child.kill('SIGKILL');
    }
  });
});

describe('GET /', () => {
  it('sends a browser to the console', async () => {
    const response = await fetch(`${url}/`, { redirect: 'manual', headers: { accept: 'text/html,application/xhtml+xml' } });
    expect(response.status).toBe(302);
    expect(response.headers.get('location')).toBe('/console');
  });

  it("gives an API client an index of the service's URLs", async () => {
    const response = await fetch(`${url}/`, { headers: { accept: 'application/json' } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({
      data: { console: '/console', apiReference: '/docs', openapi: '/openapi.json', mcp: '/mcp', health: '/healthz', readiness: '/readyz' },
    });
  });

  it('/console/ leads to the console', async () => {
    const response = await fetch(`${url}/console/`, { redirect: 'manual' });
    expect(response.status).toBe(301);
    expect(response.headers.get('location')).toBe('/console');
  });
});

describe('what the process prints', () => {
  it('/healthz ends with a newline', async () => {
    const body = await (await fetch(`${url}/healthz`)).text();
    expect(body.endsWith('}\n')).toBe(true);
    expect(JSON.parse(body)).toMatchObject({ service: 'dfc' });
  });

  it('shutdown logs one line after the listening line', async () => {
    const run = start('stopped');
    await listening(run);
    run.child.kill('SIGTERM');
    expect(await run.exited).toBe(0);
    const stopped = run
      .stdout()
      .split('\n')
      .filter((l) => l.includes('"msg":"stopped"'));
    expect(stopped).toHaveLength(1);
    expect(JSON.parse(stopped[0]!)).toMatchObject({ level: 'info', signal: 'SIGTERM' });
  });

  it('LOG_LEVEL=silent prints nothing, from start to stop', async () => {
    const quietPort = await freePort();
    const quiet = start('silent', { LOG_LEVEL: 'silent', PORT: String(quietPort) });
    let up = false;
    for (let i = 0; i < 600 && !up; i++) {
      up = await fetch(`http://127.0.0.1:${quietPort}/healthz`).then(
        (r) => r.ok,
        () => false,
      );
      if (!up) await new Promise((resolve) => setTimeout(resolve, 50));
    }
    expect(up).toBe(true);
    quiet.child.kill('SIGTERM');
    expect(await quiet.exited).toBe(0);
    expect(quiet.stdout()).toBe('');
  });
});

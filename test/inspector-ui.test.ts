import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * Issue 8: "MCP Inspector … in modern mode with a bearer token … and it works". `npm run
 * inspector` starts a demo service (a simulated lamp, an agent granted its functions) and the
 * Inspector 2.x web UI on the Node 24 of tools/conformance; headless Chromium then uses the UI
 * as a developer would: connect, list the tools, run a device tool and see its Action.
 */
const ROOT = path.resolve(import.meta.dirname, '..');
let inspector: ChildProcess;
let output = '';
let browser: BrowserContext;
let userDataDir: string;

/** A port nothing listens on now, so the Inspector's fixed defaults (6274…) cannot collide. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as net.AddressInfo;
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

beforeAll(async () => {
  const env = {
    ...process.env,
    CLIENT_PORT: String(await freePort()),
    MCP_SANDBOX_PORT: String(await freePort()),
    MCP_APP_ORIGIN_PORT: String(await freePort()),
  };
  inspector = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), ['scripts/inspector.ts'], { cwd: ROOT, env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
  inspector.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  inspector.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-inspector-'));
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  // The script, the demo service and the Inspector share one process group.
  if (inspector?.pid && inspector.exitCode === null) process.kill(-inspector.pid, 'SIGTERM');
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

async function inspectorUrl(): Promise<string> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const match = /http:\/\/127\.0\.0\.1:\d+\?MCP_INSPECTOR_API_TOKEN=[0-9a-f]+/.exec(output);
    if (match) return match[0];
    if (Date.now() > deadline || inspector.exitCode !== null) throw new Error(`the Inspector did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe('npm run inspector (web UI)', () => {
  it('connects to /mcp in modern mode, lists the fixed and device tools, and runs a device tool', { timeout: 90_000 }, async () => {
    const page = await browser.newPage();
    await page.goto(await inspectorUrl());
    await page.locator('input[type=checkbox], [role=switch]').first().click({ force: true });
    await page.getByText('Connected', { exact: true }).waitFor({ timeout: 20_000 });
    expect(await page.getByText('MCP 2026-07-28').isVisible()).toBe(true);

    await page.getByText('Tools', { exact: true }).first().click();
    for (const name of ['list_devices', 'list_functions', 'get_action', 'cancel_action', 'broadcast']) {
      await page.getByText(name, { exact: true }).first().waitFor();
    }
    const getState = page.getByText(/^get_state__[0-9a-f]{12}$/).first();
    await getState.click();
    await page.getByRole('button', { name: 'Execute Tool' }).click();
    await page.getByText(/"status": "succeeded"/).first().waitFor({ timeout: 20_000 });
  });
});

import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freePort } from '../helpers/oauth.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';

/**
 * The MCP Inspector works against this service in modern mode, with a bearer token and via OAuth.
 * `npm run inspector` starts a demo service (a simulated lamp, an agent granted its
 * functions) and the Inspector 2.x web UI on the Node 24 of tools/conformance; headless
 * Chromium then uses the UI as a developer would: connect (with the agent token, or through
 * the OAuth flow with this service's sign-in and consent pages), list the tools, run a device
 * tool and see its Action.
 */
const ROOT = path.resolve(import.meta.dirname, '../..');
let browser: BrowserContext;
let userDataDir: string;
const launched: ChildProcess[] = [];

interface Inspector {
  /** The web UI's address with its session token. */
  url: string;
  /** Everything the script and the Inspector printed so far. */
  output(): string;
}

/** Runs `npm run inspector -- <args>` (the script itself) and waits for the web UI's address. */
async function startInspector(args: string[]): Promise<Inspector> {
  // Ports nothing listens on now, so the Inspector's fixed defaults (6274…) cannot collide.
  const env = {
    ...process.env,
    CLIENT_PORT: String(await freePort()),
    MCP_SANDBOX_PORT: String(await freePort()),
    MCP_APP_ORIGIN_PORT: String(await freePort()),
    // OAuth tokens stay in the Inspector's memory: nothing written to this machine's keychain or home.
    MCP_INSPECTOR_SECRET_STORE: 'memory',
  };
  const child = spawn(path.join(ROOT, 'node_modules/.bin/tsx'), ['scripts/inspector.ts', ...args], {
    cwd: ROOT,
    env,
    detached: true,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  launched.push(child);
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const deadline = Date.now() + 60_000;
  for (;;) {
    const match = /http:\/\/127\.0\.0\.1:\d+\?MCP_INSPECTOR_API_TOKEN=[0-9a-f]+/.exec(output);
    if (match) return { url: match[0], output: () => output };
    if (Date.now() > deadline || child.exitCode !== null) throw new Error(`the Inspector did not start:\n${output}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

beforeAll(async () => {
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-inspector-'));
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: ['--headless', ...CHROMIUM_ARGS],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  // Each script, its demo service and its Inspector share one process group.
  for (const child of launched) if (child.pid && child.exitCode === null) process.kill(-child.pid, 'SIGTERM');
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

/**
 * Flips the Inspector's connect switch. Its checkbox is visually hidden behind the switch track,
 * and while the page lays out Playwright can find it with no box at all, so a pointer click
 * (even forced) fails now and then; a dispatched click runs the same React handler with no box needed.
 */
async function toggleConnection(page: Page): Promise<void> {
  const toggle = page.locator('input[type=checkbox], [role=switch]').first();
  await toggle.waitFor({ state: 'attached' });
  await toggle.dispatchEvent('click');
}

/** The Tools tab lists the fixed tools and the lamp's get_state, which runs to `succeeded`. */
async function runGetState(page: Page): Promise<void> {
  await page.getByText('Tools', { exact: true }).first().click();
  for (const name of ['list_devices', 'list_functions', 'get_action', 'cancel_action', 'broadcast']) {
    await page.getByText(name, { exact: true }).first().waitFor();
  }
  await page
    .getByText(/^get_state__[0-9a-f]{12}$/)
    .first()
    .click();
  await page.getByRole('button', { name: 'Execute Tool' }).click();
  await page
    .getByText(/"status": "succeeded"/)
    .first()
    .waitFor({ timeout: 20_000 });
}

describe('npm run inspector (web UI)', () => {
  it('connects to /mcp in modern mode with the bearer token, lists the fixed and device tools, and runs a device tool', { timeout: 90_000 }, async () => {
    const inspector = await startInspector([]);
    const page = await browser.newPage();
    await page.goto(inspector.url);
    await toggleConnection(page);
    await page.getByText('Connected', { exact: true }).waitFor({ timeout: 20_000 });
    expect(await page.getByText('MCP 2026-07-28').isVisible()).toBe(true);
    await runGetState(page);
    await page.close();
  });

  it(
    'connects through OAuth (--oauth): registers, sends the owner to sign in and approve, and the approved client runs a device tool once granted',
    { timeout: 120_000 },
    async () => {
      const inspector = await startInspector(['--oauth']);
      const [, serviceUrl, lampId, owner] = /demo service at (\S+) \(lamp (\S+)\); owner token for the consent page's sign-in:\n\s+(\S+)/.exec(
        inspector.output(),
      )!;
      const page = await browser.newPage();
      await page.goto(inspector.url);
      // No token: /mcp answers 401, the Inspector follows the metadata and sends the browser here.
      await Promise.all([
        page.waitForURL((url) => url.origin === serviceUrl && url.pathname === '/oauth/sign-in', { timeout: 30_000 }),
        toggleConnection(page),
      ]);
      await page.fill('#token', owner!);
      await Promise.all([page.waitForURL((url) => url.pathname === '/oauth/authorize'), page.click('#sign-in')]);
      const principal = (await page.textContent('#principal'))!;
      expect(principal).toMatch(/^oauth:/);
      expect(await page.textContent('#scopes')).toContain('act');
      await Promise.all([page.waitForURL((url) => url.href.startsWith(new URL(inspector.url).origin), { timeout: 30_000 }), page.click('#approve')]);
      await page.getByText('Connected', { exact: true }).waitFor({ timeout: 30_000 });
      expect(await page.getByText('MCP 2026-07-28').isVisible()).toBe(true);

      // Scopes are a ceiling only: the new principal sees the lamp once the owner grants it.
      const granted = await fetch(`${serviceUrl}/v1/grants`, {
        method: 'POST',
        headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
        body: JSON.stringify({ principal, deviceId: lampId, capabilities: ['get_state', 'set_power'] }),
      });
      expect(granted.status).toBe(201);
      // Reconnect to list again: the Inspector still holds the access token, no second consent.
      await page.reload();
      await toggleConnection(page);
      await page.getByText('Connected', { exact: true }).waitFor({ timeout: 30_000 });
      expect(new URL(page.url()).origin).toBe(new URL(inspector.url).origin);
      await runGetState(page);
      await page.close();
    },
  );
});

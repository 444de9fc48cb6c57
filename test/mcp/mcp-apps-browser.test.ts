import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { build } from 'esbuild';
import { chromium, type Browser, type Frame, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { simulateDevice, toolName, type SimulatedDevice } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { grantedWorld, type GrantedWorld } from '../helpers/world.js';

/**
 * The device view in a real MCP Apps host (docs/agents/apps.md): a page built on the ext-apps
 * SDK's AppBridge, connected to the service with the official MCP client under the agent's
 * token, renders the view of a device tool's answer in a sandboxed iframe. The view follows the
 * action to its result, calls the tool again through the host, and shows the service's refusal
 * once the grant is revoked. axe checks it in both themes; the screenshot is the docs' one.
 */

const SHOT = path.resolve(import.meta.dirname, '../..', 'docs', 'agents', 'apps-view.png');
const AXE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

/**
 * The host page's script, bundled for the browser: the official client declares MCP Apps, reads
 * the tool's `ui://` resource, and an AppBridge hands the view the tool's input and result and
 * forwards the view's tools/call to the server through that same client.
 */
const HOST_SOURCE = `
import { AppBridge, PostMessageTransport, getToolUiResourceUri, RESOURCE_MIME_TYPE } from '@modelcontextprotocol/ext-apps/app-bridge';
import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';

const info = { name: 'dfc-apps-test-host', version: '1.0.0' };
window.appsHost = {
  opened: [],
  async connect(token) {
    this.client = new Client(info, { capabilities: { extensions: { 'io.modelcontextprotocol/ui': { mimeTypes: [RESOURCE_MIME_TYPE] } } } });
    await this.client.connect(new StreamableHTTPClientTransport(new URL('/mcp', location.href), { requestInit: { headers: { Authorization: 'Bearer ' + token } } }));
    this.tools = (await this.client.listTools()).tools;
  },
  async run(name, args, meta) {
    const tool = this.tools.find((t) => t.name === name);
    const read = await this.client.readResource({ uri: getToolUiResourceUri(tool) });
    const content = read.contents[0];
    if (content.mimeType !== RESOURCE_MIME_TYPE) throw new Error('not an MCP App: ' + content.mimeType);
    document.getElementById('view')?.remove();
    const frame = document.createElement('iframe');
    frame.id = 'view';
    frame.title = 'Device view';
    frame.setAttribute('sandbox', 'allow-scripts');
    frame.style.width = '520px';
    frame.style.border = '0';
    document.body.appendChild(frame);
    const bridge = new AppBridge(this.client, info, { openLinks: {}, serverTools: {} }, { hostContext: { theme: 'light', displayMode: 'inline', toolInfo: { tool } } });
    bridge.onopenlink = async ({ url }) => { this.opened.push(url); return {}; };
    bridge.onsizechange = ({ height }) => { if (height) frame.style.height = height + 'px'; };
    const initialized = new Promise((resolve) => { bridge.oninitialized = resolve; });
    await bridge.connect(new PostMessageTransport(frame.contentWindow, frame.contentWindow));
    frame.srcdoc = content.text;
    await initialized;
    await bridge.sendToolInput({ arguments: args });
    const result = await this.client.callTool({ name, arguments: args, _meta: meta });
    await bridge.sendToolResult(result);
    this.bridge = bridge;
    return result.structuredContent.status;
  },
  theme(theme) { return this.bridge.sendHostContextChange({ theme }); },
};
`;

const server = useTestServer();

let world: GrantedWorld;
let device: SimulatedDevice;
let browser: Browser;
let page: Page;
let view: Frame;

async function axeViolations(frame: Frame): Promise<string[]> {
  await frame.evaluate(AXE);
  const results = (await frame.evaluate('axe.run(document, { resultTypes: ["violations"] })')) as {
    violations: { id: string; impact: string; nodes: { target: string[] }[] }[];
  };
  return results.violations
    .filter((v) => v.impact === 'serious' || v.impact === 'critical')
    .map((v) => `${v.id}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
}

beforeAll(async () => {
  world = await grantedWorld(server, 'owner-apps-browser', { device: { name: 'Porch lamp <b>' }, capabilities: ['get_state', 'set_power'] });
  // A report gives the device a last-known value before any action.
  const reported = await server.api.post(`/v1/device/${world.device.id}/state`, { token: world.device.token, body: { values: { get_state: { on: false } } } });
  expect(reported.status, JSON.stringify(reported.body)).toBe(200);
  // Each command waits a moment before its result, so the view sees it received first.
  device = simulateDevice(server.api, world.device, ({ args }) => ({ ok: true, result: args }), { delayMs: 1500 });
  // A function the owner approves each call of.
  await grant(server.api, world.owner, world.agent.principal, world.device.id, ['set_brightness'], undefined, 'owner');
  const bundle = await build({
    stdin: { contents: HOST_SOURCE, resolveDir: path.resolve(import.meta.dirname, '../..'), loader: 'js' },
    bundle: true,
    format: 'iife',
    platform: 'browser',
    write: false,
    logLevel: 'silent',
  });
  const script = bundle.outputFiles[0]!.text;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  page = await (await browser.newContext({ viewport: { width: 720, height: 900 } })).newPage();
  // The host page is served at the service's own origin, as a host's page would be its own: its client's requests to /mcp are same-origin.
  await page.route(`${server.url}/apps-test-host`, (route) =>
    route.fulfill({
      contentType: 'text/html',
      body: `<!doctype html><html lang="en"><head><title>Host</title></head><body><main><script>${script}</script></main></body></html>`,
    }),
  );
  await page.goto(`${server.url}/apps-test-host`);
  await page.evaluate((token) => (globalThis as unknown as { appsHost: { connect(t: string): Promise<void> } }).appsHost.connect(token), world.agent.token);
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await device?.stop();
});

interface Host {
  opened: string[];
  run(name: string, args: unknown, meta?: unknown): Promise<string>;
  theme(theme: string): Promise<void>;
}

/** Runs a device tool in the host page and finds the view it rendered. */
async function runInHost(name: string, args: Record<string, unknown>, meta: Record<string, unknown> = {}): Promise<string> {
  const status = await page.evaluate(([n, a, m]) => (globalThis as unknown as { appsHost: Host }).appsHost.run(n as string, a, m), [name, args, meta] as const);
  view = page
    .frames()
    .filter((f) => f !== page.mainFrame())
    .at(-1)!;
  return status;
}

describe('the device view in an AppBridge host', () => {
  it('renders the answer of a device tool and follows the action to succeeded', async () => {
    const name = toolName('set_power', world.device);
    // No wait: the tool answers the queued action, and the view follows it on its own.
    const status = await runInHost(name, { on: true }, { 'dfc/waitSeconds': 0 });
    expect(['queued', 'received']).toContain(status);
    // The device's name is text, never markup.
    expect(await view.locator('h1').textContent()).toBe('Porch lamp <b>');
    expect(await view.locator('h1 b').count()).toBe(0);
    await view.locator('li[aria-current="step"]', { hasText: 'Received by the device' }).waitFor({ timeout: 30_000 });
    await view.locator('li[aria-current="step"]', { hasText: 'Succeeded' }).waitFor({ timeout: 30_000 });
    expect(await view.locator('#outcome-text').textContent()).toContain('"on": true');
    await view.locator('#value-rows th', { hasText: 'get_state' }).waitFor();
    expect(await view.locator('#value-rows td code').first().textContent()).toContain('"on": false');
    expect(await view.locator('#value-rows td.when').first().textContent()).not.toBe('');
    expect(device.handled.map((h) => h.args)).toEqual([{ on: true }]);
  });

  it('passes axe in light and dark, and is the screenshot of docs/agents/apps.md', async () => {
    expect(await axeViolations(view)).toEqual([]);
    await page.locator('#view').screenshot({ path: SHOT });
    await page.evaluate(() => (globalThis as unknown as { appsHost: Host }).appsHost.theme('dark'));
    await view.locator('html[data-theme="dark"]').waitFor({ state: 'attached' });
    expect(await axeViolations(view)).toEqual([]);
    await page.evaluate(() => (globalThis as unknown as { appsHost: Host }).appsHost.theme('light'));
  });

  it('calls the tool again through the host when its control is pressed, and the device receives the command', async () => {
    await view.locator('#again').click();
    await expect.poll(() => device.handled.length, { timeout: 30_000 }).toBe(2);
    expect(device.handled[1]).toMatchObject({ capability: 'set_power', args: { on: true } });
    await view.locator('li[aria-current="step"]', { hasText: 'Succeeded' }).waitFor({ timeout: 30_000 });
  });

  it('waits for the owner with a link to the console page, then follows the approved action to its result', async () => {
    const status = await runInHost(toolName('set_brightness', world.device), { level: 40 }, { 'dfc/waitSeconds': 0 });
    expect(status).toBe('awaiting_approval');
    await view.locator('li[aria-current="step"]', { hasText: "Waiting for the owner's approval" }).waitFor();
    await view.locator('#open-console').click();
    await expect.poll(() => page.evaluate(() => (globalThis as unknown as { appsHost: Host }).appsHost.opened.length)).toBe(1);
    const [link] = await page.evaluate(() => (globalThis as unknown as { appsHost: Host }).appsHost.opened);
    const actionId = link!.slice(link!.lastIndexOf('/') + 1);
    expect(link).toBe(`${server.config.publicBaseUrl}/console/actions/${actionId}`);
    const approved = await server.api.post(`/v1/actions/${actionId}/approve`, { token: world.owner, body: {} });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);
    await view.locator('li[aria-current="step"]', { hasText: 'Succeeded' }).waitFor({ timeout: 30_000 });
    expect(await view.locator('li', { hasText: "Waiting for the owner's approval (done)" }).count()).toBe(1);
    expect(device.handled.at(-1)).toMatchObject({ capability: 'set_brightness', args: { level: 40 } });
  });

  it("shows the service's refusal when the grant is revoked, and the device receives nothing", async () => {
    const handled = device.handled.length;
    const revoked = await server.api.post('/v1/grants/revoke', {
      token: world.owner,
      body: { principal: world.agent.principal, deviceId: world.device.id, capability: 'set_brightness' },
    });
    expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
    await view.locator('#again').click();
    await view.locator('#error:not([hidden])').waitFor({ timeout: 30_000 });
    // The service's own refusal (the gate's 403 envelope), as its code and message.
    expect(await view.locator('#error').textContent()).toBe(
      `grant_required: Tool ${toolName('set_brightness', world.device)} is not a device function you may call now: no live grant for it.`,
    );
    expect(device.handled).toHaveLength(handled);
  });
});

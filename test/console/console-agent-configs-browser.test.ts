import { execFile, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant } from '../helpers/actions.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, lampManifest } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * After the owner creates an agent connection (or an OAuth client) on the Agents screen, the page
 * shows the MCP URL and a ready-to-paste configuration per client, the token filled in, each with
 * a copy button and, where the client has one, an install link. The TypeScript SDK program the page
 * shows is run as it is against the server; the JSON configurations and the links are parsed.
 */

const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'cora');

let browser: Browser;
let context: BrowserContext;
let page: Page;
let dir: string;
let lamp: { id: string };

const text = async (id: string) => (await page.textContent(`#${id}`)) ?? '';

beforeAll(async () => {
  lamp = await attachDevice(api, await owner(), { name: 'Desk lamp', manifest: lampManifest });
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-console-snippet-'));
  fs.symlinkSync(path.join(root, 'node_modules'), path.join(dir, 'node_modules'), 'dir');
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  // bypassCSP lets axe-core's script in; the page's own CSP is checked in test/console/console.test.ts.
  context = await browser.newContext({ bypassCSP: true });
  await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: server.issuer });
  page = await context.newPage();
  await page.goto(`${server.issuer}/console/sign-in`);
  await page.fill('#sub', 'cora');
  await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (dir) fs.rmSync(dir, { recursive: true, force: true });
});

describe('the Agents screen after an agent connection is created', () => {
  let token: string;
  const mcpUrl = () => `${server.issuer}/mcp`;

  beforeAll(async () => {
    await page.goto(`${server.issuer}/console/agents`);
    await page.fill('#agent-name', 'Snippet bot');
    await page.selectOption('#agent-access', 'act');
    await page.fill('#agent-principal', 'agent:snippet-bot');
    await Promise.all([page.waitForSelector('#created-token'), page.click('#create-agent')]);
    token = await text('created-token');
    await grant(api, await owner(), 'agent:snippet-bot', lamp.id, ['set_power']);
  }, 60_000);

  it('shows the MCP URL of the address the owner came to, with a copy button that copies it', async () => {
    expect(await text('mcp-url')).toBe(mcpUrl());
    await page.click('#mcp-url-copy');
    await expect.poll(() => text('mcp-url-status')).toBe('Copied.');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(mcpUrl());
  });

  it('shows each client configuration with the token filled in and its own copy button', async () => {
    for (const id of ['config-claude-code', 'config-claude-desktop', 'config-cursor', 'config-vscode', 'config-openai-agents', 'config-typescript']) {
      expect(await text(id), id).toContain(token);
      expect(await text(id), id).toContain(mcpUrl());
      expect(await page.locator(`#${id}-copy`).count(), id).toBe(1);
    }
    await page.click('summary:has-text("Cursor")');
    await page.click('#config-cursor-copy');
    await expect.poll(() => text('config-cursor-status')).toBe('Copied.');
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(await text('config-cursor'));
  });

  it('gives Claude Code a command that adds the server over HTTP with the header', async () => {
    expect(await text('config-claude-code')).toBe(`claude mcp add --transport http devices ${mcpUrl()} \\\n  --header "Authorization: Bearer ${token}"`);
  });

  it('gives Claude Desktop an mcp-remote bridge that sends the token in the header', async () => {
    const config = JSON.parse(await text('config-claude-desktop')) as {
      mcpServers: Record<string, { command: string; args: string[]; env: Record<string, string> }>;
    };
    const devices = config.mcpServers.devices!;
    expect(devices.command).toBe('npx');
    expect(devices.args).toEqual(['-y', 'mcp-remote', mcpUrl(), '--header', 'Authorization:${AUTH_HEADER}']);
    expect(devices.env).toEqual({ AUTH_HEADER: `Bearer ${token}` });
  });

  it('gives Cursor an mcp.json entry and an install link carrying the same server', async () => {
    const config = JSON.parse(await text('config-cursor')) as { mcpServers: Record<string, unknown> };
    const server = { url: mcpUrl(), headers: { Authorization: `Bearer ${token}` } };
    expect(config.mcpServers).toEqual({ devices: server });
    const link = new URL((await page.getAttribute('#config-cursor-install', 'href'))!);
    expect(`${link.protocol}//${link.host}${link.pathname}`).toBe('cursor://anysphere.cursor-deeplink/mcp/install');
    expect(link.searchParams.get('name')).toBe('devices');
    expect(JSON.parse(Buffer.from(link.searchParams.get('config')!, 'base64').toString('utf8'))).toEqual(server);
  });

  it('gives VS Code an --add-mcp command and an install link carrying the same server', async () => {
    const server = { name: 'devices', type: 'http', url: mcpUrl(), headers: { Authorization: `Bearer ${token}` } };
    const command = /^code --add-mcp '(.*)'$/.exec(await text('config-vscode'));
    expect(JSON.parse(command![1]!)).toEqual(server);
    const href = (await page.getAttribute('#config-vscode-install', 'href'))!;
    expect(href.startsWith('vscode:mcp/install?')).toBe(true);
    expect(JSON.parse(decodeURIComponent(href.slice('vscode:mcp/install?'.length)))).toEqual(server);
  });

  it('gives the OpenAI Agents SDK a Python program that parses', async () => {
    const parsed = spawnSync('python3', ['-c', 'import ast, sys; ast.parse(sys.stdin.read())'], {
      input: await text('config-openai-agents'),
      encoding: 'utf8',
    });
    expect(parsed.status, parsed.stderr).toBe(0);
  });

  it('gives an MCP TypeScript SDK program that, run as shown, lists the tools the agent was granted', { timeout: 60_000 }, async () => {
    const file = path.join(dir, 'agent.mjs');
    fs.writeFileSync(file, await text('config-typescript'));
    const { stdout } = await run(process.execPath, [file], { cwd: dir });
    expect(stdout).toContain('list_devices');
    expect(stdout.match(/set_power__[0-9a-f]{12}/g), stdout).toHaveLength(1);
  });

  it('has no serious accessibility findings with every configuration open', async () => {
    await page.evaluate('document.querySelectorAll("details.client-config").forEach((d) => d.setAttribute("open", ""))');
    expect(await axeViolations(page)).toEqual([]);
  });
});

describe('the Agents screen after an OAuth client is created', () => {
  it('shows the MCP URL and configurations without a header, for the client to sign in with OAuth', async () => {
    await page.goto(`${server.issuer}/console/agents`);
    await page.fill('#client-name', 'Desktop app');
    await page.check('input[name="kind"][value="public"]');
    await page.fill('#client-redirects', 'http://127.0.0.1:33418/callback');
    await Promise.all([page.waitForSelector('#created-client-id'), page.click('#create-client')]);
    expect(await text('mcp-url')).toBe(`${server.issuer}/mcp`);
    expect(await text('config-claude-code')).toBe(`claude mcp add --transport http devices ${server.issuer}/mcp`);
    const cursor = JSON.parse(await text('config-cursor')) as { mcpServers: Record<string, unknown> };
    expect(cursor.mcpServers).toEqual({ devices: { url: `${server.issuer}/mcp` } });
    expect(await page.content()).not.toContain('Authorization');
  });

  it('shows a server-to-server client only the MCP URL', async () => {
    await page.goto(`${server.issuer}/console/agents`);
    await page.fill('#client-name', 'Night job');
    await page.check('input[name="kind"][value="server"]');
    await Promise.all([page.waitForSelector('#created-client-id'), page.click('#create-client')]);
    expect(await text('mcp-url')).toBe(`${server.issuer}/mcp`);
    expect(await page.locator('details.client-config').count()).toBe(0);
  });
});

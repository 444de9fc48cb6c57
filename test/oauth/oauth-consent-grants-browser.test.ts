import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, lampManifest } from '../helpers/fixtures.js';
import { MODERN, toolName } from '../helpers/mcp-client.js';
import { MemoryOAuthProvider, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The consent page grants device functions in the same step, in a real browser, with the
 * official MCP client SDK's OAuth flow on the other side: the owner signs in with the
 * development form, checks functions (none is checked at first), approves, and the client's
 * first tools/list has their tools. A control function cannot be granted with "Approve read
 * only"; what is granted carries the console's defaults, which the page states. The pages use
 * the console's style sheet and pass axe.
 */

/** The client's redirect URI: a loopback server of the test's own, so each decision's navigation ends on a page that loaded. */
let CALLBACK: string;
let callbackServer: Server;
const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'gwen');

let browser: Browser;
let context: BrowserContext;
let page: Page;
let lamp: { id: string };

beforeAll(async () => {
  callbackServer = createServer((_request, response) => response.end('callback'));
  await new Promise<void>((resolve) => callbackServer.listen(0, '127.0.0.1', resolve));
  CALLBACK = `http://127.0.0.1:${(callbackServer.address() as AddressInfo).port}/callback`;
  lamp = await attachDevice(api, await owner(), { name: 'Porch lamp', manifest: lampManifest });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  // bypassCSP lets axe-core's script in; the pages' own CSP is asserted below from the headers.
  context = await browser.newContext({ bypassCSP: true });
  page = await context.newPage();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await new Promise((resolve) => callbackServer?.close(resolve));
});

/** The SDK's flow up to the consent page: 401, discovery, dynamic registration; the page it would open. */
async function startFlow(name: string) {
  const provider = new MemoryOAuthProvider(name, CALLBACK);
  const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
  const mcp = new Client({ name: 'consent-grants', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  await expect(mcp.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  return { provider, authorization: provider.authorizationUrls[0]!.toString() };
}

/** Clicks a decision and waits until the browser has loaded the callback: its URL is what counts. */
async function decide(button: string): Promise<URL> {
  await Promise.all([page.waitForURL((url) => url.href.startsWith(CALLBACK)), page.click(button)]);
  return new URL(page.url());
}

/** The client's first connection after the flow: its tools as a fresh tools/list lists them. */
async function firstToolsList(provider: MemoryOAuthProvider, back: URL): Promise<string[]> {
  const transport = new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider });
  await transport.finishAuth(back.searchParams);
  const mcp = new Client({ name: 'consent-grants', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  await mcp.connect(new StreamableHTTPClientTransport(new URL(`${server.issuer}/mcp`), { authProvider: provider }));
  const names = (await mcp.listTools()).tools.map((tool) => tool.name);
  await mcp.close();
  return names;
}

describe('the sign-in page', () => {
  it('looks like the console, offers the development sign-in, and keeps the authorization request', { timeout: 60_000 }, async () => {
    const { authorization } = await startFlow('Sign-in check');
    const answer = await page.goto(authorization);
    expect(new URL(page.url()).pathname).toBe('/oauth/sign-in');
    expect(answer!.headers()['content-security-policy']).toContain("style-src 'self'");
    expect(answer!.headers()['content-security-policy']).not.toContain('unsafe-inline');
    expect(await page.getAttribute('link[rel="stylesheet"]', 'href')).toBe('/console/assets/console.css');
    // The console's style sheet applies: its primary button colour, not the browser's default.
    const background = await page.evaluate('getComputedStyle(document.querySelector("#development-sign-in")).backgroundColor');
    expect(background).not.toBe('rgb(239, 239, 239)');
    expect(await page.isVisible('#token')).toBe(true);
    expect(await axeViolations(page)).toEqual([]);

    await page.fill('#sub', 'gwen');
    await Promise.all([page.waitForURL((url) => url.pathname === '/oauth/authorize'), page.click('#development-sign-in')]);
    expect(await page.textContent('#client-name')).toBe('Sign-in check');
  });
});

describe('granting device functions on the consent page', () => {
  beforeAll(async () => {
    // Signed in with the development form, whether or not the sign-in test ran first.
    await page.goto(`${server.issuer}/oauth/sign-in`);
    await page.fill('#sub', 'gwen');
    await Promise.all([page.waitForSelector('text=You are signed in as'), page.click('#development-sign-in')]);
  }, 60_000);

  it('offers the workspace functions unchecked, states the terms, and passes axe', { timeout: 60_000 }, async () => {
    const { authorization } = await startFlow('Terms check');
    await page.goto(authorization);
    const boxes = page.locator('#offered input[type="checkbox"]');
    expect(await boxes.count()).toBeGreaterThanOrEqual(2);
    for (const box of await boxes.all()) expect(await box.isChecked()).toBe(false);
    const terms = await page.textContent('#grant-terms');
    expect(terms).toContain('approval owner');
    expect(terms).toContain('7 days');
    // Approve, Approve read only and Deny look different.
    const look = (id: string) =>
      page.evaluate(`(() => { const s = getComputedStyle(document.querySelector('${id}')); return [s.backgroundColor, s.color, s.borderColor].join(' '); })()`);
    const looks = new Set([await look('#approve'), await look('#approve-read'), await look('#deny')]);
    expect(looks.size).toBe(3);
    expect(await axeViolations(page)).toEqual([]);
  });

  it('grants what the owner checked, with the console defaults, and the first tools/list has their tools', { timeout: 60_000 }, async () => {
    const { provider, authorization } = await startFlow('Porch agent');
    await page.goto(authorization);
    const principal = (await page.textContent('#principal'))!;
    await page.check(`input[name="grant:${lamp.id}:set_power"]`);
    await page.check(`input[name="grant:${lamp.id}:get_state"]`);
    const back = await decide('#approve');
    expect(back.searchParams.get('code')).toMatch(/^dfc_code_/);

    const tools = await firstToolsList(provider, back);
    expect(tools).toContain(toolName('set_power', lamp.id));
    expect(tools).toContain(toolName('get_state', lamp.id));

    const grants = (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })) as {
      body: { data: { capability: string; approval: string; expiresAt: number | null; createdAt: number }[] };
    };
    const rows = grants.body.data;
    expect(rows.map((row) => row.capability).sort()).toEqual(['get_state', 'set_power']);
    for (const row of rows) {
      expect(row.approval).toBe('owner');
      expect(row.expiresAt! - row.createdAt).toBe(604_800_000);
    }
  });

  it('grants nothing when nothing is checked: the client lists only the fixed tools', { timeout: 60_000 }, async () => {
    const { provider, authorization } = await startFlow('Nothing picked');
    await page.goto(authorization);
    const tools = await firstToolsList(provider, await decide('#approve'));
    expect(tools.filter((name) => name.includes('__'))).toEqual([]);
  });

  it('refuses a control function with "Approve read only", and keeps the request on the page', { timeout: 60_000 }, async () => {
    const { authorization } = await startFlow('Read only agent');
    await page.goto(authorization);
    const principal = (await page.textContent('#principal'))!;
    await page.check(`input[name="grant:${lamp.id}:set_power"]`);
    await Promise.all([page.waitForLoadState('load'), page.click('#approve-read')]);
    expect(await page.textContent('#error')).toContain('set_power is a control function');
    expect(await page.isVisible('#approve')).toBe(true);
    const grants = (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })) as { body: { data: unknown[] } };
    expect(grants.body.data).toEqual([]);

    // A read function with read only is granted.
    await page.uncheck(`input[name="grant:${lamp.id}:set_power"]`);
    await page.check(`input[name="grant:${lamp.id}:get_state"]`);
    const back = await decide('#approve-read');
    expect(back.searchParams.get('code')).toMatch(/^dfc_code_/);
    const after = (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })) as {
      body: { data: { capability: string }[] };
    };
    expect(after.body.data.map((row) => row.capability)).toEqual(['get_state']);
  });

  it('sets a schedule and a budget on every picked grant, in words on the page', { timeout: 60_000 }, async () => {
    const { authorization } = await startFlow('Conditioned agent');
    await page.goto(authorization);
    const principal = (await page.textContent('#principal'))!;
    expect(await page.textContent('#conditions-words')).toContain('No conditions');
    expect(await page.textContent('#conditions')).toContain('Conditions page');
    for (const day of ['Monday', 'Tuesday', 'Wednesday', 'Thursday', 'Friday']) await page.check(`#condition-schedule label:has-text("${day}") input`);
    await page.fill('#cond-from', '08:00');
    await page.fill('#cond-to', '18:00');
    await page.fill('#cond-time-zone', 'Europe/Berlin');
    await page.fill('#cond-budget-max', '5');
    await page.selectOption('#cond-budget-per', '3600');

    // Conditions with nothing checked: the page comes back with what was typed, stated in words.
    const refused = page.waitForResponse((answer) => answer.url().endsWith('/oauth/authorize') && answer.request().method() === 'POST');
    await page.click('#approve');
    expect((await refused).status()).toBe(400);
    await page.waitForSelector('#error');
    expect(await page.textContent('#error')).toContain('check at least one');
    expect(await page.inputValue('#cond-time-zone')).toBe('Europe/Berlin');
    expect(await page.textContent('#conditions-words')).toBe(
      'The functions you check are allowed only Mon–Fri 08:00–18:00 Europe/Berlin, at most 5 calls per hour.',
    );
    expect(await axeViolations(page)).toEqual([]);

    await page.check(`input[name="grant:${lamp.id}:set_power"]`);
    await page.check(`input[name="grant:${lamp.id}:get_state"]`);
    const back = await decide('#approve');
    expect(back.searchParams.get('code')).toMatch(/^dfc_code_/);
    const grants = (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })) as {
      body: { data: { capability: string; approval: string; conditions: unknown }[] };
    };
    expect(grants.body.data.map((row) => row.capability).sort()).toEqual(['get_state', 'set_power']);
    for (const row of grants.body.data) {
      expect(row.approval).toBe('owner');
      expect(row.conditions).toEqual({
        schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '08:00', to: '18:00' }] },
        budget: { max: 5, perSeconds: 3600 },
      });
    }
  });

  it('refuses a time zone it does not know beside the field, keeps what was typed, and grants nothing', { timeout: 60_000 }, async () => {
    const { authorization } = await startFlow('Bad zone agent');
    await page.goto(authorization);
    const principal = (await page.textContent('#principal'))!;
    await page.check(`input[name="grant:${lamp.id}:get_state"]`);
    await page.check('#condition-schedule label:has-text("Saturday") input');
    await page.fill('#cond-from', '22:00');
    await page.fill('#cond-to', '06:00');
    await page.fill('#cond-time-zone', 'Mars/Olympus_Mons');
    const refused = page.waitForResponse((answer) => answer.url().endsWith('/oauth/authorize') && answer.request().method() === 'POST');
    await page.click('#approve');
    expect((await refused).status()).toBe(400);
    await page.waitForSelector('#cond-time-zone-issues');
    expect(await page.textContent('#cond-time-zone-issues')).toContain('not a time zone name');
    expect(await page.getAttribute('#cond-time-zone', 'aria-invalid')).toBe('true');
    expect(await page.inputValue('#cond-time-zone')).toBe('Mars/Olympus_Mons');
    expect(await page.inputValue('#cond-from')).toBe('22:00');
    expect(await page.isChecked('#condition-schedule label:has-text("Saturday") input')).toBe(true);
    expect(await page.isChecked(`input[name="grant:${lamp.id}:get_state"]`)).toBe(true);
    expect(await axeViolations(page)).toEqual([]);
    const grants = (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })) as { body: { data: unknown[] } };
    expect(grants.body.data).toEqual([]);

    // Corrected, it is granted with the overnight window.
    await page.fill('#cond-time-zone', 'UTC');
    const back = await decide('#approve');
    expect(back.searchParams.get('code')).toMatch(/^dfc_code_/);
    const after = (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })) as {
      body: { data: { capability: string; conditions: unknown }[] };
    };
    expect(after.body.data).toMatchObject([
      { capability: 'get_state', conditions: { schedule: { timeZone: 'UTC', windows: [{ days: ['sat'], from: '22:00', to: '06:00' }] } } },
    ]);
  });
});

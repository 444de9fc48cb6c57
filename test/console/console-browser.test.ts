import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { attachDevice as sdkAttach, Device } from '@dfc/device';
import Provider from 'oidc-provider';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { lampManifest, simulateLamp } from '../../src/cli/simulated.js';
import { grant, queue } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { freePort, startOAuthTestServer, useOAuthTestServer } from '../helpers/oauth.js';
import type { TestServer } from '../helpers/server.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';

/**
 * The owner console (docs/owners/console.md "Owner console") in Debian's headless Chromium driven by
 * playwright-core, as the consent page's test does: sign-in with the development identity
 * provider and through a real OpenID provider (oidc-provider on a loopback port), a setup token
 * created in the console attaching a simulated device, a grant with owner approval given and
 * revoked from the grants screen, an approval appearing in the inbox live and approved there
 * while the activity feed follows the action to `succeeded`, untrusted names rendered as text,
 * cross-site posts refused.
 * The run writes the sign-in and live activity screenshots to docs/console/; every other
 * screen's are written by test/console/console-screens.test.ts.
 */

const SHOTS = path.resolve(import.meta.dirname, '../..', 'docs', 'console');
const DESKTOP = { width: 1280, height: 900 };
// Empty values count as unset, which switches the test harness's JWKS off: the development provider.
const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const HOSTILE_NAME = '<img src=x onerror=alert(1)>';

let browser: Browser;
let desktop: BrowserContext;
let page: Page;
const devices: Device[] = [];
/** The simulated lamp attached from the console. */
let lampId: string;
let dialogs: string[] = [];

async function launch(): Promise<Browser> {
  return chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [...CHROMIUM_ARGS],
  });
}

const owner = () => signDevelopmentSession(server.config, 'alice');

const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;

beforeAll(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  browser = await launch();
  desktop = await browser.newContext({ viewport: DESKTOP });
  page = await desktop.newPage();
  page.on('dialog', (dialog) => {
    dialogs.push(dialog.message());
    void dialog.dismiss();
  });
}, 60_000);

afterAll(async () => {
  await Promise.all(devices.map((device) => device.stop()));
  await browser?.close();
});

describe('console sign-in with the development identity provider', () => {
  it('sends a visitor to sign in, names the mode development-only, and signs in as the named owner', async () => {
    await page.goto(`${server.issuer}/console`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
    expect(await page.textContent('#development-heading')).toBe('Development sign-in');
    expect(await page.textContent('main')).toContain('Development only.');
    await page.fill('#sub', 'alice');
    await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
    expect(await page.textContent('#signed-in-as')).toBe('alice');
    // One session for the console and the consent page: the consent page's cookie.
    const cookie = (await desktop.cookies()).find((c) => c.name === 'dfc_session');
    expect(cookie?.httpOnly).toBe(true);
    expect(cookie?.sameSite).toBe('Strict');
  });

  it('answers with a strict Content-Security-Policy and refuses framing', async () => {
    const res = await page.request.get(`${server.issuer}/console`);
    expect(res.headers()['content-security-policy']).toContain("script-src 'self'");
    expect(res.headers()['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers()['content-security-policy']).not.toContain('unsafe-inline');
    expect(res.headers()['x-frame-options']).toBe('DENY');
  });
});

describe('attach a device from the console', () => {
  it('creates a setup token shown once with a QR code, and a simulated device attaches with it and appears online with its functions', async () => {
    await page.goto(`${server.issuer}/console/attach`);
    await page.fill('#name', 'Hall lamp');
    await page.click('#create-setup-token');
    const token = (await page.textContent('#setup-token'))!;
    expect(token).toMatch(/^dfc_setup_/);
    expect(await page.getAttribute('#setup-token-qr', 'src')).toMatch(/^data:image\/svg\+xml;base64,/);
    expect(await page.isVisible('#setup-token-copy')).toBe(true);
    // Shown once: loading the screen again does not show it.
    await page.goto(`${server.issuer}/console/attach`);
    expect(await page.locator('#setup-token').count()).toBe(0);

    const credentials = await sdkAttach({ url: server.url, setupToken: token, name: 'Hall lamp' });
    const device = new Device({ url: server.url, credentials, manifest: lampManifest, backoff: { initialMs: 20, maxMs: 200 } });
    simulateLamp(device);
    devices.push(device);
    await device.start();
    lampId = credentials.deviceId;

    await page.goto(`${server.issuer}/console`);
    const node = page.locator(`[data-device-id="${credentials.deviceId}"]`);
    expect(await node.locator('.device-name').first().textContent()).toBe('Hall lamp');
    expect(await node.locator('[data-state]').first().getAttribute('data-state')).toBe('online');
    await node.locator('summary').first().click();
    expect(await node.textContent()).toContain('set_power');
    expect(await node.textContent()).toContain('control (changes the device)');
    // The script turned the server's UTC into the browser's local time.
    expect(await node.locator('time').first().textContent()).not.toContain('UTC');
  });
});

describe('agents and grants from the console', () => {
  it('creates an agent connection (token shown once), grants it a function with owner approval, and revokes it', async () => {
    await page.goto(`${server.issuer}/console/agents`);
    await page.fill('#agent-name', 'Desk bot');
    await page.selectOption('#agent-access', 'act');
    await page.click('#create-agent');
    expect(await page.textContent('#created-token')).toMatch(/^dfc_agent_/);
    const principal = (await page.textContent('#created-principal'))!;

    await page.goto(`${server.issuer}/console/grants?principal=${encodeURIComponent(principal)}`);
    const form = page.locator('form[data-device-name="Hall lamp"]');
    await form.locator('input[name="fn:set_power"]').check();
    await form.locator('select[name="approval"]').selectOption('owner');
    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'granted'), form.locator('button.primary').click()]);
    const row = page.locator('form[data-device-name="Hall lamp"] tr[data-function="set_power"]');
    expect(await row.textContent()).toContain('approval owner');

    const grants = await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() });
    expect(grants.body.data).toEqual([expect.objectContaining({ capability: 'set_power', approval: 'owner', principal })]);

    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'revoked'), row.locator('button.danger').click()]);
    expect(await page.locator('form[data-device-name="Hall lamp"] tr[data-function="set_power"]').textContent()).toContain('not granted');
    expect((await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })).body.data).toEqual([]);
  });
});

/** Loads a live page and waits until its script holds the event stream open (a fresh stream starts "now"). */
async function openLive(target: Page, url: string) {
  await target.goto(url);
  await target.waitForSelector('body[data-live-state="open"]');
  // Gone after a reload: the page below must change without one.
  // (Code run in the page is written as text: the tests compile without the DOM's types.)
  await target.evaluate("document.body.setAttribute('data-not-reloaded', '')");
}

const notReloaded = async (target: Page) => expect(await target.locator('body[data-not-reloaded]').count()).toBe(1);

describe('approvals inbox, live', () => {
  it("shows an agent's request without a reload, approves it, and the activity feed follows the device's run to succeeded", async () => {
    const agent = await createAgent(api, await owner(), { name: 'Night bot' });
    await grant(api, await owner(), agent.principal, lampId, ['set_power'], null, 'owner');
    await openLive(page, `${server.issuer}/console/approvals`);
    expect(await page.locator('#approval-rows tr').count()).toBe(0);
    expect(await page.isVisible('#no-approvals')).toBe(true);

    const action = await queue(api, agent.token, lampId, { capability: 'set_power', arguments: { on: true } });
    expect(action.status).toBe('awaiting_approval');
    const row = page.locator(`#approval-rows tr[data-action-id="${action.id}"]`);
    await row.waitFor();
    await notReloaded(page);
    expect(await row.locator('[data-field="agent-name"]').textContent()).toBe('Night bot');
    expect(await row.locator('[data-field="principal"]').textContent()).toBe(agent.principal);
    expect(await row.locator('[data-field="device"]').textContent()).toBe('Hall lamp');
    expect(await row.locator('[data-field="capability"]').textContent()).toBe('set_power');
    expect(JSON.parse((await row.locator('[data-field="arguments"]').textContent())!)).toEqual({ on: true });
    expect(await row.locator('time').textContent()).not.toContain('UTC');
    expect(await page.isVisible('#no-approvals')).toBe(false);

    // The activity screen in a second tab, following the same action.
    const feed = await desktop.newPage();
    await openLive(feed, `${server.issuer}/console/activity`);
    const status = feed.locator(`#actions tr[data-action-id="${action.id}"] [data-field="status"]`);
    expect(await status.textContent()).toBe('awaiting_approval');

    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'approved'), row.locator('button[data-decision="approve"]').click()]);
    expect(await page.textContent('#done')).toContain('Approved');
    expect(await page.locator(`#approval-rows tr[data-action-id="${action.id}"]`).count()).toBe(0);

    // The simulated lamp fetches and runs it; the feed shows each change as it happens.
    await feed.waitForFunction(`document.querySelector('#actions tr[data-action-id="${action.id}"] [data-field="status"]')?.textContent === 'succeeded'`);
    await notReloaded(feed);
    expect(await feed.locator(`#actions tr[data-action-id="${action.id}"] [data-field="outcome"]`).textContent()).toContain('"on":true');
    await feed.screenshot({ path: path.join(SHOTS, 'activity-live-desktop.png'), fullPage: true });
    await feed.close();
    expect((await api.get(`/v1/actions/${action.id}`, { token: await owner() })).body.data).toMatchObject({
      status: 'succeeded',
      approval: { decision: 'approved', decidedBy: 'alice' },
    });
  });

  it('removes a row once the action is decided elsewhere, and shows agent and device names like markup as text', async () => {
    const hostile = await attachDevice(api, await owner(), { name: HOSTILE_NAME });
    const agent = await createAgent(api, await owner(), { name: HOSTILE_NAME });
    await grant(api, await owner(), agent.principal, hostile.id, ['set_power'], null, 'owner');
    dialogs = [];
    // The inbox knows the names from its load; the row itself arrives live.
    await openLive(page, `${server.issuer}/console/approvals`);
    const action = await queue(api, agent.token, hostile.id, { capability: 'set_power', arguments: { on: false } });
    const row = page.locator(`#approval-rows tr[data-action-id="${action.id}"]`);
    await row.waitFor();
    expect(await row.locator('[data-field="agent-name"]').textContent()).toBe(HOSTILE_NAME);
    expect(await row.locator('[data-field="device"]').textContent()).toBe(HOSTILE_NAME);
    expect(await page.locator('main img').count()).toBe(0);
    // Rendered by the server too.
    await page.reload();
    expect(await row.locator('[data-field="device"]').textContent()).toBe(HOSTILE_NAME);
    expect(await page.locator('main img').count()).toBe(0);
    await page.waitForSelector('body[data-live-state="open"]');

    const rejected = await api.post(`/v1/actions/${action.id}/reject`, { token: await owner(), body: { reason: 'decided on the API' } });
    expect(rejected.status).toBe(200);
    await row.waitFor({ state: 'detached' });
    expect(await page.isVisible('#no-approvals')).toBe(true);
    expect(dialogs).toEqual([]);
  });
});

describe('untrusted text', () => {
  it('renders a device named like markup as text, and no script runs', async () => {
    const hostile = await attachDevice(api, await owner(), {
      name: HOSTILE_NAME,
      manifest: { capabilities: [{ name: 'get_state', kind: 'read', description: '<script>alert(2)</script>', arguments: { type: 'object' } }] },
    });
    dialogs = [];
    await page.goto(`${server.issuer}/console`);
    const node = page.locator(`[data-device-id="${hostile.id}"]`);
    expect(await node.locator('.device-name').first().textContent()).toBe(HOSTILE_NAME);
    await node.locator('summary').first().click();
    expect(await node.textContent()).toContain('<script>alert(2)</script>');
    expect(await page.locator('main img').count()).toBe(0);
    await page.goto(`${server.issuer}/console/activity`);
    expect(dialogs).toEqual([]);
  });
});

describe('cross-site requests', () => {
  it('refuses a form posted from another site, and a post without the form token', async () => {
    // Another site's page that posts a form to the console as soon as it loads.
    const evil = http.createServer((_req, res) => {
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          `<form id="f" method="post" action="${server.issuer}/console/attach"><input name="name" value="evil"><input name="csrf" value="x"></form><script>document.getElementById('f').submit()</script>`,
        );
    });
    await new Promise<void>((resolve) => evil.listen(0, '127.0.0.1', resolve));
    // localhost, not 127.0.0.1: another site as the browser judges it.
    const evilUrl = `http://localhost:${(evil.address() as { port: number }).port}/`;
    const answer = page.waitForResponse((res) => res.url() === `${server.issuer}/console/attach` && res.request().method() === 'POST');
    await page.goto(evilUrl);
    expect((await answer).status()).toBe(403);
    expect(await page.textContent('#error')).toContain("only be posted from this service's own pages");
    evil.close();

    // Same origin, signed in, but without the session's form token.
    const res = await page.request.post(`${server.issuer}/console/attach`, { form: { name: 'no token' }, headers: { origin: server.issuer } });
    expect(res.status()).toBe(403);
    const tokens = await api.get('/v1/device-setup-tokens', { token: await owner() });
    expect(tokens.body.data.map((t: { name: string }) => t.name)).not.toContain('evil');
    expect(tokens.body.data.map((t: { name: string }) => t.name)).not.toContain('no token');
  });
});

describe('sign-out', () => {
  it('ends the session: the console sends the browser to sign in again', async () => {
    await page.goto(`${server.issuer}/console`);
    await Promise.all([page.waitForURL((url) => url.pathname === '/console/sign-in'), page.click('#sign-out')]);
    await page.goto(`${server.issuer}/console/grants`);
    expect(new URL(page.url()).pathname).toBe('/console/sign-in');
  });
});

describe('console sign-in through an OpenID provider', () => {
  let provider: http.Server;
  let oidcServer: TestServer & { issuer: string };

  afterAll(async () => {
    await oidcServer?.close();
    provider?.closeAllConnections();
    provider?.close();
  });

  it('signs in with authorization code and PKCE, and the ID token names the owner', { timeout: 60_000 }, async () => {
    const providerPort = await freePort();
    const servicePort = await freePort();
    const providerIssuer = `http://127.0.0.1:${providerPort}`;
    const serviceBase = `http://127.0.0.1:${servicePort}`;
    const oidc = new Provider(providerIssuer, {
      clients: [
        {
          client_id: 'dfc-console',
          client_secret: 'a-test-secret-of-the-console-client',
          redirect_uris: [`${serviceBase}/console/oidc/callback`],
          grant_types: ['authorization_code'],
          response_types: ['code'],
        },
      ],
      pkce: { required: () => true },
    });
    const handle = oidc.callback();
    provider = http.createServer((req, res) => void handle(req, res));
    await new Promise<void>((resolve) => provider.listen(providerPort, '127.0.0.1', resolve));

    oidcServer = (await startOAuthTestServer({
      env: {
        PORT: String(servicePort),
        PUBLIC_BASE_URL: serviceBase,
        OWNER_JWKS_FILE: '',
        OWNER_JWKS_URL: `${providerIssuer}/jwks`,
        OWNER_ISSUER: providerIssuer,
        OWNER_AUDIENCE: 'dfc-console',
        OWNER_WORKSPACE_CLAIM: 'sub',
        OWNER_OIDC_CLIENT_ID: 'dfc-console',
        OWNER_OIDC_CLIENT_SECRET: 'a-test-secret-of-the-console-client',
      },
    })) as TestServer & { issuer: string };

    const context = await browser.newContext({ viewport: DESKTOP });
    const oidcPage = await context.newPage();
    await oidcPage.goto(`${serviceBase}/console`);
    expect(await oidcPage.locator('#development-sign-in').count()).toBe(0);
    await Promise.all([oidcPage.waitForURL((url) => url.origin === providerIssuer), oidcPage.click('#oidc-sign-in')]);
    // oidc-provider's development login and consent pages.
    await oidcPage.fill('input[name="login"]', 'carol');
    await oidcPage.fill('input[name="password"]', 'any');
    await oidcPage.click('button[type="submit"]');
    await oidcPage.click('button[type="submit"]');
    await oidcPage.waitForURL((url) => url.origin === serviceBase && url.pathname === '/console');
    expect(await oidcPage.textContent('#signed-in-as')).toBe('carol');
    await context.close();
  });
});

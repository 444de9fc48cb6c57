import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant, queue } from '../helpers/actions.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * Approvals that reach the owner and an activity log that tells the truth
 * (docs/owners/approval-notifications.md, docs/owners/activity-log.md), in Debian's headless
 * Chromium: the navigation's pending count changing live, a browser notification for a new
 * request once the owner allowed them, webhooks added and tested from the console against a
 * local receiver, activity filtered by the server across more than one page with new rows
 * arriving live, reasons shown, a queued action cancelled, and axe-core finding no serious or
 * critical violation on these screens.
 */

const DEVELOPMENT_ENV = {
  OWNER_JWKS_FILE: '',
  OWNER_ISSUER: '',
  OWNER_AUDIENCE: '',
  OWNER_WORKSPACE_CLAIM: '',
  OAUTH_CIMD_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_SECONDS: '0.05',
  RATE_LIMIT_AGENT_PER_SECOND: '100000',
  RATE_LIMIT_AGENT_BURST: '100000',
  RATE_LIMIT_OWNER_PER_SECOND: '100000',
  RATE_LIMIT_OWNER_BURST: '100000',
  DEVICE_QUEUE_PER_PRINCIPAL: '1000',
};
const TOKEN = '987654321:AAF-console_secret_token';

let browser: Browser;
let context: BrowserContext;
let page: Page;
let lamp: AttachedDevice;
let fan: AttachedDevice;
let helper: { token: string; principal: string };
let other: { token: string; principal: string };

const received: { path: string; body: string }[] = [];
const receiver = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    received.push({ path: request.url ?? '/', body: Buffer.concat(chunks).toString('utf8') });
    response.writeHead(200).end();
  });
});
let receiverUrl = '';

const owner = () => signDevelopmentSession(server.config, 'dana');

/** Records every Notification the page shows, then shows it: what the owner would see. */
const RECORD_NOTIFICATIONS = `
  window.__shown = [];
  window.__asked = 0;
  if (window.Notification) {
    const Real = window.Notification;
    const Recorded = function (title, options) { window.__shown.push({ title: title, body: options && options.body, tag: options && options.tag }); return new Real(title, options); };
    Object.defineProperty(Recorded, 'permission', { get: () => Real.permission });
    Recorded.requestPermission = function (callback) { window.__asked++; return Real.requestPermission(callback); };
    window.Notification = Recorded;
  }
`;

async function signIn(target: BrowserContext): Promise<Page> {
  const tab = await target.newPage();
  await tab.goto(`${server.issuer}/console/sign-in`);
  await tab.fill('#sub', 'dana');
  await Promise.all([tab.waitForURL((url) => url.pathname === '/console'), tab.click('#development-sign-in')]);
  return tab;
}

async function openLive(tab: Page, url: string) {
  await tab.goto(url);
  await tab.waitForSelector('body[data-live-state="open"]');
  await tab.evaluate("document.body.setAttribute('data-not-reloaded', '')");
}

const notReloaded = async (tab: Page) => expect(await tab.locator('body[data-not-reloaded]').count()).toBe(1);
const badge = (tab: Page) => tab.locator('#pending-count [data-field="count"]');

const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;

beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  lamp = await attachDevice(api, await owner(), { name: 'Porch lamp' });
  fan = await attachDevice(api, await owner(), { name: 'Attic fan' });
  helper = await createAgent(api, await owner(), { name: 'Helper' });
  other = await createAgent(api, await owner(), { name: 'Other' });
  await grant(api, await owner(), helper.principal, lamp.id, ['set_power'], null, 'owner');
  await grant(api, await owner(), helper.principal, lamp.id, ['get_state', 'set_brightness']);
  await grant(api, await owner(), other.principal, fan.id, ['get_state']);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  // The service's Content-Security-Policy is tested in test/console/console-browser.test.ts; here it is
  // bypassed so that the test can wait on the page's state and load axe-core into it.
  context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  await context.addInitScript(RECORD_NOTIFICATIONS);
  page = await signIn(context);
}, 60_000);

afterAll(async () => {
  await browser?.close();
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

describe('the pending count on every console page', () => {
  it('is rendered by the server, and follows requests and decisions live without a reload', async () => {
    await openLive(page, `${server.issuer}/console`);
    expect(await page.isVisible('#pending-count')).toBe(false);
    const first = await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await page.waitForFunction(`document.querySelector('#pending-count [data-field="count"]').textContent === '1'`);
    expect(await page.isVisible('#pending-count')).toBe(true);
    await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
    await page.waitForFunction(`document.querySelector('#pending-count [data-field="count"]').textContent === '2'`);
    await api.post(`/v1/actions/${first.id}/reject`, { token: await owner(), body: { reason: 'not now' } });
    await page.waitForFunction(`document.querySelector('#pending-count [data-field="count"]').textContent === '1'`);
    await notReloaded(page);
    // Without script, the count the server rendered.
    await page.goto(`${server.issuer}/console/agents`);
    expect(await badge(page).textContent()).toBe('1');
  });
});

describe('browser notifications', () => {
  it('asks only when the owner clicks, never on load', async () => {
    const fresh = await browser.newContext({ bypassCSP: true });
    await fresh.addInitScript(RECORD_NOTIFICATIONS);
    const tab = await signIn(fresh);
    await tab.goto(`${server.issuer}/console/approvals`);
    expect(await tab.evaluate('window.__asked')).toBe(0);
    expect(await tab.isVisible('#notify-me')).toBe(true);
    await fresh.grantPermissions(['notifications'], { origin: server.issuer });
    await tab.click('#notify-me');
    await tab.waitForFunction(`document.getElementById('notify-status').textContent.includes('shows a notification')`);
    expect(await tab.evaluate('window.__asked')).toBe(1);
    expect(await tab.isVisible('#notify-me')).toBe(false);
    expect(await axeViolations(tab)).toEqual([]);
    await fresh.close();
  });

  it('shows a notification for a new approval request while a console tab is open', async () => {
    await context.grantPermissions(['notifications'], { origin: server.issuer });
    // The devices screen: any console page, not only the inbox.
    await openLive(page, `${server.issuer}/console`);
    const action = await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await page.waitForFunction('window.__shown.length > 0');
    expect(await page.evaluate('window.__shown')).toEqual([{ title: 'Approval needed', body: `${helper.principal} asks to run set_power.`, tag: action.id }]);
  });
});

describe('webhooks managed in the console', () => {
  it('adds a Slack webhook, sends a test that arrives in Slack’s shape, and lists its deliveries', async () => {
    await page.goto(`${server.issuer}/console/webhooks`);
    await page.selectOption('#format', 'slack');
    await page.fill('#url', `${receiverUrl}/services/T0CONSOLE/B0CONSOLE/slack`);
    await page.click('#create-webhook');
    expect(await page.textContent('#done')).toContain('Added');
    // The hook's last path segment is its secret: the console shows it as `…`, the team and hook ids in the open.
    const row = page.locator('#webhooks tr', { hasText: '/services/T0CONSOLE/B0CONSOLE/…' });
    await row.locator('button[id^="test-"]').click();
    expect(await page.textContent('#done')).toContain('delivered');
    const test = JSON.parse(received.find((r) => r.path === '/services/T0CONSOLE/B0CONSOLE/slack')!.body);
    expect(test.blocks.map((b: { type: string }) => b.type)).toEqual(['section', 'actions']);

    const action = await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
    await expect.poll(() => received.filter((r) => r.path === '/services/T0CONSOLE/B0CONSOLE/slack').length, { timeout: 10_000 }).toBe(2);
    expect(received.at(-1)!.body).toContain(`${server.issuer}/console/actions/${action.id}?decide=approve`);
    await page.locator('#webhooks tr', { hasText: '/services/T0CONSOLE/B0CONSOLE/…' }).locator('a[id^="deliveries-"]').click();
    await page.waitForFunction(`document.querySelector('#deliveries [data-field="status"]')?.textContent === 'delivered'`);
    expect(await axeViolations(page)).toEqual([]);
  });

  it('shows why a delivery failed', async () => {
    const created = await api.post('/v1/webhooks', { token: await owner(), body: { url: 'http://127.0.0.1:1/closed', format: 'discord' } });
    expect(created.status).toBe(201);
    await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await page.goto(`${server.issuer}/console/webhooks/${created.body.data.id}`);
    await expect
      .poll(
        async () => {
          await page.reload();
          return page.locator('#deliveries [data-field="last-error"]').first().textContent();
        },
        { timeout: 10_000 },
      )
      .toContain('ECONNREFUSED');
  });

  it('adds a Telegram webhook without ever showing its bot token, and disables it', async () => {
    await page.goto(`${server.issuer}/console/webhooks`);
    await page.selectOption('#format', 'telegram');
    await page.fill('#url', `${receiverUrl}/bot${TOKEN}/sendMessage`);
    await page.fill('#chatId', '4242');
    await page.click('#create-webhook');
    expect(await page.textContent('#done')).toContain('Added');
    expect(await page.content()).not.toContain(TOKEN);
    const row = page.locator('#webhooks tr', { hasText: 'chat 4242' });
    expect(await row.textContent()).toContain('/bot…/sendMessage');
    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'disable'), row.locator('button[id^="disable-"]').click()]);
    expect(await page.locator('#webhooks tr', { hasText: 'chat 4242' }).locator('[data-field="state"]').textContent()).toContain('disabled');
    expect(await axeViolations(page)).toEqual([]);
  });

  it('says what a link opens, and opening one decides nothing', async () => {
    const action = await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await page.goto(`${server.issuer}/console/actions/${action.id}?decide=reject`);
    expect(await page.textContent('#action-status')).toBe('awaiting_approval');
    expect(await page.evaluate('document.activeElement.id')).toBe('reject-reason');
    expect(await axeViolations(page)).toEqual([]);
    await page.fill('#reject-reason', 'porch is fine');
    await Promise.all([page.waitForURL((url) => url.pathname === '/console/approvals'), page.click('#reject')]);
    await page.goto(`${server.issuer}/console/actions/${action.id}`);
    expect(await page.textContent('#action-reason')).toBe('Rejected by dana: porch is fine');
  });
});

describe('activity filtered by the server, live, with reasons', () => {
  beforeAll(async () => {
    // More than a page: 60 reads of the lamp by the helper, then 5 of the fan by the other agent.
    for (let i = 0; i < 60; i++) await queue(api, helper.token, lamp.id, { capability: 'get_state', arguments: {} });
    for (let i = 0; i < 5; i++) await queue(api, other.token, fan.id, { capability: 'get_state', arguments: {} });
  });

  it('shows 50 a page, and a filter reaches actions older than the first page', async () => {
    await page.goto(`${server.issuer}/console/activity`);
    expect(await page.locator('#actions tbody tr').count()).toBe(50);
    expect(await page.isVisible('#older')).toBe(true);
    const newest = await page
      .locator('#actions tbody tr')
      .evaluateAll((rows: { getAttribute(name: string): string | null }[]) => rows.map((row) => row.getAttribute('data-action-id')));
    // The owner-approval requests of the tests above are older than the 65 reads.
    await page.fill('#capability', 'set_power');
    await page.click('#filter');
    const ids = await page
      .locator('#actions tbody tr')
      .evaluateAll((rows: { getAttribute(name: string): string | null }[]) => rows.map((row) => row.getAttribute('data-action-id')));
    const expected = (await api.get('/v1/actions?capability=set_power', { token: await owner() })).body.data.map((a: { id: string }) => a.id);
    expect(ids).toEqual(expected);
    expect(ids.length).toBeGreaterThan(0);
    expect(ids.filter((id) => newest.includes(id))).toEqual([]);
    // The time zone the browser sent with the form.
    expect(new URL(page.url()).searchParams.get('tz')).toBe(await page.evaluate('Intl.DateTimeFormat().resolvedOptions().timeZone'));

    await page.fill('#capability', '');
    await page.selectOption('#filter-principal', other.principal);
    await page.click('#filter');
    expect(await page.locator('#actions tbody tr [data-field="device"]').allTextContents()).toEqual(Array(5).fill('Attic fan'));
    await page.selectOption('#deviceId', lamp.id);
    await page.click('#filter');
    expect(await page.isVisible('#no-actions')).toBe(true);
  });

  it('adds new actions to the top of a full first page live, only those its filters keep', async () => {
    await openLive(page, `${server.issuer}/console/activity?principal=${encodeURIComponent(helper.principal)}`);
    expect(await page.locator('#actions tbody tr').count()).toBe(50);
    await queue(api, other.token, fan.id, { capability: 'get_state', arguments: {} });
    const mine = await queue(api, helper.token, lamp.id, { capability: 'set_brightness', arguments: { level: 40 } });
    const row = page.locator(`#actions tbody tr[data-action-id="${mine.id}"]`);
    await row.waitFor();
    await notReloaded(page);
    expect(await page.locator('#actions tbody tr').first().getAttribute('data-action-id')).toBe(mine.id);
    expect(await page.locator('#actions tbody tr').count()).toBe(51);
    expect(await row.locator('[data-field="device"]').textContent()).toBe('Porch lamp');
    expect(await row.locator('[data-field="capability"]').textContent()).toBe('set_brightness');
    expect(await page.textContent('#live-count')).toBe('1');
    expect(await axeViolations(page)).toEqual([]);
  });

  it('shows why an action was rejected', async () => {
    await page.goto(`${server.issuer}/console/activity?status=rejected`);
    expect(await page.locator('#actions tbody tr [data-field="reason"]').allTextContents()).toContain('Rejected by dana: not now');
  });

  it('cancels a queued action from its row, and says the owner cancelled it', async () => {
    const action = await queue(api, helper.token, lamp.id, { capability: 'set_brightness', arguments: { level: 5 } });
    await page.goto(`${server.issuer}/console/activity?status=queued&capability=set_brightness`);
    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'cancelled'), page.click(`button[data-cancel="${action.id}"]`)]);
    expect(await page.textContent('#done')).toContain('Cancelled');
    expect(await page.textContent('#action-reason')).toBe('Cancelled: the owner cancelled it');
    expect((await api.get(`/v1/actions/${action.id}`, { token: await owner() })).body.data).toMatchObject({ status: 'cancelled', cancelReason: 'owner' });
  });
});

describe('without JavaScript', () => {
  it('shows the pending count the server counted, and filters activity with the plain form in UTC', async () => {
    const plain = await browser.newContext({ javaScriptEnabled: false });
    const tab = await signIn(plain);
    const waiting = (await api.get('/v1/approvals?limit=1', { token: await owner() })).body.data.total as number;
    expect(waiting).toBeGreaterThan(0);
    expect(await badge(tab).textContent()).toBe(String(waiting));
    await tab.goto(`${server.issuer}/console/activity`);
    expect(await tab.textContent('[data-zone-label]')).toContain('UTC');
    await tab.fill('#capability', 'set_brightness');
    await tab.click('#filter');
    const functions = await tab.locator('#actions tbody tr [data-field="capability"]').allTextContents();
    expect(functions.length).toBeGreaterThan(0);
    expect(new Set(functions)).toEqual(new Set(['set_brightness']));
    await plain.close();
  });
});

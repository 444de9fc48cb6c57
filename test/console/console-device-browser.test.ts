import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant, next, queue, report } from '../helpers/actions.js';
import { client } from '../helpers/api.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, lampManifest, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { manualClock } from '../helpers/clock.js';
import { startOAuthTestServer, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The device page (docs/owners/console.md "The device page") in Debian's headless Chromium: its
 * name renamed in place, online and last seen, the last-known values with where each came from
 * and following a device's report live, the functions in words with the JSON Schema folded
 * away, the recent actions linking to their pages, the grants on it; the devices list linking
 * to it with each device's key values; axe-core finding no serious or critical violation at
 * desktop and phone width.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'dana');

/** The lamp, its read function declaring what it reports. */
const stateLamp = {
  capabilities: [
    {
      ...lampManifest.capabilities[0],
      result: {
        type: 'object',
        properties: { on: { type: 'boolean', description: 'Whether the lamp is lit.' }, level: { type: 'integer', minimum: 0, maximum: 100 } },
        required: ['on'],
        additionalProperties: false,
      },
    },
    { name: 'get_temp', kind: 'read', arguments: { type: 'object' } },
    ...lampManifest.capabilities.slice(1),
  ],
};

let browser: Browser;
let context: BrowserContext;
let page: Page;
let lamp: AttachedDevice;
let plain: AttachedDevice;
let bot: Agent;
let readAction: string;

/** A value that changes again within a second of its last event is told when that second has passed (the latest wins). */
const STATE_POLL = { timeout: 5_000 };
const pageOf = (id: string) => `${server.issuer}/console/devices/${id}`;
const valueRow = (capability: string) => page.locator(`#state-values tr[data-capability="${capability}"]`);

beforeAll(async () => {
  const token = await owner();
  lamp = await attachDevice(api, token, { name: 'Hall lamp', manifest: stateLamp });
  plain = await attachDevice(api, token, { name: 'Porch sensor' });
  bot = await createAgent(api, token, { name: 'Desk bot', access: 'act', principal: 'agent:desk-bot' });
  await grant(api, token, bot.principal, lamp.id, ['get_state']);
  await grant(api, token, bot.principal, lamp.id, ['set_power'], null, 'owner');
  // One read answered (its result the value), one control waiting for the owner.
  readAction = (await queue(api, bot.token, lamp.id, { capability: 'get_state', arguments: {} })).id;
  expect((await next(api, lamp)).status).toBe(200);
  expect((await report(api, lamp, { actionId: readAction, ok: true, result: { on: true, level: 40 } })).status).toBe(200);
  await queue(api, bot.token, lamp.id, { capability: 'set_power', arguments: { on: false } });

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  // The Content-Security-Policy is tested in test/console/console-browser.test.ts; bypassed here so
  // that axe-core can be loaded into the page.
  context = await browser.newContext({ viewport: VIEWPORTS.desktop, bypassCSP: true });
  page = await context.newPage();
  await page.goto(`${server.issuer}/console/sign-in`);
  await page.fill('#sub', 'dana');
  await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('the devices list', () => {
  it('links each device to its page and shows its key values, and a device without values shows none', async () => {
    await page.goto(`${server.issuer}/console`);
    const line = page.locator(`li[data-device-id="${lamp.id}"] > .device-line`);
    expect(await line.locator('ul.key-values li[data-capability="get_state"] [data-field="summary"]').textContent()).toBe('on: yes (true), level: 40');
    expect(await page.locator(`li[data-device-id="${plain.id}"] ul.key-values`).count()).toBe(0);
    await Promise.all([page.waitForURL((url) => url.pathname === `/console/devices/${lamp.id}`), line.locator('a.device-page').click()]);
    expect(await page.textContent('h1')).toBe('Hall lamp');
  });
});

describe('the device page', () => {
  it('shows online and last seen, each read function with its value and where it came from', async () => {
    await page.goto(pageOf(lamp.id));
    expect(await page.getAttribute('#device-status [data-state]', 'data-state')).toBe('online');
    expect(await page.locator('#device-last-seen time').count()).toBe(1);
    const state = valueRow('get_state');
    expect(await state.getAttribute('data-has-value')).toBe('true');
    expect(await state.locator('[data-field="value"] dt').allTextContents()).toEqual(['on', 'level']);
    expect(await state.locator('[data-field="value"] dd').allTextContents()).toEqual(['yes (true)', '40']);
    expect(await state.locator('[data-field="source"] a').getAttribute('href')).toBe(`/console/actions/${readAction}`);
    expect(await valueRow('get_temp').locator('[data-field="value"]').textContent()).toBe('no value yet');
    // Control functions have no value.
    expect(await valueRow('set_power').count()).toBe(0);
  });

  it('follows a report of the device live, without a reload', async () => {
    await page.goto(pageOf(lamp.id));
    await page.waitForSelector('body[data-live-state="open"]');
    await page.evaluate("document.body.setAttribute('data-not-reloaded', '')");
    const reported = await api.post(`/v1/device/${lamp.id}/state`, {
      token: lamp.token,
      body: { values: { get_state: { on: false, level: 5 }, get_temp: { celsius: 21.5 } } },
    });
    expect(reported.status, JSON.stringify(reported.body)).toBe(200);
    await expect.poll(() => valueRow('get_state').locator('[data-field="value"] dd').allTextContents(), STATE_POLL).toEqual(['no (false)', '5']);
    await expect.poll(() => valueRow('get_temp').locator('[data-field="value"] dd').allTextContents(), STATE_POLL).toEqual(['21.5']);
    // What a device reports is text, never markup, live and read again.
    const markup = '<img src=x id=planted>';
    await api.post(`/v1/device/${lamp.id}/state`, { token: lamp.token, body: { values: { get_temp: { note: markup } } } });
    await expect.poll(() => valueRow('get_temp').locator('[data-field="value"] dd').allTextContents(), STATE_POLL).toEqual([markup]);
    expect(await page.locator('#planted').count()).toBe(0);
    expect(await valueRow('get_temp').getAttribute('data-has-value')).toBe('true');
    expect(await valueRow('get_temp').locator('[data-field="reported-at"] time').count()).toBe(1);
    expect(await page.locator('body[data-not-reloaded]').count()).toBe(1);
    // Read again, the server says the same, naming the report as the source.
    await page.reload();
    expect(await valueRow('get_state').locator('[data-field="value"] dd').allTextContents()).toEqual(['no (false)', '5']);
    expect(await valueRow('get_state').locator('[data-field="source"]').textContent()).toBe('reported by the device');
    expect(await valueRow('get_temp').locator('[data-field="value"] dd').allTextContents()).toEqual([markup]);
    expect(await page.locator('#planted').count()).toBe(0);

    // The devices list follows too.
    await page.goto(`${server.issuer}/console`);
    await page.waitForSelector('body[data-live-state="open"]');
    const summary = page.locator(`ul.key-values[data-device-id="${lamp.id}"] li[data-capability="get_state"] [data-field="summary"]`);
    expect(await summary.textContent()).toBe('on: no (false), level: 5');
    await api.post(`/v1/device/${lamp.id}/state`, { token: lamp.token, body: { values: { get_state: { on: true, level: 90 } } } });
    await expect.poll(() => summary.textContent(), STATE_POLL).toBe('on: yes (true), level: 90');
  });

  it('words each function and folds its JSON Schema away', async () => {
    await page.goto(pageOf(lamp.id));
    const fn = page.locator('#functions li[data-function="get_state"]');
    expect(await fn.textContent()).toContain('Power and brightness.');
    expect(await fn.textContent()).toContain('takes no arguments');
    expect(await fn.locator('dl.args dt').allTextContents()).toEqual(['on', 'level']);
    expect(await fn.locator('dl.args dd').first().textContent()).toContain('Whether the lamp is lit.');
    const schema = fn.locator('details pre');
    expect(await schema.isVisible()).toBe(false);
    await fn.locator('details summary').click();
    expect(await schema.isVisible()).toBe(true);
    expect(JSON.parse((await schema.textContent()) ?? '')).toMatchObject({ result: { required: ['on'] } });
    const power = page.locator('#functions li[data-function="set_power"]');
    expect(await power.textContent()).toContain('changes the device');
    expect(await power.locator('dl.args dd').first().textContent()).toContain('yes or no · required');
  });

  it('lists recent actions linking to their pages, and the grants on the device', async () => {
    await page.goto(pageOf(lamp.id));
    const rows = page.locator('#device-actions tbody tr');
    expect(await rows.count()).toBe(2);
    expect(await rows.locator('td[data-label="Function"]').allTextContents()).toEqual(['set_power', 'get_state']);
    expect(await rows.nth(0).locator('td[data-label="Status"]').textContent()).toContain('awaiting_approval');
    expect(await rows.nth(0).locator('td[data-label="Agent"]').textContent()).toBe('Desk bot');
    await Promise.all([page.waitForURL((url) => url.pathname === `/console/actions/${readAction}`), rows.nth(1).locator('a').click()]);
    expect(await page.textContent('#action-status')).toContain('succeeded');

    await page.goto(pageOf(lamp.id));
    const grants = page.locator('#device-grants tbody tr');
    expect(await grants.locator('td[data-label="Function"] code').allTextContents()).toEqual(expect.arrayContaining(['get_state', 'set_power']));
    expect(await grants.count()).toBe(2);
    expect(await page.locator('#device-grants tr:has(code:text-is("set_power")) td[data-label="Approval"]').textContent()).toContain('waits for your approval');
    expect(await grants.first().locator('td[data-label="Agent"] a').getAttribute('href')).toBe(
      `/console/grants?principal=${encodeURIComponent(bot.principal)}`,
    );

    await page.goto(pageOf(plain.id));
    expect(await page.isVisible('#no-actions')).toBe(true);
    expect(await page.isVisible('#no-grants')).toBe(true);
  });

  it('renames the device and stays on its page', async () => {
    await page.goto(pageOf(plain.id));
    await page.fill('#rename input[name="name"]', 'Front porch sensor');
    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'renamed'), page.click('#rename button')]);
    expect(new URL(page.url()).pathname).toBe(`/console/devices/${plain.id}`);
    expect(await page.textContent('h1')).toBe('Front porch sensor');
    expect(await page.locator('#done').textContent()).toContain('renamed');
  });

  it('says live when the device goes quiet and when it calls in again, on its page and in the list', { timeout: 60_000 }, async () => {
    // A server of its own, on a clock the test moves: a device is offline after 60 s of silence.
    const clock = manualClock();
    const own = await startOAuthTestServer({ clock, env: { ...DEVELOPMENT_ENV, EXPIRY_SWEEP_SECONDS: '1', EVENTS_POLL_SECONDS: '0.2' } });
    const ownApi = client(() => own.url);
    const tab = await (await browser.newContext({ viewport: VIEWPORTS.phone })).newPage();
    try {
      const quiet = await attachDevice(ownApi, await signDevelopmentSession(own.config, 'paula'), { name: 'Attic fan' });
      await tab.goto(`${own.issuer}/console/sign-in`);
      await tab.fill('#sub', 'paula');
      await Promise.all([tab.waitForURL((url) => url.pathname === '/console'), tab.click('#development-sign-in')]);
      await tab.goto(`${own.issuer}/console/devices/${quiet.id}`);
      await tab.waitForSelector('body[data-live-state="open"]');
      expect(await tab.getAttribute('#device-status [data-state]', 'data-state')).toBe('online');

      clock.advance(61_000);
      await expect.poll(() => tab.getAttribute('#device-status [data-state]', 'data-state')).toBe('offline');
      expect(await tab.locator('body').getAttribute('data-live-state')).toBe('open');

      await tab.goto(`${own.issuer}/console`);
      await tab.waitForSelector('body[data-live-state="open"]');
      const listed = tab.locator(`li[data-device-id="${quiet.id}"] > details > summary [data-state]`);
      expect(await listed.getAttribute('data-state')).toBe('offline');
      expect((await next(ownApi, quiet)).status).toBe(200);
      await expect.poll(() => listed.getAttribute('data-state')).toBe('online');
    } finally {
      await tab.context().close();
      await own.close();
    }
  });

  it('answers a device of another workspace or none at all with a page saying so', async () => {
    const other = await attachDevice(api, await signDevelopmentSession(server.config, 'someone-else'), { name: 'Not yours' });
    const answer = await page.goto(pageOf(other.id));
    expect(answer?.status()).toBe(404);
    expect(await page.textContent('main')).not.toContain('Not yours');
    expect((await page.goto(pageOf('00000000-0000-4000-8000-000000000000')))?.status()).toBe(404);
  });

  it('has no serious or critical accessibility violation at desktop and phone width', { timeout: 60_000 }, async () => {
    for (const viewport of Object.values(VIEWPORTS)) {
      await page.setViewportSize(viewport);
      for (const target of [pageOf(lamp.id), pageOf(plain.id), `${server.issuer}/console`]) {
        await page.goto(target);
        // The folded schema opened too, so axe reads what it holds.
        if (target === pageOf(lamp.id)) await page.locator('#functions li[data-function="get_state"] details summary').click();
        expect({ target, viewport, violations: await axeViolations(page) }).toEqual({ target, viewport, violations: [] });
        // Nothing wider than the screen: the tables stack on a phone.
        expect(await page.evaluate('document.documentElement.scrollWidth <= window.innerWidth')).toBe(true);
      }
    }
  });
});

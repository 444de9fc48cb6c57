import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant, next, queue, report } from '../helpers/actions.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The Activity screen as the owner reads it (docs/owners/activity-log.md), in Debian's headless
 * Chromium: the empty-state line that gives way to rows arriving live, agents named as the
 * Approvals screen names them, arguments as names and values with an agent's text shown as text
 * (never markup), the action page's timeline from the action's own times, and axe-core finding no serious or critical violation.
 */

const DEVELOPMENT_ENV = {
  OWNER_JWKS_FILE: '',
  OWNER_ISSUER: '',
  OWNER_AUDIENCE: '',
  OWNER_WORKSPACE_CLAIM: '',
  RATE_LIMIT_AGENT_PER_SECOND: '100000',
  RATE_LIMIT_AGENT_BURST: '100000',
};
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'erin');

let browser: Browser;
let page: Page;
let lamp: AttachedDevice;
let helper: Agent;

async function openLive(url: string) {
  await page.goto(url);
  await page.waitForSelector('body[data-live-state="open"]');
  await page.evaluate("document.body.setAttribute('data-not-reloaded', '')");
}

beforeAll(async () => {
  lamp = await attachDevice(api, await owner(), { name: 'Desk lamp' });
  helper = await createAgent(api, await owner(), { name: 'Evening helper' });
  await grant(api, await owner(), helper.principal, lamp.id, ['set_power'], null, 'owner');
  await grant(api, await owner(), helper.principal, lamp.id, ['get_state', 'set_brightness']);
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  // The Content-Security-Policy is tested in test/console/console-browser.test.ts; bypassed here so
  // that axe-core can be loaded into the page.
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  page = await context.newPage();
  await page.goto(`${server.issuer}/console/sign-in`);
  await page.fill('#sub', 'erin');
  await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('the empty state of Activity', () => {
  it('says no action matches until a matching row arrives live, then gives way to it', async () => {
    await openLive(`${server.issuer}/console/activity?capability=set_brightness`);
    expect(await page.isVisible('#no-actions')).toBe(true);
    // An action the filter leaves out: the pending count shows its event was read, and the line stays.
    await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await page.waitForFunction(`document.querySelector('#pending-count [data-field="count"]').textContent === '1'`);
    expect(await page.locator('#actions tbody tr').count()).toBe(0);
    expect(await page.isVisible('#no-actions')).toBe(true);

    const kept = await queue(api, helper.token, lamp.id, { capability: 'set_brightness', arguments: { level: 30 } });
    await page.locator(`#actions tbody tr[data-action-id="${kept.id}"]`).waitFor();
    expect(await page.isVisible('#no-actions')).toBe(false);
    expect(await page.locator('body[data-not-reloaded]').count()).toBe(1);
    expect(await axeViolations(page)).toEqual([]);

    // Read again, the row is the server's and the line is still gone; a filter nothing matches brings it back.
    await page.reload();
    expect(await page.locator('#actions tbody tr').count()).toBe(1);
    expect(await page.isVisible('#no-actions')).toBe(false);
    await page.goto(`${server.issuer}/console/activity?capability=no_such_function`);
    expect(await page.isVisible('#no-actions')).toBe(true);
  });
});

describe('agents on Activity', () => {
  it('names the agent as Approvals does, with its principal beside the name, in rows read and rows arriving live', async () => {
    const read = await queue(api, helper.token, lamp.id, { capability: 'get_state', arguments: {} });
    await openLive(`${server.issuer}/console/activity`);
    const row = (id: string) => page.locator(`#actions tbody tr[data-action-id="${id}"]`);
    expect(await row(read.id).locator('[data-field="agent-name"]').textContent()).toBe('Evening helper');
    expect(await row(read.id).locator('[data-field="principal"]').textContent()).toBe(helper.principal);

    const live = await queue(api, helper.token, lamp.id, { capability: 'get_state', arguments: {} });
    await row(live.id).waitFor();
    expect(await row(live.id).locator('[data-field="agent-name"]').textContent()).toBe('Evening helper');
    expect(await row(live.id).locator('[data-field="principal"]').textContent()).toBe(helper.principal);
    expect(await axeViolations(page)).toEqual([]);
  });
});

describe('arguments on Activity', () => {
  const MARKUP = '<img src=x onerror=alert(1)>';

  it("lists each argument's name and value, strings as text and never as markup, in rows read and rows arriving live", async () => {
    const sign = await attachDevice(api, await owner(), {
      name: 'Door sign',
      manifest: {
        capabilities: [
          {
            name: 'show',
            kind: 'control',
            arguments: { type: 'object', properties: { text: { type: 'string' }, seconds: { type: 'integer' }, blink: { type: 'boolean' } } },
          },
        ],
      },
    });
    await grant(api, await owner(), helper.principal, sign.id, ['show']);
    const dialogs: string[] = [];
    page.on('dialog', (dialog) => {
      dialogs.push(dialog.message());
      void dialog.dismiss();
    });
    const args = { text: MARKUP, seconds: 30, blink: true };
    const entries = (id: string) =>
      page
        .locator(`#actions tbody tr[data-action-id="${id}"] [data-field="arguments"] dl.args`)
        .evaluate((list: { children: ArrayLike<{ textContent: string | null }> }) => Array.from(list.children, (child) => child.textContent));
    const expected = ['text', MARKUP, 'seconds', '30', 'blink', 'yes (true)'];

    const read = await queue(api, helper.token, sign.id, { capability: 'show', arguments: args });
    await openLive(`${server.issuer}/console/activity?deviceId=${sign.id}`);
    expect(await entries(read.id)).toEqual(expected);

    const live = await queue(api, helper.token, sign.id, { capability: 'show', arguments: args });
    await page.locator(`#actions tbody tr[data-action-id="${live.id}"]`).waitFor();
    expect(await entries(live.id)).toEqual(expected);
    expect(await page.locator('main img').count()).toBe(0);
    expect(dialogs).toEqual([]);
    expect(await axeViolations(page)).toEqual([]);
  });
});

describe("the action page's timeline", () => {
  it('shows requested, approved, received and finished, each at the time the action records', async () => {
    const action = await queue(api, helper.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await api.post(`/v1/actions/${action.id}/approve`, { token: await owner(), body: {} })).status).toBe(200);
    // The lamp has older commands queued by the tests above: it runs each until this one.
    let command = (await next(api, lamp)).body.data;
    expect(command).toBeTruthy();
    while (command && command.id !== action.id) {
      expect((await report(api, lamp, { actionId: command.id, ok: true, result: {} })).status).toBe(200);
      command = (await next(api, lamp)).body.data;
    }
    expect((await report(api, lamp, { actionId: action.id, ok: true, result: { on: true } })).status).toBe(200);
    const stored = (await api.get(`/v1/actions/${action.id}`, { token: await owner() })).body.data;
    expect(stored.status).toBe('succeeded');

    await page.goto(`${server.issuer}/console/actions/${action.id}`);
    const steps = await page
      .locator('#timeline li')
      .evaluateAll((items: { getAttribute(name: string): string | null; querySelector(s: string): { getAttribute(name: string): string | null } | null }[]) =>
        items.map((li) => [li.getAttribute('data-step'), li.querySelector('time')?.getAttribute('data-ms')]),
      );
    expect(steps).toEqual([
      ['requested', String(stored.createdAt)],
      ['approved', String(stored.approval.decidedAt)],
      ['received', String(stored.dispatchedAt)],
      ['finished', String(stored.completedAt)],
    ]);
    expect(await page.locator('#timeline li[data-step="approved"]').textContent()).toContain('Approved by erin');
    expect(await page.locator('#timeline li[data-step="finished"]').textContent()).toContain('Finished: succeeded');
    expect(await axeViolations(page)).toEqual([]);
  });
});

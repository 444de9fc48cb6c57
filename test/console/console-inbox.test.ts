import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { INBOX_PAGE } from '../../src/domain/approvals.js';
import { MAX_FIELD_CHARS } from '../../src/domain/human-text.js';
import { grant, queue } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The approvals inbox (docs/owners/approvals.md) in Debian's headless Chromium: an agent that queued
 * 1,280 approvals gets them read a page at a time, with pager links and bulk rejection that
 * work without JavaScript; what the agent and the device wrote is shown with its hidden
 * characters marked and its length capped, on the server-rendered page and in rows the live
 * script adds.
 */

const CHROMIUM = '/usr/bin/chromium';
const DEVELOPMENT_ENV = {
  OWNER_JWKS_FILE: '',
  OWNER_ISSUER: '',
  OWNER_AUDIENCE: '',
  OWNER_WORKSPACE_CLAIM: '',
  // One agent queues all of them, as the flood the inbox must survive.
  RATE_LIMIT_AGENT_PER_SECOND: '100000',
  RATE_LIMIT_AGENT_BURST: '100000',
  RATE_LIMIT_OWNER_PER_SECOND: '100000',
  RATE_LIMIT_OWNER_BURST: '100000',
  DEVICE_QUEUE_PER_PRINCIPAL: '5000',
};
const FLOOD = 1280;
/** A right-to-left override, a zero-width space and a tag character ("ASCII smuggling"). */
const HIDDEN = 'open\u202Egate\u200B\u{E0041}';

const sayManifest = {
  capabilities: [
    {
      name: 'say',
      kind: 'control',
      arguments: { type: 'object', properties: { text: { type: 'string', maxLength: 4000 } }, required: ['text'], additionalProperties: false },
    },
  ],
};

let browser: Browser;
/** A browser without JavaScript: the inbox must page and reject with plain links and forms. */
let plain: BrowserContext;
let page: Page;
let deviceId: string;
let agent: { token: string; principal: string };
/** The flood's ids, oldest first. */
const flood: string[] = [];

const owner = () => signDevelopmentSession(server.config, 'carol');

async function signIn(context: BrowserContext): Promise<Page> {
  const tab = await context.newPage();
  await tab.goto(`${server.issuer}/console/sign-in`);
  await tab.fill('#sub', 'carol');
  await Promise.all([tab.waitForURL((url) => url.pathname === '/console'), tab.click('#development-sign-in')]);
  return tab;
}

// (The tests compile without the DOM's types: the page's rows are typed by what is read of them.)
const rowIds = (tab: Page): Promise<string[]> =>
  tab
    .locator('#approval-rows tr')
    .evaluateAll((rows: { getAttribute(name: string): string | null }[]) => rows.map((row) => row.getAttribute('data-action-id')!));

const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;

beforeAll(async () => {
  const device = await attachDevice(api, await owner(), { name: `Gate\u202Ekcol`, manifest: sayManifest });
  deviceId = device.id;
  agent = await createAgent(api, await owner(), { name: 'Flooder' });
  await grant(api, await owner(), agent.principal, deviceId, ['say'], null, 'owner');
  // The first one hides characters and is long; the rest are short.
  flood.push((await queue(api, agent.token, deviceId, { capability: 'say', arguments: { text: HIDDEN + 'x'.repeat(2 * MAX_FIELD_CHARS) } })).id);
  for (let i = 1; i < FLOOD; i += 32) {
    const batch = Array.from({ length: Math.min(32, FLOOD - i) }, (_, k) =>
      queue(api, agent.token, deviceId, { capability: 'say', arguments: { text: `hello ${i + k}` } }),
    );
    for (const created of await Promise.all(batch)) flood.push(created.id);
  }
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: ['--no-sandbox', '--disable-gpu', '--no-first-run'] });
  plain = await browser.newContext({ javaScriptEnabled: false });
  page = await signIn(plain);
}, 120_000);

afterAll(async () => {
  await browser?.close();
});

describe('the inbox shows what an agent or a device wrote with hidden characters marked, capped', () => {
  it('marks the override, the zero-width space and the tag character, and says how much was cut', async () => {
    await page.goto(`${server.issuer}/console/approvals`);
    const row = page.locator(`#approval-rows tr[data-action-id="${flood[0]}"]`);
    const shown = (await row.locator('[data-field="arguments"]').textContent())!;
    expect(shown).toContain('open⟨U+202E⟩gate⟨U+200B⟩⟨U+E0041⟩');
    expect(shown).not.toMatch(/[\u202E\u200B]|\u{E0041}/u);
    expect(shown).toMatch(/… \(\d+ more characters\)$/);
    expect(Array.from(shown).length).toBeLessThan(MAX_FIELD_CHARS + 100);
    expect(await row.locator('[data-field="device"]').textContent()).toBe('Gate⟨U+202E⟩kcol');
    // What is stored is what the agent sent.
    const stored = await api.get(`/v1/actions/${flood[0]}`, { token: await owner() });
    expect(stored.body.data.arguments.text).toBe(HIDDEN + 'x'.repeat(2 * MAX_FIELD_CHARS));
  });

  it('marks them in a row the live script adds too', { timeout: 120_000 }, async () => {
    const live = await signIn(await browser.newContext());
    // The last page, which has room for a new row.
    await live.goto(`${server.issuer}/console/approvals`);
    while ((await live.locator('a[data-page="next"]').count()) > 0)
      await live.goto(`${server.issuer}${await live.locator('a[data-page="next"]').first().getAttribute('href')}`);
    await live.waitForSelector('body[data-live-state="open"]');
    const added = await queue(api, agent.token, deviceId, { capability: 'say', arguments: { text: HIDDEN } });
    flood.push(added.id);
    const row = live.locator(`#approval-rows tr[data-action-id="${added.id}"]`);
    await row.waitFor();
    expect(await row.locator('[data-field="arguments"]').textContent()).toContain('open⟨U+202E⟩gate⟨U+200B⟩⟨U+E0041⟩');
    expect(await row.locator('[data-field="device"]').textContent()).toBe('Gate⟨U+202E⟩kcol');
    await live.context().close();
  });
});

describe('the inbox is read a page at a time', () => {
  it(`shows ${INBOX_PAGE} of the ${FLOOD.toLocaleString('en')} waiting, oldest first, with the count`, async () => {
    await page.goto(`${server.issuer}/console/approvals`);
    expect(await rowIds(page)).toEqual(flood.slice(0, INBOX_PAGE));
    expect(await page.textContent('#inbox-count')).toContain(`${(FLOOD + 1).toLocaleString('en')} actions wait`);
    expect(await page.locator('a[data-page="previous"]').count()).toBe(0);
  });

  it('follows next links to the last page and previous links back, without JavaScript', { timeout: 180_000 }, async () => {
    await page.goto(`${server.issuer}/console/approvals`);
    const seen: string[] = [];
    let pages = 0;
    for (;;) {
      seen.push(...(await rowIds(page)));
      pages++;
      const next = page.locator('a[data-page="next"]').first();
      if ((await next.count()) === 0) break;
      await Promise.all([page.waitForURL(/after=/), next.click()]);
    }
    expect(pages).toBe(Math.ceil((FLOOD + 1) / INBOX_PAGE));
    expect(seen).toEqual(flood);
    // And back again to the first page.
    const back: string[][] = [];
    for (;;) {
      const previous = page.locator('a[data-page="previous"]').first();
      if ((await previous.count()) === 0) break;
      await Promise.all([page.waitForURL(/before=/), previous.click()]);
      back.push(await rowIds(page));
    }
    expect(back.at(-1)).toEqual(flood.slice(0, INBOX_PAGE));
    expect(back).toHaveLength(pages - 1);
  });
});

describe('bulk reject', () => {
  it('rejects every action on the page with one reason, leaves one approved meanwhile alone, and says how many', { timeout: 60_000 }, async () => {
    await page.goto(`${server.issuer}/console/approvals`);
    await Promise.all([page.waitForURL(/after=/), page.locator('a[data-page="next"]').first().click()]);
    const onPage = await rowIds(page);
    expect(onPage).toEqual(flood.slice(INBOX_PAGE, 2 * INBOX_PAGE));
    // Approved by someone else after the page was read.
    const approved = await api.post(`/v1/actions/${onPage[3]}/approve`, { token: await owner() });
    expect(approved.status, JSON.stringify(approved.body)).toBe(200);

    await page.fill('#bulk-reject input[name="reason"]', 'flood');
    await Promise.all([page.waitForURL(/done=bulk/), page.click('#reject-page')]);
    expect(await page.textContent('#done')).toContain(`Rejected ${INBOX_PAGE - 1} actions. 1 was no longer waiting`);

    const states = await Promise.all(onPage.map(async (id) => (await api.get(`/v1/actions/${id}`, { token: await owner() })).body.data));
    expect(states[3]).toMatchObject({ status: 'queued' });
    expect(states.filter((a) => a.status === 'rejected')).toHaveLength(INBOX_PAGE - 1);
    expect(states.find((a) => a.status === 'rejected')).toMatchObject({ approval: { decision: 'rejected', decidedBy: 'carol', reason: 'flood' } });
    // The same place in the inbox: the page now shows the ones that came after.
    expect(await rowIds(page)).toEqual(flood.slice(2 * INBOX_PAGE, 3 * INBOX_PAGE));
    expect(await page.textContent('#inbox-count')).toContain(`${(FLOOD + 1 - INBOX_PAGE).toLocaleString('en')} actions wait`);
  });

  it('rejects only the ticked ones with "Reject selected"', { timeout: 60_000 }, async () => {
    await page.goto(`${server.issuer}/console/approvals`);
    const [first, second, third] = await rowIds(page);
    await page.check(`#approval-rows tr[data-action-id="${first}"] input[type="checkbox"]`);
    await page.check(`#approval-rows tr[data-action-id="${third}"] input[type="checkbox"]`);
    await Promise.all([page.waitForURL(/done=bulk/), page.click('#reject-selected')]);
    expect(await page.textContent('#done')).toContain('Rejected 2 actions.');
    const status = async (id: string) => (await api.get(`/v1/actions/${id}`, { token: await owner() })).body.data.status;
    expect([await status(first!), await status(second!), await status(third!)]).toEqual(['rejected', 'awaiting_approval', 'rejected']);
  });

  it('refuses a bulk rejection posted without the form token', async () => {
    const res = await page.request.post(`${server.issuer}/console/approvals/reject-many`, {
      form: { scope: 'page', [`on-page-${flood[1]}`]: '1' },
      headers: { Origin: server.issuer },
    });
    expect(res.status()).toBe(403);
    expect((await api.get(`/v1/actions/${flood[1]}`, { token: await owner() })).body.data.status).toBe('awaiting_approval');
  });
});

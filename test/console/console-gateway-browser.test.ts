import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { childrenOf, grant, hubManifest } from '../helpers/actions.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { registerClient, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The gateway grant form (docs/owners/grants.md "Giving and revoking grants") in Debian's headless
 * Chromium: no agent chosen until the owner chooses one, each agent offered once (an OAuth client
 * too), earlier grants replaced only after a confirmation that names them, and axe-core finding
 * no serious or critical violation.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'gwen');

let browser: Browser;
let page: Page;
let hub: AttachedDevice;
let agent: Agent;
let client: { principal: string };

const grantsOf = async (principal: string) =>
  (await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: await owner() })).body.data as {
    capability: string;
    gatewayId: string | null;
  }[];

beforeAll(async () => {
  hub = await attachDevice(api, await owner(), { name: 'Garden hub', kind: 'gateway', manifest: hubManifest });
  agent = await createAgent(api, await owner(), { name: 'Garden bot' });
  client = await registerClient(server.issuer, await owner(), {
    name: 'Garden app',
    redirectUris: ['http://127.0.0.1:9/callback'],
    public: true,
    access: 'act',
  });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  // The Content-Security-Policy is tested in test/console/console-browser.test.ts; bypassed here so
  // that axe-core can be loaded into the page.
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  page = await context.newPage();
  await page.goto(`${server.issuer}/console/sign-in`);
  await page.fill('#sub', 'gwen');
  await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('the gateway grant form', () => {
  it('starts with no agent chosen and grants nothing until the owner chooses one', async () => {
    await page.goto(`${server.issuer}/console/gateways`);
    expect(await page.inputValue('#gateway-agent')).toBe('');
    await page.click('#grant-gateway');
    expect(await page.locator('#gateway-agent').evaluate((select: { validity: { valueMissing: boolean } }) => select.validity.valueMissing)).toBe(true);
    expect(new URL(page.url()).pathname).toBe('/console/gateways');
    expect(await grantsOf(agent.principal)).toEqual([]);
    expect(await axeViolations(page)).toEqual([]);
  });

  it('offers each agent once, an OAuth client included', async () => {
    await page.goto(`${server.issuer}/console/gateways`);
    const values = await page.locator('#gateway-agent option').evaluateAll((options: { value: string }[]) => options.map((o) => o.value));
    expect(values.filter((v) => v === client.principal)).toHaveLength(1);
    expect(values.filter((v) => v === agent.principal)).toHaveLength(1);
    expect(new Set(values).size).toBe(values.length);
  });

  it('names the earlier grants it would replace and changes nothing until the owner confirms', async () => {
    const { Bulb: bulb } = await childrenOf(api, await owner(), hub.id);
    await grant(api, await owner(), agent.principal, bulb!, ['set_power']);
    await page.goto(`${server.issuer}/console/gateways`);
    await page.selectOption('#gateway-agent', agent.principal);
    await page.check('input[name="mode"][value="read"]');
    await page.click('#grant-gateway');
    expect(await page.locator('#replaced-grants li').allTextContents()).toEqual(['Bulb: set_power']);
    expect(await page.textContent('main')).toContain('Garden bot');
    expect(await axeViolations(page)).toEqual([]);
    expect((await grantsOf(agent.principal)).map((g) => g.capability)).toEqual(['set_power']);

    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'granted'), page.click('#confirm-replace')]);
    const after = await grantsOf(agent.principal);
    expect(after.map((g) => g.capability).sort()).toEqual(['get_state', 'hub_status']);
    for (const g of after) expect(g.gatewayId).toBe(hub.id);
  });
});

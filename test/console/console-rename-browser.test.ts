import { chromium, type Browser, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, lampManifest } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The owner renames a device from the Devices screen, in a real browser without scripts: the
 * form on the device's entry, the name kept when the device republishes its manifest, and a
 * refused name answered with the reason.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'rita');

let browser: Browser;
let page: Page;
let lamp: { id: string; token: string };

beforeAll(async () => {
  lamp = await attachDevice(api, await owner(), { name: 'Hall thermostat' });
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  const context = await browser.newContext({ javaScriptEnabled: false });
  page = await context.newPage();
  await page.goto(`${server.issuer}/console/sign-in`);
  await page.fill('#sub', 'rita');
  await Promise.all([page.waitForURL((url) => url.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('renaming a device on the Devices screen', () => {
  it("renames it from the device's entry and keeps the name when the device republishes", async () => {
    const entry = page.locator(`li[data-device-id="${lamp.id}"]`);
    await entry.locator('summary').first().click();
    await entry.locator('form.rename input[name="name"]').fill('Node thermostat');
    await Promise.all([page.waitForURL((url) => url.searchParams.get('done') === 'renamed'), entry.locator('form.rename button').click()]);
    expect(await page.locator('#done').textContent()).toContain('renamed');
    expect(await page.locator(`li[data-device-id="${lamp.id}"] .device-name`).first().textContent()).toBe('Node thermostat');

    expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: lampManifest })).status).toBe(200);
    await page.reload();
    expect(await page.locator(`li[data-device-id="${lamp.id}"] .device-name`).first().textContent()).toBe('Node thermostat');
  });

  it('answers a name over 64 characters with the reason, and the device keeps its name', async () => {
    const entry = page.locator(`li[data-device-id="${lamp.id}"]`);
    await entry.locator('summary').first().click();
    // The field's maxlength holds a typist back; a longer value set in the page reaches the server's rule.
    await entry.locator('form.rename input[name="name"]').evaluate((input: { removeAttribute(name: string): void; value: string }) => {
      input.removeAttribute('maxlength');
      input.value = 'x'.repeat(65);
    });
    const [answer] = await Promise.all([
      page.waitForResponse((res) => res.url().endsWith(`/console/devices/${lamp.id}/rename`)),
      entry.locator('form.rename button').click(),
    ]);
    expect(answer.status()).toBe(400);
    expect(await page.locator('#error').textContent()).toContain('name');
    await page.goto(`${server.issuer}/console`);
    expect(await page.locator(`li[data-device-id="${lamp.id}"] .device-name`).first().textContent()).toBe('Node thermostat');
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTestServer } from '../helpers/server.js';

/**
 * The API reference in a real browser (Debian's headless Chromium, as the consent-page test
 * drives it): opened from either loopback name (127.0.0.1, localhost), it loads everything from
 * the service itself and its "Test Request" calls the same origin, with no proxy between.
 */

let browser: BrowserContext;
let userDataDir: string;

const server = useTestServer();

beforeAll(async () => {
  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-chromium-'));
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

describe('GET /docs in headless Chromium', () => {
  for (const host of ['127.0.0.1', 'localhost']) {
    it(`from ${host}: requests only its own origin, and "Test Request" → Send answers from that origin`, { timeout: 60_000 }, async () => {
      const origin = `http://${host}:${new URL(server.url).port}`;
      const page = await browser.newPage();
      const requested: string[] = [];
      page.on('request', (request) => requested.push(request.url()));
      await page.goto(`${origin}/docs#tag/health/GET/healthz`, { waitUntil: 'networkidle' });
      await page
        .getByRole('button', { name: /Test Request/ })
        .first()
        .click();
      const answered = page.waitForResponse((response) => response.url() === `${origin}/healthz`);
      await page.getByRole('button', { name: /^Send/ }).first().click();
      expect((await answered).status()).toBe(200);
      await page.close();
      expect(requested.filter((url) => !url.startsWith(`${origin}/`))).toEqual([]);
      expect(requested).toEqual(expect.arrayContaining([`${origin}/docs/scalar.js`, `${origin}/openapi.json`, `${origin}/healthz`]));
    });
  }
});

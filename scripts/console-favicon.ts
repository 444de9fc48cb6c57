/**
 * Renders the console's PNG icons (src/console/static/icon-192.png, icon-512.png: the web app
 * manifest's) from src/console/static/favicon.svg with the Chromium the browser tests use.
 * Run after changing the SVG: `npx tsx scripts/console-favicon.ts`.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';
import { CHROMIUM, CHROMIUM_ARGS } from '../test/helpers/browser.js';

const dir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src/console/static');
const svg = fs.readFileSync(path.join(dir, 'favicon.svg'), 'utf8');
const browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
try {
  for (const size of [192, 512]) {
    const page = await browser.newPage({ viewport: { width: size, height: size } });
    await page.setContent(`<body style="margin:0">${svg.replace('<svg ', `<svg width="${size}" height="${size}" `)}</body>`);
    await page.screenshot({ path: path.join(dir, `icon-${size}.png`), omitBackground: true });
    await page.close();
  }
} finally {
  await browser.close();
}

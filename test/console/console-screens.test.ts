import fs from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { ICON_NAMES } from '../../src/console/icons.js';
import { grant, hubManifest, queue, requestAction } from '../helpers/actions.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, toolName } from '../helpers/mcp-client.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * Every console screen in Debian's headless Chromium (docs/owners/console-guide.md): the grants
 * overview showing a grant and changing its approval mode in place; the pause switch refusing
 * an agent's request and resuming; axe-core on every screen in light and dark mode at desktop
 * and phone width, with no serious or critical violation; the screenshots of every screen that
 * docs/console/ holds.
 */

const SHOTS = path.resolve(import.meta.dirname, '../..', 'docs', 'console');
const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;
const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
// Resolved from the test folder: axe-core is a devDependency.
const AXE_SOURCE = fs.readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');

let browser: Browser;
let context: BrowserContext;
let page: Page;
let lamp: AttachedDevice;
let hub: AttachedDevice;
let agent: { id: string; token: string; principal: string };
let setPowerGrant: string;

const owner = () => signDevelopmentSession(server.config, 'olivia');
const url = (pathname: string) => `${server.issuer}${pathname}`;

const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;

beforeAll(async () => {
  fs.mkdirSync(SHOTS, { recursive: true });
  const token = await owner();
  lamp = await attachDevice(api, token, { name: 'Hall lamp' });
  hub = await attachDevice(api, token, { name: 'Living room hub', kind: 'gateway', manifest: hubManifest });
  agent = await createAgent(api, token, { name: 'Desk bot', access: 'act', principal: 'agent:desk-bot' });
  await createAgent(api, token, { name: 'Night bot', access: 'read', principal: 'agent:night-bot' });
  [, setPowerGrant] = (await grant(api, token, agent.principal, lamp.id, ['get_state', 'set_power'], 86_400)).map((g) => g.id) as [string, string];
  await grant(api, token, agent.principal, lamp.id, ['set_brightness'], null, 'owner');
  await api.post(`/v1/devices/${hub.id}/gateway-grants`, { token, body: { principal: 'agent:night-bot', mode: 'read' } });
  // One action waiting in the approvals inbox, one finished in the activity feed.
  await queue(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: 40 }, approvalTtlSeconds: 86_400 });
  await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });

  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  context = await browser.newContext({ viewport: VIEWPORTS.desktop });
  page = await context.newPage();
  await page.goto(url('/console/sign-in'));
  await page.fill('#sub', 'olivia');
  await Promise.all([page.waitForURL((u) => u.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

describe('the grants overview', () => {
  it('shows an existing grant with its access level, approval and expiry, and changes its approval mode in place', async () => {
    await page.goto(url('/console/grants'));
    const row = page.locator(`#grants-overview tr[data-grant-id="${setPowerGrant}"]`);
    expect(await row.locator('td[data-label="Agent"] a').textContent()).toBe('Desk bot');
    expect(await row.locator('td[data-label="Device"]').textContent()).toBe('Hall lamp');
    expect(await row.locator('td[data-label="Access level"]').textContent()).toContain('control');
    expect(await row.locator('[data-field="approval"]').textContent()).toBe('none');
    expect(await row.locator('[data-field="state"]').textContent()).toContain('live');
    // Gateway grants appear beside single grants.
    expect(await page.locator('#grants-overview tr[data-principal="agent:night-bot"][data-function="hub_status"]').count()).toBe(1);

    await row.locator('select[name="newApproval"]').selectOption('owner');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'updated'), row.locator(`button[data-save="${setPowerGrant}"]`).click()]);
    expect(await page.textContent('#done')).toContain('Grant changed');
    expect(await page.locator(`#grants-overview tr[data-grant-id="${setPowerGrant}"] [data-field="approval"]`).textContent()).toBe('owner');

    // The same grant, changed in place: its id and expiry kept, and the agent's next request waits for the owner.
    const listed = (await api.get(`/v1/grants?principal=${agent.principal}`, { token: await owner() })).body.data;
    const changed = listed.find((g: { id: string }) => g.id === setPowerGrant);
    expect(changed).toMatchObject({ capability: 'set_power', approval: 'owner', expiresAt: expect.any(Number) });
    const asked = await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(asked.body.data.status).toBe('awaiting_approval');
    await api.post(`/v1/actions/${asked.body.data.id}/reject`, { token: await owner(), body: { reason: 'test' } });
    rejectedActionId = asked.body.data.id;
  });

  it('searches by agent, device or function, and pages', async () => {
    await page.goto(url('/console/grants?q=hub_'));
    const functions = await page.locator('#grants-overview tbody tr').evaluateAll((rows) => rows.map((r) => r.getAttribute('data-function')));
    expect(functions).toEqual(['hub_status']);
    await page.goto(url('/console/grants?q=Hall%20lamp'));
    expect(await page.locator('#grants-overview tbody tr').count()).toBe(3);
    expect(await page.textContent('#grant-count')).toContain('3 grants matching');

    // 17 more agents with three grants each: 56 grants in all, two pages.
    const token = await owner();
    for (let i = 0; i < 17; i += 1) await grant(api, token, `agent:bulk-${String(i).padStart(2, '0')}`, lamp.id, ['get_state', 'set_power', 'set_brightness']);
    await page.goto(url('/console/grants'));
    expect(await page.textContent('#grant-count')).toContain('56 grants · page 1 of 2');
    expect(await page.locator('#grants-overview tbody tr').count()).toBe(50);
    await Promise.all([page.waitForURL((u) => u.searchParams.get('page') === '2'), page.click('text=Next page')]);
    expect(await page.locator('#grants-overview tbody tr').count()).toBe(6);
    for (let i = 0; i < 17; i += 1) {
      await api.post('/v1/grants/revoke', { token, body: { principal: `agent:bulk-${String(i).padStart(2, '0')}`, deviceId: lamp.id } });
    }
  });

  it('preselects owner approval and an expiry for new grants, and says so', async () => {
    await page.goto(url(`/console/grants?principal=${encodeURIComponent(agent.principal)}`));
    const form = page.locator('form[data-device-name="Living room hub"]');
    expect(await form.locator('select[name="approval"]').inputValue()).toBe('owner');
    expect(await form.locator('select[name="ttlSeconds"]').inputValue()).toBe('604800');
    expect(await page.textContent('#safer-defaults')).toContain('owner approval');
    // What is granted and live has no checkbox: granting is for what is not.
    const lampForm = page.locator('form[data-device-name="Hall lamp"]');
    expect(await lampForm.locator('input[name="fn:set_power"]').count()).toBe(0);
  });
});

describe('the pause switch', () => {
  it("pausing device control refuses an agent's request, and resuming accepts it", async () => {
    await page.goto(url('/console/service'));
    expect(await page.getAttribute('#pause-switch', 'data-paused')).toBe('false');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'paused'), page.click('#pause-controls')]);
    expect(await page.getAttribute('#pause-switch', 'data-paused')).toBe('true');
    expect(await page.textContent('#pause-state')).toContain('Paused');

    const refused = await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(refused.status).toBe(503);
    expect(refused.body.error.code).toBe('device_controls_disabled');
    const tool = toolName('get_state', lamp.id);
    const mcp = await rawMcp(server.url, { token: agent.token, method: 'tools/call', name: tool, params: { name: tool, arguments: {} } });
    expect(mcp.status).toBe(503);
    expect(mcp.json.error.code).toBe('device_controls_disabled');
    await screenshot('service-paused');

    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'resumed'), page.click('#resume-controls')]);
    expect(await page.getAttribute('#pause-switch', 'data-paused')).toBe('false');
    const accepted = await requestAction(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(accepted.status).toBe(201);
  });
});

/** An action the owner rejected in the grants tests: the action page shows it with its reason. */
let rejectedActionId = '';

/** Every screen of the console, by the name its screenshots carry. */
const SCREENS: { name: string; path: () => string; signedOut?: boolean; prepare?: (target: Page) => Promise<void> }[] = [
  { name: 'sign-in', path: () => '/console/sign-in', signedOut: true },
  // A device opened: its functions with their access level and the arguments they take.
  { name: 'devices', path: () => '/console', prepare: (target) => target.locator(`[data-device-id="${lamp.id}"] summary`).first().click() },
  // A device's own page: its values, functions in words, recent actions and grants.
  { name: 'device', path: () => `/console/devices/${lamp.id}` },
  { name: 'device-revoke', path: () => `/console/devices/${lamp.id}/revoke` },
  { name: 'attach', path: () => '/console/attach' },
  { name: 'agents', path: () => '/console/agents' },
  { name: 'grants', path: () => '/console/grants' },
  { name: 'grants-agent', path: () => `/console/grants?principal=${encodeURIComponent(agent.principal)}` },
  { name: 'grant-conditions', path: () => `/console/grants/conditions?grantId=${setPowerGrant}` },
  { name: 'gateways', path: () => '/console/gateways' },
  { name: 'enrollments', path: () => '/console/enrollments' },
  { name: 'approvals', path: () => '/console/approvals' },
  { name: 'activity', path: () => '/console/activity' },
  { name: 'action', path: () => `/console/actions/${rejectedActionId}` },
  { name: 'webhooks', path: () => '/console/webhooks' },
  { name: 'usage', path: () => '/console/usage' },
  { name: 'service', path: () => '/console/service' },
];

async function screenshot(name: string, target = page) {
  await target.screenshot({ path: path.join(SHOTS, `${name}-desktop.png`), fullPage: true });
}

interface AxeViolation {
  id: string;
  impact: string | null;
  help: string;
  nodes: { target: string[] }[];
}

/** axe-core run in the page (evaluated over the DevTools protocol, which the page's CSP does not govern). */
async function axe(target: Page): Promise<AxeViolation[]> {
  await target.evaluate(AXE_SOURCE);
  const result = (await target.evaluate(
    "axe.run(document, { resultTypes: ['violations'], runOnly: { type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice'] } })",
  )) as { violations: AxeViolation[] };
  return result.violations;
}

describe('every screen, in light and dark mode, at desktop and phone width', () => {
  it('has no serious or critical accessibility violation (axe-core), and its screenshots are written', { timeout: 240_000 }, async () => {
    const signedOut = await browser.newContext();
    const found: string[] = [];
    try {
      for (const scheme of ['light', 'dark'] as const) {
        for (const [width, viewport] of Object.entries(VIEWPORTS)) {
          for (const screen of SCREENS) {
            const target = screen.signedOut ? await signedOut.newPage() : await context.newPage();
            await target.emulateMedia({ colorScheme: scheme });
            await target.setViewportSize(viewport);
            await target.goto(url(screen.path()));
            await screen.prepare?.(target);
            expect(new URL(target.url()).pathname, screen.name).toBe(screen.path().split('?')[0]);
            for (const violation of await axe(target)) {
              if (violation.impact !== 'serious' && violation.impact !== 'critical') continue;
              found.push(
                `${screen.name} ${scheme} ${width}: ${violation.id} (${violation.impact}) ${violation.help} at ${violation.nodes.map((n) => n.target.join(' ')).join(', ')}`,
              );
            }
            const suffix = scheme === 'dark' ? `dark-${width}` : width;
            // Light mode at both widths, dark mode at phone width: the screens the docs show.
            if (scheme === 'light' || width === 'phone')
              await target.screenshot({ path: path.join(SHOTS, `${screen.name}-${suffix}.png`), fullPage: width === 'desktop' });
            await target.close();
          }
        }
      }
    } finally {
      await signedOut.close();
    }
    expect(found).toEqual([]);
  });

  it('draws the dark colour scheme under prefers-color-scheme: dark', async () => {
    const target = await context.newPage();
    try {
      await target.emulateMedia({ colorScheme: 'dark' });
      await target.goto(url('/console'));
      const background = await target.evaluate('getComputedStyle(document.body).backgroundColor');
      expect(background).toBe('rgb(20, 22, 26)');
      await target.emulateMedia({ colorScheme: 'light' });
      expect(await target.evaluate('getComputedStyle(document.body).backgroundColor')).toBe('rgb(255, 255, 255)');
    } finally {
      await target.close();
    }
  });

  it('keeps the approvals inbox one thumb away at phone width: first in a navigation bar at the bottom', async () => {
    const target = await context.newPage();
    try {
      await target.setViewportSize(VIEWPORTS.phone);
      await target.goto(url('/console/usage'));
      const box = await target.locator('nav.console a[href="/console/approvals"]').boundingBox();
      expect(box).not.toBeNull();
      expect(box!.y + box!.height).toBeGreaterThan(VIEWPORTS.phone.height - 80);
      expect(box!.x).toBeLessThan(20);
      const header = await target.locator('header.top').boundingBox();
      expect(header!.height).toBeLessThan(80);
    } finally {
      await target.close();
    }
  });
});

describe('icons, favicon and manifest', () => {
  it('vendors exactly the icons the console uses', () => {
    const source = JSON.parse(fs.readFileSync(path.resolve(import.meta.dirname, '../..', 'vendor', 'lucide-icons', 'source.json'), 'utf8')) as {
      icons: string[];
    };
    expect(source.icons).toEqual([...ICON_NAMES]);
    const screens = fs
      .readdirSync(path.resolve(import.meta.dirname, '../..', 'src', 'console'), { recursive: true, encoding: 'utf8' })
      .filter((file) => file.endsWith('.tsx'))
      .map((file) => fs.readFileSync(path.resolve(import.meta.dirname, '../..', 'src', 'console', file), 'utf8'))
      .join('\n');
    for (const name of ICON_NAMES) expect(screens, name).toMatch(new RegExp(`['"]${name}['"]`));
  });

  it('serves the icons and PNGs for a year under hashed paths, and the manifest and favicon the pages link', async () => {
    const html = await (await page.request.get(url('/console'))).text();
    const manifestPath = /<link rel="manifest" href="([^"]+)"/.exec(html)![1]!;
    const manifest = await page.request.get(url(manifestPath));
    expect(manifest.headers()['content-type']).toBe('application/manifest+json');
    const body = (await manifest.json()) as { start_url: string; icons: { src: string; type: string }[] };
    expect(body.start_url).toBe('/console');
    for (const icon of body.icons) {
      const res = await page.request.get(url(icon.src));
      expect(res.status(), icon.src).toBe(200);
      expect(res.headers()['content-type']).toBe(icon.type);
    }
    const png = body.icons.find((i) => i.type === 'image/png')!;
    expect((await page.request.get(url(png.src))).headers()['cache-control']).toBe('public, max-age=31536000, immutable');
    const css = await (await page.request.get(url('/console/assets/console.css'))).text();
    const iconPath = /url\("(\/console\/assets\/icons\/inbox-[^"]+\.svg)"\)/.exec(css)![1]!;
    const icon = await page.request.get(url(iconPath));
    expect(icon.headers()['content-type']).toBe('image/svg+xml');
    expect(icon.headers()['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(await icon.text()).toContain('lucide-inbox');
    // The nav shows an icon for each screen: the mask is drawn.
    const mask = await page.evaluate("getComputedStyle(document.querySelector('nav.console .icon-inbox')).maskImage");
    expect(String(mask)).toContain('/console/assets/icons/inbox-');
  });
});

import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant, queue } from '../helpers/actions.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * Grant conditions from the console, in a real browser (docs/owners/grants.md
 * "Conditions"): a control for each argument the function's schema has (a range, a choice list,
 * a length), weekly windows with a time zone, a budget; the conditions in words on the agent's
 * grants and on the overview with a budget's use; a refused form that keeps what was typed and
 * shows the issue at its field; axe-core clean at desktop and phone width.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const VIEWPORTS = { desktop: { width: 1280, height: 900 }, phone: { width: 390, height: 844 } } as const;
const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;
const owner = () => signDevelopmentSession(server.config, 'carla');
const url = (pathname: string) => `${server.issuer}${pathname}`;

const heaterManifest = {
  capabilities: [
    {
      name: 'set_heating',
      kind: 'control',
      description: 'Target temperature and mode.',
      arguments: {
        type: 'object',
        properties: {
          level: { type: 'integer', minimum: 0, maximum: 100, description: 'Heating level.' },
          mode: { type: 'string', enum: ['eco', 'comfort', 'boost'] },
          note: { type: 'string', maxLength: 80 },
          quiet: { type: 'boolean' },
        },
        required: ['level'],
        additionalProperties: false,
      },
    },
    { name: 'ping', kind: 'control', arguments: { type: 'object', properties: {}, additionalProperties: false } },
  ],
};

let browser: Browser;
let context: BrowserContext;
let page: Page;
let heater: AttachedDevice;
let agent: Agent;
let heatingGrant: string;
let pingGrant: string;

const grantsOf = async () => (await api.get(`/v1/grants?principal=${encodeURIComponent(agent.principal)}`, { token: await owner() })).body.data;
const conditionsOf = async (grantId: string) => (await grantsOf()).find((g: { id: string }) => g.id === grantId).conditions;

beforeAll(async () => {
  const token = await owner();
  heater = await attachDevice(api, token, { name: 'Hall heater', manifest: heaterManifest });
  agent = await createAgent(api, token, { name: 'Warmth bot', access: 'act', principal: 'agent:warmth-bot' });
  heatingGrant = (await grant(api, token, agent.principal, heater.id, ['set_heating']))[0]!.id;
  pingGrant = (await grant(api, token, agent.principal, heater.id, ['ping']))[0]!.id;
  browser = await chromium.launch({ executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_ARGS] });
  context = await browser.newContext({ viewport: VIEWPORTS.desktop, bypassCSP: true });
  page = await context.newPage();
  await page.goto(url('/console/sign-in'));
  await page.fill('#sub', 'carla');
  await Promise.all([page.waitForURL((u) => u.pathname === '/console'), page.click('#development-sign-in')]);
}, 60_000);

afterAll(async () => {
  await browser?.close();
});

async function openConditions(grantId: string, from = `/console/grants?principal=${encodeURIComponent('agent:warmth-bot')}`) {
  await page.goto(url(from));
  await Promise.all([page.waitForURL((u) => u.pathname === '/console/grants/conditions'), page.click(`a[data-conditions-link="${grantId}"]`)]);
}

describe('editing a grant’s conditions', () => {
  it('offers a control that fits each argument of the schema', async () => {
    await openConditions(heatingGrant);
    const level = page.locator('fieldset[data-argument="level"]');
    expect(await level.locator('input[name="arg:level:minimum"]').getAttribute('type')).toBe('number');
    expect(await level.locator('input[name="arg:level:minimum"]').getAttribute('min')).toBe('0');
    expect(await level.locator('input[name="arg:level:maximum"]').getAttribute('max')).toBe('100');
    expect(await level.locator('input[name="arg:level:maximum"]').getAttribute('step')).toBe('1');
    const modes = await page.locator('fieldset[data-argument="mode"] input[type="checkbox"]').evaluateAll((boxes) => boxes.map((b) => b.getAttribute('value')));
    expect(modes).toEqual(['"eco"', '"comfort"', '"boost"']);
    expect(await page.locator('fieldset[data-argument="mode"] input[name="arg:mode:maxLength"]').count()).toBe(0);
    expect(await page.locator('fieldset[data-argument="note"] input[name="arg:note:maxLength"]').getAttribute('max')).toBe('80');
    expect(await page.locator('fieldset[data-argument="quiet"] input[type="checkbox"]').count()).toBe(2);
    expect(await page.locator('#timeZone option[value="Europe/Berlin"]').count()).toBe(1);
    expect(await page.locator('#timeZone').inputValue()).toBe('UTC');
  });

  it('saves bounds, a schedule and a budget, and shows them in words', async () => {
    await openConditions(heatingGrant);
    await page.fill('input[name="arg:level:minimum"]', '10');
    await page.fill('input[name="arg:level:maximum"]', '60');
    await page.uncheck('fieldset[data-argument="mode"] input[value=\'"boost"\']');
    await page.fill('input[name="arg:note:maxLength"]', '40');
    await page.selectOption('#timeZone', 'Europe/Berlin');
    for (const day of ['mon', 'tue', 'wed', 'thu', 'fri']) await page.check(`fieldset[data-window="0"] input[data-day="${day}"]`);
    await page.fill('#w0-from', '07:00');
    await page.fill('#w0-to', '19:00');
    await page.fill('#budgetMax', '10');
    await page.selectOption('#budgetPer', '3600');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'updated'), page.click('#save-conditions')]);

    expect(await conditionsOf(heatingGrant)).toEqual({
      arguments: { level: { minimum: 10, maximum: 60 }, mode: { enum: ['eco', 'comfort'] }, note: { maxLength: 40 } },
      schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['mon', 'tue', 'wed', 'thu', 'fri'], from: '07:00', to: '19:00' }] },
      budget: { max: 10, perSeconds: 3600 },
    });
    const words = await page.locator(`[data-conditions="${heatingGrant}"] li`).allTextContents();
    expect(words).toEqual([
      'level 10 to 60',
      'mode one of eco, comfort',
      'note at most 40 characters',
      'only Mon–Fri 07:00–19:00 Europe/Berlin',
      'at most 10 calls per hour · 0 of 10 this hour',
    ]);

    // Opened again, the form shows what is set.
    await openConditions(heatingGrant);
    expect(await page.inputValue('input[name="arg:level:minimum"]')).toBe('10');
    expect(await page.isChecked('fieldset[data-argument="mode"] input[value=\'"boost"\']')).toBe(false);
    expect(await page.isChecked('fieldset[data-argument="mode"] input[value=\'"eco"\']')).toBe(true);
    expect(await page.inputValue('#timeZone')).toBe('Europe/Berlin');
    expect(await page.isChecked('fieldset[data-window="0"] input[data-day="fri"]')).toBe(true);
    expect(await page.isChecked('fieldset[data-window="0"] input[data-day="sat"]')).toBe(false);
    expect(await page.inputValue('#w0-to')).toBe('19:00');
    expect(await page.inputValue('#budgetMax')).toBe('10');
  });

  it('keeps what was typed when the service refuses it, and shows the issue at the field', async () => {
    await openConditions(heatingGrant);
    await page.fill('input[name="arg:level:minimum"]', '70');
    await page.fill('input[name="arg:level:maximum"]', '60');
    await page.fill('#budgetMax', '12');
    const [answer] = await Promise.all([page.waitForResponse((res) => res.url().endsWith('/console/grants/conditions')), page.click('#save-conditions')]);
    expect(answer.status()).toBe(400);
    expect(await page.textContent('#error')).toContain('conditions.arguments.level');
    expect(await page.textContent('#arg-level-issues')).toContain('minimum is above maximum');
    expect(await page.getAttribute('input[name="arg:level:minimum"]', 'aria-invalid')).toBe('true');
    expect(await page.getAttribute('input[name="arg:level:minimum"]', 'aria-describedby')).toBe('arg-level-issues');
    // What was typed, kept: the bounds, the untouched choice, the budget.
    expect(await page.inputValue('input[name="arg:level:minimum"]')).toBe('70');
    expect(await page.inputValue('input[name="arg:level:maximum"]')).toBe('60');
    expect(await page.inputValue('#budgetMax')).toBe('12');
    expect(await page.isChecked('fieldset[data-argument="mode"] input[value=\'"boost"\']')).toBe(false);
    expect(await page.inputValue('#timeZone')).toBe('Europe/Berlin');
    for (const [name, size] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `refused form at ${name} width`).toEqual([]);
    }
    await page.setViewportSize(VIEWPORTS.desktop);
    // Nothing changed.
    expect((await conditionsOf(heatingGrant)).budget).toEqual({ max: 10, perSeconds: 3600 });
  });

  it('shows a budget’s use on the overview, and a budget alone on a function without arguments', async () => {
    await openConditions(pingGrant, '/console/grants');
    expect(await page.textContent('#arguments-heading + p')).toContain('takes no arguments');
    await page.fill('#budgetMax', '10');
    await page.selectOption('#budgetPer', '3600');
    await Promise.all([page.waitForURL((u) => u.pathname === '/console/grants' && u.searchParams.get('done') === 'updated'), page.click('#save-conditions')]);
    for (let i = 0; i < 7; i++) await queue(api, agent.token, heater.id, { capability: 'ping', arguments: {} });
    // The REST listing carries the same use.
    expect((await grantsOf()).find((g: { id: string }) => g.id === pingGrant).budgetUse).toEqual({ used: 7, retryAt: expect.any(Number) });
    await page.reload();
    const row = page.locator(`#grants-overview tr[data-grant-id="${pingGrant}"]`);
    expect(await row.locator('[data-field="budget-use"]').textContent()).toBe('7 of 10 this hour');
    expect(await row.locator('[data-field="conditions"]').textContent()).toContain('at most 10 calls per hour');
    for (const [name, size] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `overview at ${name} width`).toEqual([]);
    }
    await page.setViewportSize(VIEWPORTS.desktop);
  });

  it('is axe clean at desktop and phone width, and removes every condition', async () => {
    await openConditions(heatingGrant);
    for (const [name, size] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `conditions page at ${name} width`).toEqual([]);
    }
    await page.setViewportSize(VIEWPORTS.desktop);
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'updated'), page.click('#clear-conditions')]);
    expect(await conditionsOf(heatingGrant)).toBeNull();
    expect(await page.textContent(`tr[data-function="set_heating"] [data-field="conditions"]`)).toContain('no conditions');
  });
});

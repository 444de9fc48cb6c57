import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant, hubManifest, queue } from '../helpers/actions.js';
import { axeViolations, CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * Grant conditions from the console, in a real browser (docs/owners/grants.md
 * "Conditions"): a control for each argument the function's schema has (a range, a choice list,
 * a length), weekly windows with a time zone, a budget; the conditions in words on the agent's
 * grants and on the overview with a budget's use; a refused form that keeps what was typed and
 * shows the issue at its field; axe-core clean at desktop and phone width. The same pieces sit in
 * the forms that create grants (an agent's grants of a device, a gateway grant).
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

describe('setting conditions where a grant is created', () => {
  const agentPage = `/console/grants?principal=${encodeURIComponent('agent:warmth-bot')}`;

  it('grants one function with bounds, a schedule and a budget from the agent’s grants', async () => {
    const porch = await attachDevice(api, await owner(), { name: 'Porch heater', manifest: heaterManifest });
    await page.goto(url(agentPage));
    const scope = `#grant-${porch.id}-c-`;
    const form = page.locator(`form#grant-${porch.id}`);
    expect(await form.locator('details.new-conditions').getAttribute('open')).toBeNull();
    await form.locator('details.new-conditions summary').click();
    // Bounds are offered for each function with arguments; ping has none.
    expect(await form.locator('[data-bounds-for]').evaluateAll((sets) => sets.map((f) => f.getAttribute('data-bounds-for')))).toEqual(['set_heating']);
    await page.check(`#grant-${porch.id}-set_heating`);
    await page.fill(`${scope}set_heating-arg-level-minimum`, '15');
    await page.fill(`${scope}set_heating-arg-level-maximum`, '60');
    await form.locator(`[data-bounds-for="set_heating"] fieldset[data-argument="mode"] input[value='"boost"']`).uncheck();
    await page.selectOption(`${scope}timeZone`, 'Europe/Berlin');
    for (const day of ['sat', 'sun']) await form.locator(`fieldset[data-window="0"] input[data-day="${day}"]`).check();
    await page.fill(`${scope}w0-from`, '09:00');
    await page.fill(`${scope}w0-to`, '21:00');
    await page.fill(`${scope}budgetMax`, '4');
    await page.selectOption(`${scope}budgetPer`, '86400');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'granted'), form.locator('button.primary').click()]);

    const created = (await grantsOf()).find((g: { deviceId: string; capability: string }) => g.deviceId === porch.id && g.capability === 'set_heating');
    expect(created.conditions).toEqual({
      arguments: { level: { minimum: 15, maximum: 60 }, mode: { enum: ['eco', 'comfort'] } },
      schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['sat', 'sun'], from: '09:00', to: '21:00' }] },
      budget: { max: 4, perSeconds: 86400 },
    });
    expect(await page.locator(`[data-conditions="${created.id}"] li`).allTextContents()).toEqual([
      'level 15 to 60',
      'mode one of eco, comfort',
      'only Sat, Sun 09:00–21:00 Europe/Berlin',
      'at most 4 calls per day · 0 of 4 this day',
    ]);
  });

  it('keeps what was typed when the bounds name several functions, with the issue beside them, axe clean', async () => {
    const shed = await attachDevice(api, await owner(), { name: 'Shed heater', manifest: heaterManifest });
    await page.goto(url(agentPage));
    const scope = `#grant-${shed.id}-c-`;
    const form = page.locator(`form#grant-${shed.id}`);
    await form.locator('details.new-conditions summary').click();
    await page.check(`#grant-${shed.id}-set_heating`);
    await page.check(`#grant-${shed.id}-ping`);
    await page.fill(`${scope}set_heating-arg-level-maximum`, '50');
    await page.fill(`${scope}budgetMax`, '3');
    const [answer] = await Promise.all([page.waitForResponse((res) => res.url().endsWith('/console/grants')), form.locator('button.primary').click()]);
    expect(answer.status()).toBe(400);
    expect(await page.textContent(`${scope}arguments-issues`)).toContain('exactly one function');
    // What was sent is kept: the open conditions, both functions checked, the bound and the budget.
    expect(await form.locator('details.new-conditions').getAttribute('open')).not.toBeNull();
    expect(await page.isChecked(`#grant-${shed.id}-set_heating`)).toBe(true);
    expect(await page.isChecked(`#grant-${shed.id}-ping`)).toBe(true);
    expect(await page.inputValue(`${scope}set_heating-arg-level-maximum`)).toBe('50');
    expect(await page.inputValue(`${scope}budgetMax`)).toBe('3');
    expect((await grantsOf()).filter((g: { deviceId: string }) => g.deviceId === shed.id)).toEqual([]);
    for (const [name, size] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `refused grant form at ${name} width`).toEqual([]);
    }
    await page.setViewportSize(VIEWPORTS.desktop);
    // Granting one of them alone goes through with the bound.
    await page.uncheck(`#grant-${shed.id}-ping`);
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'granted'), form.locator('button.primary').click()]);
    const granted = (await grantsOf()).filter((g: { deviceId: string }) => g.deviceId === shed.id);
    expect(granted.map((g: { capability: string; conditions: unknown }) => [g.capability, g.conditions])).toEqual([
      ['set_heating', { arguments: { level: { maximum: 50 } }, budget: { max: 3, perSeconds: 3600 } }],
    ]);
  });

  it('gives a gateway grant a schedule and a budget, axe clean', async () => {
    const token = await owner();
    const hub = await attachDevice(api, token, { name: 'Attic hub', kind: 'gateway', manifest: hubManifest });
    const helper = await createAgent(api, token, { name: 'Attic bot', access: 'act', principal: 'agent:attic-bot' });
    await page.goto(url('/console/gateways'));
    await page.selectOption('#gateway', hub.id);
    await page.selectOption('#gateway-agent', helper.principal);
    await page.check('input[name="mode"][value="control"]');
    await page.click('#gateway-c-conditions summary');
    expect(await page.locator('#gateway-c-conditions [data-bounds-for]').count()).toBe(0);
    for (const [name, size] of Object.entries(VIEWPORTS)) {
      await page.setViewportSize(size);
      expect(await axeViolations(page), `gateway form at ${name} width`).toEqual([]);
    }
    await page.setViewportSize(VIEWPORTS.desktop);
    await page.check('#gateway-c-conditions fieldset[data-window="0"] input[data-day="mon"]');
    await page.fill('#gateway-c-w0-from', '22:00');
    await page.fill('#gateway-c-w0-to', '06:00');
    await page.fill('#gateway-c-budgetMax', '20');
    await Promise.all([page.waitForURL((u) => u.searchParams.get('done') === 'granted'), page.click('#grant-gateway')]);
    const written = (await api.get(`/v1/grants?principal=${encodeURIComponent(helper.principal)}`, { token })).body.data as { conditions: unknown }[];
    expect(written.length).toBeGreaterThan(0);
    for (const g of written) {
      expect(g.conditions).toEqual({
        schedule: { timeZone: 'UTC', windows: [{ days: ['mon'], from: '22:00', to: '06:00' }] },
        budget: { max: 20, perSeconds: 3600 },
      });
    }
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Credential } from '../../src/domain/context.js';
import { DomainError } from '../../src/domain/errors.js';
import { operations as ops } from '../../src/domain/registry.js';
import { lampManifest } from '../helpers/fixtures.js';
import { openOperationsContext, type OperationsContext } from '../helpers/operations.js';

/**
 * Which grant conditions fit (docs/owners/grants.md "Conditions"), where HTTP is not the point:
 * `grants.create` called through `invoke` as every surface calls it (test/helpers/operations.ts).
 * test/rest/grant-conditions.test.ts keeps the refusal on the wire (400 validation_failed with
 * `issues` at the field) and the rules that need a running service.
 */
let w: OperationsContext;
let owner: Credential;

beforeAll(async () => {
  w = await openOperationsContext();
  owner = await w.owner('condition-rules-owner');
});
afterAll(() => w?.close());

/** A lamp attached in the owner's workspace, as a setup token attaches one. */
async function lamp(): Promise<string> {
  const setup = await w.invoke(ops.createSetupToken, owner, { name: 'setup' });
  const attached = await w.invoke(ops.attachDevice, await w.credentialOf(setup.token), { name: 'Lamp' });
  await w.invoke(ops.publishManifest, await w.credentialOf(attached.token), { deviceId: attached.device.id, ...lampManifest });
  return attached.device.id;
}

/** `grants.create`'s answer: the grants, or the DomainError it was refused with. */
async function create(input: Record<string, unknown>): Promise<{ ok: true } | { ok: false; error: DomainError }> {
  try {
    await w.invoke(ops.createGrants, owner, input);
    return { ok: true };
  } catch (error) {
    if (error instanceof DomainError) return { ok: false, error };
    throw error;
  }
}

function issuesOf(answer: Awaited<ReturnType<typeof create>>): string[] {
  if (answer.ok) throw new Error('the conditions were accepted: expected validation_failed');
  expect(answer.error.code).toBe('validation_failed');
  return (answer.error.details.issues ?? []).map((issue) => issue.path);
}

describe('conditions that do not fit are validation_failed at the field', () => {
  const cases: [string, unknown, string][] = [
    ['an unknown argument', { arguments: { colour: { enum: ['red'] } } }, 'conditions.arguments.colour'],
    ['a maximum above the schema', { arguments: { level: { maximum: 101 } } }, 'conditions.arguments.level'],
    ['a minimum above the maximum', { arguments: { level: { minimum: 50, maximum: 40 } } }, 'conditions.arguments.level'],
    ['maxLength on an integer', { arguments: { level: { maxLength: 3 } } }, 'conditions.arguments.level'],
    ['an enum value of another type', { arguments: { level: { enum: ['high'] } } }, 'conditions.arguments.level'],
    [
      'a zone that does not exist',
      { schedule: { timeZone: 'Mars/Olympus', windows: [{ days: ['mon'], from: '07:00', to: '08:00' }] } },
      'conditions.schedule.timeZone',
    ],
    ['a time past 23:59', { schedule: { windows: [{ days: ['mon'], from: '07:00', to: '24:00' }] } }, 'conditions.schedule.windows.0.to'],
    ['no window', { schedule: { windows: [] } }, 'conditions.schedule.windows'],
    ['a day that is not one', { schedule: { windows: [{ days: ['monday'], from: '07:00', to: '08:00' }] } }, 'conditions.schedule.windows.0.days.0'],
    ['a budget window under a minute', { budget: { max: 10, perSeconds: 59 } }, 'conditions.budget.perSeconds'],
    ['a budget of 0', { budget: { max: 0, perSeconds: 60 } }, 'conditions.budget.max'],
    ['an unknown key', { limits: {} }, 'conditions.limits'],
  ];
  for (const [what, conditions, path] of cases) {
    it(`refuses ${what}`, async () => {
      const answer = await create({ principal: 'agent:v', deviceId: await lamp(), capabilities: ['set_brightness'], conditions });
      expect(issuesOf(answer)).toContain(path);
    });
  }

  it('refuses argument bounds on a request naming several functions', async () => {
    const answer = await create({
      principal: 'agent:v',
      deviceId: await lamp(),
      capabilities: ['set_brightness', 'set_power'],
      conditions: { arguments: { level: { maximum: 5 } } },
    });
    expect(issuesOf(answer)[0]).toBe('conditions.arguments');
  });

  it('accepts a bound equal to the schema and a schedule and budget on several functions', async () => {
    const deviceId = await lamp();
    const equal = await create({
      principal: 'agent:v',
      deviceId,
      capabilities: ['set_brightness'],
      conditions: { arguments: { level: { minimum: 0, maximum: 100 } } },
    });
    expect(equal.ok, equal.ok ? '' : equal.error.message).toBe(true);
    const several = await create({
      principal: 'agent:v',
      deviceId,
      capabilities: ['set_brightness', 'set_power'],
      conditions: { budget: { max: 3, perSeconds: 60 } },
    });
    expect(several.ok, several.ok ? '' : several.error.message).toBe(true);
  });
});

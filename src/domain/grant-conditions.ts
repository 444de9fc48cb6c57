/**
 * Grant conditions (docs/owners/grants.md "Conditions"): how far (argument bounds), when (a
 * weekly schedule read in an IANA time zone) and how often (a sliding-window budget) a grant
 * allows a function. Pure rules only: the shapes, their validation against a function's argument
 * schema, the schedule maths, the narrowed JSON Schema an agent sees, and the words every
 * surface (REST, MCP, the console) uses for them.
 */
import { z } from 'zod';
import { DomainError, type ErrorIssue } from './errors.js';

import { clockWords, DAYS, insideSchedule, localWords, nextWindowAt, periodWords, scheduleWords } from './grant-schedules.js';

export { DAYS, insideSchedule, localTime, localWords, nextWindowAt, periodWords, scheduleWords, windowEndAt, type Day } from './grant-schedules.js';

const clockTime = z
  .string()
  .regex(/^([01]\d|2[0-3]):[0-5]\d$/, 'must be HH:MM, 00:00 to 23:59')
  .describe("A wall-clock time in the schedule's zone, `HH:MM` (00:00 to 23:59).");

/** Whether `Intl.DateTimeFormat` knows the zone name (an IANA name such as `Europe/Berlin`, or `UTC`). */
export function isTimeZone(name: string): boolean {
  try {
    new Intl.DateTimeFormat('en-US', { timeZone: name });
    return true;
  } catch {
    return false;
  }
}

export const argumentBound = z
  .strictObject({
    minimum: z.number().optional().describe('Numbers and integers: the least value allowed.'),
    maximum: z.number().optional().describe('Numbers and integers: the greatest value allowed.'),
    enum: z
      .array(z.union([z.string(), z.number(), z.boolean()]))
      .min(1)
      .max(100)
      .optional()
      .describe("The values allowed (a subset of the schema's own `enum` when it has one)."),
    maxLength: z.number().int().min(0).optional().describe('Strings: the most characters allowed.'),
  })
  .describe("A bound on one top-level argument; it narrows what the function's schema already allows.");

export const scheduleWindow = z.strictObject({
  days: z.array(z.enum(DAYS)).min(1).max(7).describe('The days a window starts on (`mon` … `sun`).'),
  from: clockTime.describe('Start, included (`HH:MM`).'),
  to: clockTime.describe('End, excluded (`HH:MM`); earlier than `from` runs past midnight into the next day; equal to `from` is the whole day.'),
});

export const schedule = z
  .strictObject({
    timeZone: z
      .string()
      .max(64)
      .default('UTC')
      .refine(isTimeZone, 'not a time zone name this service knows (an IANA name such as "Europe/Berlin")')
      .describe('The IANA time zone the windows are read in (default `UTC`).'),
    windows: z.array(scheduleWindow).min(1).max(14).describe('1 to 14 weekly windows; an action is allowed only inside one.'),
  })
  .describe('When actions are allowed: weekly windows read in a time zone.');

export const budget = z
  .strictObject({
    max: z.number().int().min(1).max(100_000).describe('At most this many actions (1 to 100000) …'),
    perSeconds: z.number().int().min(60).max(2_592_000).describe('… in any window of this many seconds (60 to 2592000), sliding.'),
  })
  .describe("How often: at most `max` actions for the grant's principal, device and function in any `perSeconds` seconds.");

const conditionsObject = z.strictObject({
  arguments: z
    .record(z.string().min(1).max(128), argumentBound)
    .optional()
    .describe('Bounds per top-level argument; only when the request names exactly one function.'),
  schedule: schedule.optional(),
  budget: budget.optional(),
});

export type ArgumentBound = z.output<typeof argumentBound>;
export type Schedule = z.output<typeof schedule>;
export type Budget = z.output<typeof budget>;
export interface GrantConditions {
  arguments?: Record<string, ArgumentBound>;
  schedule?: Schedule;
  budget?: Budget;
}

/** The conditions as a request gives them: `null`, absent keys, or `{}` (which means `null`). */
export const grantConditionsInput = conditionsObject
  .nullable()
  .describe('How far, when and how often the grant allows its functions (docs/owners/grants.md "Conditions"); null for no conditions.');

/** The conditions on a grant record: null, or an object with at least one of the three keys. */
export const grantConditions = z
  .object({
    arguments: z.record(z.string(), argumentBound).optional(),
    schedule: z.object({ timeZone: z.string(), windows: z.array(scheduleWindow) }).optional(),
    budget: budget.optional(),
  })
  .nullable()
  .describe('How far (argument bounds), when (a schedule) and how often (a budget) the grant allows its function; null for none.');

/** `{}` and an object of absent keys are `null`: no conditions. */
export function normalizeConditions(input: z.output<typeof grantConditionsInput> | undefined): GrantConditions | null {
  if (!input) return null;
  const out: GrantConditions = {};
  if (input.arguments !== undefined && Object.keys(input.arguments).length > 0) out.arguments = input.arguments;
  if (input.schedule !== undefined) out.schedule = input.schedule;
  if (input.budget !== undefined) out.budget = input.budget;
  return Object.keys(out).length === 0 ? null : out;
}

export function parseStoredConditions(text: string | null): GrantConditions | null {
  return text === null ? null : (JSON.parse(text) as GrantConditions);
}

export function storedConditions(conditions: GrantConditions | null): string | null {
  return conditions === null ? null : JSON.stringify(conditions);
}

type JsonSchema = Record<string, unknown>;

function typesOf(schema: JsonSchema): string[] {
  const type = schema.type;
  if (typeof type === 'string') return [type];
  if (Array.isArray(type)) return type.filter((t): t is string => typeof t === 'string');
  if (Array.isArray(schema.enum)) {
    return [...new Set((schema.enum as unknown[]).map((v) => (typeof v === 'number' ? 'number' : typeof v)))];
  }
  return [];
}

const isNumeric = (types: string[]) => types.includes('number') || types.includes('integer');

/**
 * Checks conditions against the functions a grant request names (docs/owners/grants.md
 * "Conditions"): argument bounds only for exactly one function and never on a gateway
 * grant; each bound names a top-level property of its schema, fits its type and narrows what the
 * schema allows. Issue paths start with `conditions.`.
 */
export function conditionIssues(
  conditions: GrantConditions | null,
  functions: readonly { name: string; argumentSchema: string }[],
  options: { gateway?: boolean } = {},
): ErrorIssue[] {
  if (!conditions?.arguments) return [];
  if (options.gateway) return [{ path: 'conditions.arguments', message: 'a gateway grant accepts only schedule and budget' }];
  if (functions.length !== 1) return [{ path: 'conditions.arguments', message: 'argument bounds need a request that names exactly one function' }];
  const schema = JSON.parse(functions[0]!.argumentSchema) as JsonSchema;
  const properties = (schema.properties ?? {}) as Record<string, JsonSchema>;
  const issues: ErrorIssue[] = [];
  for (const [name, bound] of Object.entries(conditions.arguments)) {
    const path = `conditions.arguments.${name}`;
    const property = Object.prototype.hasOwnProperty.call(properties, name) ? properties[name] : undefined;
    if (!property || typeof property !== 'object') {
      issues.push({ path, message: `"${functions[0]!.name}" has no top-level argument "${name}"` });
      continue;
    }
    const why = boundIssue(property, bound);
    if (why) issues.push({ path, message: why });
  }
  return issues;
}

function boundIssue(property: JsonSchema, bound: ArgumentBound): string | undefined {
  const types = typesOf(property);
  if (Object.keys(bound).length === 0) return 'give minimum, maximum, enum or maxLength';
  if ((bound.minimum !== undefined || bound.maximum !== undefined) && !isNumeric(types)) return 'minimum and maximum fit only a number or integer argument';
  if (bound.maxLength !== undefined && !types.includes('string')) return 'maxLength fits only a string argument';
  if (bound.minimum !== undefined && bound.maximum !== undefined && bound.minimum > bound.maximum) return 'minimum is above maximum';
  if (bound.minimum !== undefined) {
    if (typeof property.maximum === 'number' && bound.minimum > property.maximum)
      return `minimum ${bound.minimum} is above the schema's maximum ${property.maximum}`;
    if (typeof property.minimum === 'number' && bound.minimum < property.minimum)
      return `minimum ${bound.minimum} is below the schema's minimum ${property.minimum}`;
  }
  if (bound.maximum !== undefined) {
    if (typeof property.minimum === 'number' && bound.maximum < property.minimum)
      return `maximum ${bound.maximum} is below the schema's minimum ${property.minimum}`;
    if (typeof property.maximum === 'number' && bound.maximum > property.maximum)
      return `maximum ${bound.maximum} is above the schema's maximum ${property.maximum}`;
  }
  if (bound.maxLength !== undefined && typeof property.maxLength === 'number' && bound.maxLength > property.maxLength) {
    return `maxLength ${bound.maxLength} is above the schema's maxLength ${property.maxLength}`;
  }
  if (bound.enum !== undefined) {
    const allowedTypes = ['string', 'number', 'integer', 'boolean'];
    if (!types.some((t) => allowedTypes.includes(t))) return 'enum fits only a string, number, integer or boolean argument';
    const own = Array.isArray(property.enum) ? (property.enum as unknown[]) : undefined;
    for (const value of bound.enum) {
      if (own && !own.some((v) => v === value)) return `${JSON.stringify(value)} is not one of the schema's own values`;
      const kind = typeof value;
      const fits =
        (kind === 'string' && types.includes('string')) ||
        (kind === 'boolean' && types.includes('boolean')) ||
        (kind === 'number' && (types.includes('number') || (types.includes('integer') && Number.isInteger(value))));
      if (!fits) return `${JSON.stringify(value)} does not fit the argument's type`;
    }
  }
  return undefined;
}

/** The bounds as `details.allowed` shows them: only the keys the grant set. */
function allowedOf(bound: ArgumentBound): ArgumentBound {
  return Object.fromEntries(Object.entries(bound).filter(([, v]) => v !== undefined)) as ArgumentBound;
}

/** Arguments the grant's bounds refuse: issues at `arguments.<name>` and the bounds of each refused one. A bounded argument left out is allowed. */
export function argumentRefusal(
  bounds: Record<string, ArgumentBound> | undefined,
  args: Record<string, unknown>,
): { issues: ErrorIssue[]; allowed: Record<string, ArgumentBound> } | undefined {
  if (!bounds) return undefined;
  const issues: ErrorIssue[] = [];
  const allowed: Record<string, ArgumentBound> = {};
  for (const [name, bound] of Object.entries(bounds)) {
    if (!Object.prototype.hasOwnProperty.call(args, name)) continue;
    const value = args[name];
    if (!valueAllowed(value, bound)) {
      issues.push({ path: `arguments.${name}`, message: `not allowed by the grant: ${boundWords(name, bound)}` });
      allowed[name] = allowedOf(bound);
    }
  }
  return issues.length > 0 ? { issues, allowed } : undefined;
}

function valueAllowed(value: unknown, bound: ArgumentBound): boolean {
  if (bound.enum !== undefined && !bound.enum.some((v) => v === value)) return false;
  if (typeof value === 'number') {
    if (bound.minimum !== undefined && value < bound.minimum) return false;
    if (bound.maximum !== undefined && value > bound.maximum) return false;
  }
  if (typeof value === 'string' && bound.maxLength !== undefined && [...value].length > bound.maxLength) return false;
  return true;
}

/** One bound in words: "level 10 to 60", "mode one of eco, comfort", "note at most 40 characters". */
export function boundWords(name: string, bound: ArgumentBound): string {
  const parts: string[] = [];
  if (bound.minimum !== undefined && bound.maximum !== undefined) parts.push(`${bound.minimum} to ${bound.maximum}`);
  else if (bound.minimum !== undefined) parts.push(`at least ${bound.minimum}`);
  else if (bound.maximum !== undefined) parts.push(`at most ${bound.maximum}`);
  if (bound.enum !== undefined) parts.push(`one of ${bound.enum.map((v) => (typeof v === 'string' ? v : JSON.stringify(v))).join(', ')}`);
  if (bound.maxLength !== undefined) parts.push(`at most ${bound.maxLength} characters`);
  return `${name} ${parts.join(', ')}`;
}

/**
 * The function's argument schema with the grant's bounds applied (the intersection): what an
 * MCP device tool lists as its `inputSchema`. The schema given is not changed.
 */
export function narrowSchema(schema: JsonSchema, bounds: Record<string, ArgumentBound> | undefined): JsonSchema {
  if (!bounds || typeof schema.properties !== 'object' || schema.properties === null) return schema;
  const properties = { ...(schema.properties as Record<string, JsonSchema>) };
  for (const [name, bound] of Object.entries(bounds)) {
    const property = properties[name];
    if (!property || typeof property !== 'object') continue;
    const narrowed: JsonSchema = { ...property };
    if (bound.minimum !== undefined) narrowed.minimum = typeof property.minimum === 'number' ? Math.max(property.minimum, bound.minimum) : bound.minimum;
    if (bound.maximum !== undefined) narrowed.maximum = typeof property.maximum === 'number' ? Math.min(property.maximum, bound.maximum) : bound.maximum;
    if (bound.maxLength !== undefined) {
      narrowed.maxLength = typeof property.maxLength === 'number' ? Math.min(property.maxLength, bound.maxLength) : bound.maxLength;
    }
    if (bound.enum !== undefined)
      narrowed.enum = Array.isArray(property.enum) ? (property.enum as unknown[]).filter((v) => bound.enum!.some((b) => b === v)) : [...bound.enum];
    properties[name] = narrowed;
  }
  return { ...schema, properties };
}

export function budgetWords(value: Budget): string {
  return `at most ${value.max} ${value.max === 1 ? 'call' : 'calls'} per ${periodWords(value.perSeconds).replace(/^an? /, '')}`;
}

/** The conditions in one short sentence (a device tool's description), or undefined without schedule and budget. */
export function conditionsSentence(conditions: GrantConditions | null): string | undefined {
  const parts: string[] = [];
  if (conditions?.schedule) parts.push(`only ${scheduleWords(conditions.schedule)}`);
  if (conditions?.budget) parts.push(budgetWords(conditions.budget));
  if (parts.length === 0) return undefined;
  return `Allowed ${parts.join(', ')}.`;
}

export interface BudgetUse {
  used: number;
  /** When the oldest counted action leaves the window and one more is allowed (Unix ms). */
  retryAt: number;
}

export const refusalWords = {
  arguments: (allowed: Record<string, ArgumentBound>) =>
    `Not allowed by the grant; allowed: ${Object.entries(allowed)
      .map(([name, bound]) => boundWords(name, bound))
      .join('; ')}.`,
  schedule: (value: Schedule, opensAt: number | null) =>
    opensAt === null
      ? `Outside the grant's schedule (${scheduleWords(value)}).`
      : `Outside the grant's schedule (${scheduleWords(value)}); next window opens ${localWords(opensAt, value.timeZone)} ${value.timeZone}.`,
  budget: (value: Budget, use: BudgetUse, now: number, timeZone: string) =>
    `The grant's budget is used up: ${use.used} of ${value.max} used per ${periodWords(value.perSeconds).replace(/^an? /, '')}; next at ${clockWords(use.retryAt, timeZone, now)} ${timeZone}.`,
};

/** Minutes are the schedule's grain: a window opens on a whole minute. */
const wholeMinute = (at: number) => Math.ceil(at / 60_000) * 60_000;

/**
 * Arguments, then schedule (docs/owners/grants.md "Conditions"): the refusal for an
 * action the conditions do not allow now, or undefined. The budget needs the store: its
 * refusal is `budgetRefusal`.
 */
export function conditionsRefusal(conditions: GrantConditions | null, args: Record<string, unknown>, now: number): DomainError | undefined {
  if (!conditions) return undefined;
  const refused = argumentRefusal(conditions.arguments, args);
  if (refused) {
    return new DomainError('arguments_not_allowed', refusalWords.arguments(refused.allowed), {
      issues: refused.issues,
      conditions: { allowed: refused.allowed },
    });
  }
  if (conditions.schedule && !insideSchedule(conditions.schedule, now)) {
    const opensAt = nextWindowAt(conditions.schedule, wholeMinute(now));
    return new DomainError('outside_schedule', refusalWords.schedule(conditions.schedule, opensAt), {
      conditions: { nextWindowAt: opensAt, timeZone: conditions.schedule.timeZone },
    });
  }
  return undefined;
}

/** Why a waiting or queued action its grant's conditions no longer allow is cancelled, or undefined while they allow it. */
export function conditionsCancelReason(
  conditions: GrantConditions | null,
  args: Record<string, unknown>,
  now: number,
): 'conditions_changed' | 'outside_schedule' | undefined {
  const refused = conditionsRefusal(conditions, args, now);
  if (!refused) return undefined;
  return refused.code === 'outside_schedule' ? 'outside_schedule' : 'conditions_changed';
}

/** The refusal of a request whose grant's budget is used up (`use.used` of `value.max`). */
export function budgetRefusal(value: Budget, use: BudgetUse, now: number, timeZone = 'UTC'): DomainError {
  return new DomainError('grant_budget_exhausted', refusalWords.budget(value, use, now, timeZone), {
    retryAfterSeconds: Math.max(1, Math.ceil((use.retryAt - now) / 1000)),
    conditions: { max: value.max, perSeconds: value.perSeconds, used: use.used, retryAt: use.retryAt },
  });
}

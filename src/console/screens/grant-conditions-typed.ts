import type { GrantConditions } from '../../domain/grant-conditions.js';
import { DAYS } from '../../domain/grant-conditions.js';

/**
 * What a grant conditions form holds, read from the form and turned into the `conditions` the
 * service takes (docs/owners/grants.md "Conditions"); grant-conditions-form.tsx draws it.
 */

/**
 * Where a piece of the form sits: `id` prefixes every element id (unique on the page), `name`
 * every field name (unique in its form). The conditions page uses none.
 */
export interface Scope {
  id: string;
  name: string;
}
export const PAGE: Scope = { id: '', name: '' };

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type Issue = { path: string; message: string };

export interface Property {
  type?: string | string[];
  enum?: Json[];
  minimum?: number;
  maximum?: number;
  maxLength?: number;
  description?: string;
}

/** What the form holds: the grant's conditions, or what the owner typed when the service refused it. */
export interface Typed {
  args: Record<string, { minimum: string; maximum: string; maxLength: string; enum: string[] | undefined }>;
  timeZone: string;
  windows: { days: string[]; from: string; to: string }[];
  budgetMax: string;
  budgetPer: string;
}

export const text = (value: number | undefined) => (value === undefined ? '' : String(value));

export function typedFrom(conditions: GrantConditions | null): Typed {
  const args: Typed['args'] = {};
  for (const [name, bound] of Object.entries(conditions?.arguments ?? {})) {
    args[name] = {
      minimum: text(bound.minimum),
      maximum: text(bound.maximum),
      maxLength: text(bound.maxLength),
      enum: bound.enum?.map((v) => JSON.stringify(v)),
    };
  }
  return {
    args,
    timeZone: conditions?.schedule?.timeZone ?? 'UTC',
    windows: (conditions?.schedule?.windows ?? []).map((w) => ({ days: [...w.days], from: w.from, to: w.to })),
    budgetMax: text(conditions?.budget?.max),
    budgetPer: text(conditions?.budget?.perSeconds ?? 3600),
  };
}

/** The typed conditions of a grant form that is shown afresh: nothing set. */
export const NOTHING_TYPED: Typed = typedFrom(null);

export const MAX_WINDOWS = 14;

/** The argument bounds typed under `prefix` for a function's `properties`. */
export function typedArgsFromForm(form: URLSearchParams, properties: Record<string, Property>, prefix = ''): Typed['args'] {
  const args: Typed['args'] = {};
  for (const name of Object.keys(properties)) {
    const field = `${prefix}arg:${name}`;
    args[name] = {
      minimum: form.get(`${field}:minimum`) ?? '',
      maximum: form.get(`${field}:maximum`) ?? '',
      maxLength: form.get(`${field}:maxLength`) ?? '',
      enum: form.has(`${field}:choices`)
        ? (choicesOf(properties[name]!) ?? []).map((v) => JSON.stringify(v)).filter((v, i) => form.get(`${field}:enum:${i}`) === v)
        : undefined,
    };
  }
  return args;
}

/** Whether the owner typed a bound on any argument (a choice unticked counts). */
export function boundsTyped(args: Typed['args'], properties: Record<string, Property>): boolean {
  return conditionsOf({ args, timeZone: 'UTC', windows: [], budgetMax: '', budgetPer: '3600' }, properties) !== null;
}

export function typedFromForm(form: URLSearchParams, properties: Record<string, Property>, scope: Scope = PAGE): Typed {
  const n = scope.name;
  const windows: Typed['windows'] = [];
  for (let i = 0; i < MAX_WINDOWS && form.has(`${n}w${i}:from`); i++) {
    windows.push({
      days: DAYS.filter((day) => form.get(`${n}w${i}:${day}`) === 'on'),
      from: form.get(`${n}w${i}:from`) ?? '',
      to: form.get(`${n}w${i}:to`) ?? '',
    });
  }
  return {
    args: typedArgsFromForm(form, properties, n),
    timeZone: form.get(`${n}timeZone`) ?? 'UTC',
    windows,
    budgetMax: form.get(`${n}budgetMax`) ?? '',
    budgetPer: form.get(`${n}budgetPer`) ?? '3600',
  };
}

/** A typed number as the service should read it: absent when empty, the text itself when it is not a number (the service says why). */
const numberOf = (raw: string): number | string | undefined => (raw.trim() === '' ? undefined : Number.isFinite(Number(raw)) ? Number(raw) : raw);

function parseJson(raw: string): unknown {
  try {
    return JSON.parse(raw);
  } catch {
    return raw;
  }
}

/** The `conditions` of `grants.update` from what the form holds; `null` when nothing is set. */
export function conditionsOf(typed: Typed, properties: Record<string, Property>): Record<string, unknown> | null {
  const args: Record<string, Record<string, unknown>> = {};
  for (const [name, field] of Object.entries(typed.args)) {
    const bound: Record<string, unknown> = {};
    for (const key of ['minimum', 'maximum', 'maxLength'] as const) {
      const value = numberOf(field[key]);
      if (value !== undefined) bound[key] = value;
    }
    // A choice list with every choice ticked allows what the schema allows: no bound.
    const choices = choicesOf(properties[name] ?? {});
    if (field.enum !== undefined && choices && field.enum.length < choices.length) bound.enum = field.enum.map(parseJson);
    if (Object.keys(bound).length > 0) args[name] = bound;
  }
  const windows = typed.windows.filter((w) => w.days.length > 0 || w.from !== '' || w.to !== '');
  const conditions: Record<string, unknown> = {};
  if (Object.keys(args).length > 0) conditions.arguments = args;
  if (windows.length > 0) conditions.schedule = { timeZone: typed.timeZone, windows };
  const max = numberOf(typed.budgetMax);
  if (max !== undefined) conditions.budget = { max, perSeconds: Number(typed.budgetPer) };
  return Object.keys(conditions).length > 0 ? conditions : null;
}

export const typesOf = (p: Property) => (Array.isArray(p.type) ? p.type : p.type ? [p.type] : []);

/** The values a choice list offers: the schema's own enum, or yes and no for a boolean. */
export function choicesOf(property: Property): Json[] | undefined {
  if (Array.isArray(property.enum) && property.enum.every((v) => ['string', 'number', 'boolean'].includes(typeof v))) return property.enum;
  if (typesOf(property).includes('boolean')) return [true, false];
  return undefined;
}

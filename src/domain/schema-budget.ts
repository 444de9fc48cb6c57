import { RE2JS } from 're2js';
import type { ErrorIssue } from './errors.js';

/**
 * The rules a device's argument schema must keep before it is compiled: it is untrusted input
 * (docs/reference/rules.md "Devices"), and validating a 16 KiB arguments object against it must stay
 * bounded whatever the device wrote. Each number is in the docs/devices/argument-schemas.md "Argument schemas".
 */
export const SCHEMA_BUDGET = {
  /** Subschemas nested in one another (with `$ref`s followed). */
  depth: 32,
  /** Subschemas after expanding every `$ref` where it is used, plus `enum` and `required` entries. */
  nodes: 1000,
  /** `anyOf`/`oneOf`/`allOf`/`not`/`if` inside one another (with `$ref`s followed). */
  combinatorNesting: 4,
  /** Entries of one `enum`. */
  enumEntries: 256,
  /** `pattern`s and `patternProperties` keys after expanding `$ref`s. */
  patterns: 16,
  /** Characters of one pattern. */
  patternLength: 256,
  /** `uniqueItems: true` compares items pairwise, so it needs a `maxItems` of at most this. */
  uniqueItemsMaxItems: 256,
  /** Branches of one `anyOf`/`oneOf`/`allOf`: each is tried on every value the combinator checks. */
  branches: 16,
  /**
   * Values (array items, object properties and names) a 16 KiB arguments object can hold: `[0,0,…]`
   * spends 2 bytes on each. A subschema under `items`, `additionalProperties` and the other
   * per-element keywords runs once per element, so it counts this many times unless `maxItems` or
   * `maxProperties` beside the keyword bounds it lower.
   */
  elements: 8192,
  /**
   * Subschema checks one validation may run: every subschema (plus `enum` and `required`
   * entries, and a `pattern` as 4), `$ref`s expanded, times the values it can apply to. Measured
   * in-process on a cold validator (its first call, the worst case for a device that keeps
   * republishing): 120–330 ns a check, so the worst schemas just inside take 8–30 ms on a 16 KiB
   * value (2–3 ms warm). The flat `anyOf` of 900 branches under `items` was 7.4 million checks
   * and took 1.9 s on 8,000 numbers.
   */
  work: 65_536,
} as const;

export type Dialect = '2020-12' | 'draft-07';

const DIALECTS: Record<string, Dialect> = {
  'https://json-schema.org/draft/2020-12/schema': '2020-12',
  'http://json-schema.org/draft-07/schema': 'draft-07',
  'https://json-schema.org/draft-07/schema': 'draft-07',
};

/** The dialect a schema's `$schema` names (2020-12 when it names none), or undefined for any other. */
export function dialectOf(schema: Record<string, unknown>): Dialect | undefined {
  if (schema.$schema === undefined) return '2020-12';
  return typeof schema.$schema === 'string' ? DIALECTS[schema.$schema.replace(/#$/, '')] : undefined;
}

const ONE_SUBSCHEMA = ['additionalProperties', 'additionalItems', 'contains', 'propertyNames', 'unevaluatedItems', 'unevaluatedProperties', 'contentSchema'];
const COMBINATOR_ONE = ['not', 'if', 'then', 'else'];
const COMBINATOR_LIST = ['allOf', 'anyOf', 'oneOf'];
const SUBSCHEMA_MAPS = ['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas'];
/** `$anchor` and `$dynamicAnchor` names (JSON Schema 2020-12 §8.2.2): a plain name, nothing that reads as a URI. */
const ANCHOR_NAME = /^[A-Za-z_][-A-Za-z0-9._]*$/;

type Json = Record<string, unknown>;
const isObject = (value: unknown): value is Json => typeof value === 'object' && value !== null && !Array.isArray(value);

/** Keywords whose subschema runs once per array item, per object property or per property name. */
const PER_ITEM = ['additionalItems', 'contains', 'unevaluatedItems'];
const PER_PROPERTY = ['additionalProperties', 'patternProperties', 'propertyNames', 'unevaluatedProperties'];

/** The subschemas directly under one schema object, with the path segments that lead to them. */
function children(node: Json): { keys: string[]; schema: unknown; combinator: boolean }[] {
  const out: { keys: string[]; schema: unknown; combinator: boolean }[] = [];
  for (const key of ONE_SUBSCHEMA) if (key in node) out.push({ keys: [key], schema: node[key], combinator: false });
  for (const key of COMBINATOR_ONE) if (key in node) out.push({ keys: [key], schema: node[key], combinator: true });
  for (const key of [...COMBINATOR_LIST, 'prefixItems', 'items']) {
    const value = node[key];
    if (Array.isArray(value)) value.forEach((item, i) => out.push({ keys: [key, String(i)], schema: item, combinator: COMBINATOR_LIST.includes(key) }));
    else if (key === 'items' && value !== undefined) out.push({ keys: [key], schema: value, combinator: false });
  }
  for (const key of [...SUBSCHEMA_MAPS, 'dependencies']) {
    const map = node[key];
    if (!isObject(map)) continue;
    // draft-07 `dependencies` values are a schema or a list of property names; only schemas count.
    for (const [name, value] of Object.entries(map)) if (!Array.isArray(value)) out.push({ keys: [key, name], schema: value, combinator: false });
  }
  return out;
}

/** Whether RE2 can run `pattern`; JSON Schema patterns are ECMA-262, RE2 has no backreferences or lookaround. */
function patternProblem(pattern: unknown): string | undefined {
  if (typeof pattern !== 'string') return undefined; // the meta-schema check reports the type
  if (pattern.length > SCHEMA_BUDGET.patternLength) return `is longer than ${SCHEMA_BUDGET.patternLength} characters`;
  try {
    RE2JS.compile(pattern);
    return undefined;
  } catch (error) {
    return `cannot run on a linear-time (RE2) engine: ${(error as Error).message}`;
  }
}

interface Walk {
  root: Json;
  issues: ErrorIssue[];
  anchors: Map<string, Json>;
  refs: { path: string; ref: string }[];
  /** Every place walked as a subschema, as its path segments in JSON: what a `$ref` may point at. */
  schemaPaths: Set<string>;
}

const join = (path: string[]) => path.join('.');

/** Pass 1: every schema object as written, each keyword's own rule, with the path of the offending keyword. */
function walkLiteral(walk: Walk, node: unknown, path: string[], depth: number, combinators: number): void {
  walk.schemaPaths.add(JSON.stringify(path));
  if (!isObject(node)) return; // booleans are schemas; anything else the meta-schema check reports
  const at = (key: string) => join([...path, key]);
  if (depth > SCHEMA_BUDGET.depth) {
    walk.issues.push({ path: join(path), message: `nests subschemas more than ${SCHEMA_BUDGET.depth} deep` });
    return;
  }
  if ('$async' in node) walk.issues.push({ path: at('$async'), message: 'is not allowed: argument schemas are checked synchronously' });
  for (const key of ['$dynamicRef', '$recursiveRef', '$recursiveAnchor']) {
    if (key in node) walk.issues.push({ path: at(key), message: 'is not allowed in an argument schema: use a local "$ref"' });
  }
  if (path.length > 0) {
    if ('$id' in node) walk.issues.push({ path: at('$id'), message: 'is allowed only at the root of an argument schema' });
    if ('$schema' in node) walk.issues.push({ path: at('$schema'), message: 'is allowed only at the root of an argument schema' });
  }
  for (const key of ['$anchor', '$dynamicAnchor']) {
    const name = node[key];
    if (name === undefined) continue;
    if (typeof name !== 'string' || !ANCHOR_NAME.test(name))
      walk.issues.push({ path: at(key), message: 'must be a plain name (letters, digits, "_", "-", ".")' });
    else walk.anchors.set(name, node);
  }
  if ('$ref' in node) {
    const ref = node.$ref;
    if (typeof ref !== 'string' || !ref.startsWith('#')) walk.issues.push({ path: at('$ref'), message: 'must be local to the schema (start with "#")' });
    else walk.refs.push({ path: at('$ref'), ref });
  }
  const pattern = patternProblem(node.pattern);
  if (pattern) walk.issues.push({ path: at('pattern'), message: pattern });
  if (isObject(node.patternProperties)) {
    for (const key of Object.keys(node.patternProperties)) {
      const problem = patternProblem(key);
      if (problem) walk.issues.push({ path: join([...path, 'patternProperties', key]), message: problem });
    }
  }
  if (Array.isArray(node.enum) && node.enum.length > SCHEMA_BUDGET.enumEntries) {
    walk.issues.push({ path: at('enum'), message: `has more than ${SCHEMA_BUDGET.enumEntries} entries` });
  }
  if (node.uniqueItems === true && !(typeof node.maxItems === 'number' && node.maxItems <= SCHEMA_BUDGET.uniqueItemsMaxItems)) {
    walk.issues.push({ path: at('uniqueItems'), message: `needs "maxItems" of at most ${SCHEMA_BUDGET.uniqueItemsMaxItems} beside it` });
  }
  for (const key of COMBINATOR_LIST) {
    const list = node[key];
    if (Array.isArray(list) && list.length > SCHEMA_BUDGET.branches) {
      walk.issues.push({ path: at(key), message: `has more than ${SCHEMA_BUDGET.branches} branches` });
    }
  }
  for (const child of children(node)) {
    const nested = combinators + (child.combinator ? 1 : 0);
    if (nested > SCHEMA_BUDGET.combinatorNesting) {
      walk.issues.push({ path: join([...path, ...child.keys]), message: `nests combinators more than ${SCHEMA_BUDGET.combinatorNesting} deep` });
      continue;
    }
    walkLiteral(walk, child.schema, [...path, ...child.keys], depth + 1, nested);
  }
}

/**
 * The schema a local `$ref` names: `#`, a JSON pointer `#/…`, or an anchor `#name`. A pointer
 * must land on a place pass 1 walked as a subschema: one into `default`, `examples`, `const` or
 * `enum` would run a value no per-keyword rule ever looked at.
 */
function resolve(walk: Walk, ref: string): unknown {
  const fragment = decodeURIComponentSafe(ref.slice(1));
  if (fragment === undefined) return undefined;
  if (fragment === '') return walk.root;
  if (!fragment.startsWith('/')) return walk.anchors.get(fragment);
  const keys = fragment
    .slice(1)
    .split('/')
    .map((raw) => raw.replaceAll('~1', '/').replaceAll('~0', '~'));
  if (!walk.schemaPaths.has(JSON.stringify(keys))) return undefined;
  let node: unknown = walk.root;
  for (const key of keys) {
    if (Array.isArray(node) && /^(0|[1-9][0-9]*)$/.test(key)) node = node[Number(key)];
    else if (isObject(node) && Object.hasOwn(node, key)) node = node[key];
    else return undefined;
  }
  return node;
}

function decodeURIComponentSafe(text: string): string | undefined {
  try {
    return decodeURIComponent(text);
  } catch {
    return undefined;
  }
}

interface Cost {
  nodes: number;
  patterns: number;
  depth: number;
  combinators: number;
}

/**
 * Pass 2: what validating one value costs, with every `$ref` expanded where it is used — a
 * few hundred bytes of `$defs` that refer to one another twice each would otherwise stand for
 * millions of subschemas. Memoised per schema object; a `$ref` cycle has no finite expansion
 * and is refused (it also lets a schema recurse without consuming any of the value).
 */
function expandedCost(walk: Walk, node: unknown, active: Set<unknown>, memo: Map<unknown, Cost>): Cost | string {
  if (!isObject(node)) return { nodes: 1, patterns: 0, depth: 1, combinators: 0 };
  const known = memo.get(node);
  if (known) return known;
  if (active.has(node)) return 'a "$ref" cycle';
  active.add(node);
  const cost: Cost = { nodes: 1, patterns: 0, depth: 0, combinators: 0 };
  if (typeof node.pattern === 'string') cost.patterns += 1;
  if (isObject(node.patternProperties)) cost.patterns += Object.keys(node.patternProperties).length;
  if (Array.isArray(node.enum)) cost.nodes += node.enum.length;
  if (Array.isArray(node.required)) cost.nodes += node.required.length;
  const parts: { schema: unknown; combinator: boolean }[] = children(node);
  if (typeof node.$ref === 'string') parts.push({ schema: resolve(walk, node.$ref), combinator: false });
  for (const part of parts) {
    const sub = expandedCost(walk, part.schema, active, memo);
    if (typeof sub === 'string') return sub;
    cost.nodes += sub.nodes;
    cost.patterns += sub.patterns;
    cost.depth = Math.max(cost.depth, sub.depth);
    cost.combinators = Math.max(cost.combinators, sub.combinators + (part.combinator ? 1 : 0));
  }
  cost.depth += 1;
  active.delete(node);
  memo.set(node, cost);
  return cost;
}

/** A pattern match (RE2JS) costs up to about four plain checks (measured 0.3–1.5 µs cold). */
const PATTERN_WEIGHT = 4;

/**
 * Pass 3: how many subschema checks validating one 16 KiB value can run, `$ref`s expanded. Each
 * subschema runs at most once per value it applies to: once for the root, per element under a
 * per-element keyword (bounded by `maxItems`/`maxProperties` beside it), and never more than
 * the `elements` a 16 KiB value holds.
 */
function work(walk: Walk, node: unknown, values: number): number {
  if (!isObject(node)) return values;
  const weight =
    1 +
    (typeof node.pattern === 'string' ? PATTERN_WEIGHT - 1 : 0) +
    (Array.isArray(node.enum) ? node.enum.length : 0) +
    (Array.isArray(node.required) ? node.required.length : 0);
  let total = weight * values;
  const each = (bound: unknown) =>
    Math.min(SCHEMA_BUDGET.elements, values * (typeof bound === 'number' && bound >= 0 ? Math.ceil(bound) : SCHEMA_BUDGET.elements));
  for (const child of children(node)) {
    const key = child.keys[0]!;
    if (key === '$defs' || key === 'definitions') continue; // checked only where a `$ref` uses them
    const perItem = PER_ITEM.includes(key) || (key === 'items' && child.keys.length === 1);
    const applies = perItem ? each(node.maxItems) : PER_PROPERTY.includes(key) ? each(node.maxProperties) : values;
    total += work(walk, child.schema, applies) + (key === 'patternProperties' ? (PATTERN_WEIGHT - 1) * applies : 0);
  }
  if (typeof node.$ref === 'string') total += work(walk, resolve(walk, node.$ref), values);
  return total;
}

/**
 * Why `schema` may not be compiled, as issues whose paths are relative to the schema (`''` is
 * the schema itself). Empty when it keeps every rule and fits the budget.
 */
export function budgetIssues(schema: Json): ErrorIssue[] {
  const walk: Walk = { root: schema, issues: [], anchors: new Map(), refs: [], schemaPaths: new Set() };
  walkLiteral(walk, schema, [], 1, 0);
  for (const { path, ref } of walk.refs) {
    if (resolve(walk, ref) === undefined) walk.issues.push({ path, message: 'does not name a subschema of this schema' });
  }
  if (walk.issues.length > 0) return walk.issues;
  const cost = expandedCost(walk, schema, new Set(), new Map());
  if (typeof cost === 'string') return [{ path: '', message: `contains ${cost}, which has no bounded expansion` }];
  const over: string[] = [];
  if (cost.nodes > SCHEMA_BUDGET.nodes) over.push(`${cost.nodes} subschemas and list entries (budget ${SCHEMA_BUDGET.nodes})`);
  if (cost.depth > SCHEMA_BUDGET.depth) over.push(`subschemas ${cost.depth} deep (budget ${SCHEMA_BUDGET.depth})`);
  if (cost.combinators > SCHEMA_BUDGET.combinatorNesting) over.push(`combinators ${cost.combinators} deep (budget ${SCHEMA_BUDGET.combinatorNesting})`);
  if (cost.patterns > SCHEMA_BUDGET.patterns) over.push(`${cost.patterns} patterns (budget ${SCHEMA_BUDGET.patterns})`);
  // Only once the expansion is known to be small: this walk does not memoise.
  const checks = over.length > 0 ? 0 : work(walk, schema, 1);
  if (checks > SCHEMA_BUDGET.work) {
    over.push(
      `up to ${checks} subschema checks on a 16 KiB value (budget ${SCHEMA_BUDGET.work}); bound arrays with "maxItems" and objects with "maxProperties"`,
    );
  }
  return over.length > 0 ? [{ path: '', message: `with its "$ref"s expanded has ${over.join(', ')}` }] : [];
}

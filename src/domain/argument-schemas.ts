import { hash } from 'node:crypto';
import { Ajv, type AnySchemaObject, type Options, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { RE2JS } from 're2js';
import type { ErrorIssue } from './errors.js';
import { budgetIssues, dialectOf, type Dialect } from './schema-budget.js';

// ajv-formats ships CommonJS with its function on `default`.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/** Issues one failed validation (or one refused schema) reports at most: enough to fix it, never a 59 MB answer. */
export const MAX_ARGUMENT_ISSUES = 20;
/** Compiled validators kept (least recently used dropped first); docs/devices/argument-schemas.md "Argument schemas". */
export const VALIDATOR_CACHE_SIZE = 256;

/**
 * `pattern` and `patternProperties` run on RE2JS, a linear-time engine: a backtracking pattern
 * from one device must not stall every workspace. Ajv reads `code` only to write standalone
 * code, which this service never does.
 */
const re2: NonNullable<NonNullable<Options['code']>['regExp']> = Object.assign((pattern: string) => RE2JS.compile(pattern), { code: 're2js' });

const options: Options = {
  // Stop at the first failing value: with allErrors a 1.4 KiB nested anyOf made one call collect
  // 315,000 errors. anyOf still reports each branch's first failure.
  allErrors: false,
  strict: false,
  code: { regExp: re2 },
};

/**
 * One Ajv per dialect checks schemas against their meta-schema; it never holds a device's
 * schema, so nothing a device sends is registered process-wide.
 */
const metaCheckers: Record<Dialect, Ajv> = {
  '2020-12': addFormats(new Ajv2020(options)),
  'draft-07': addFormats(new Ajv(options)),
};

/**
 * A fresh Ajv for each schema: its `$id`s and anchors live in their own registry, so one
 * workspace's schema can neither collide with nor be reached from another's.
 */
function compileIsolated(dialect: Dialect, schema: AnySchemaObject): ValidateFunction {
  const isolated = { ...options, meta: false, validateSchema: false };
  const ajv = dialect === '2020-12' ? new Ajv2020(isolated) : new Ajv(isolated);
  return addFormats(ajv).compile(schema);
}

const keyOf = (schemaText: string) => hash('sha256', schemaText, 'hex');

type Compiled = { validate: ValidateFunction } | { issues: ErrorIssue[] };

/** Checks every rule, then compiles; issue paths are relative to the schema (`''` is the schema itself). */
function check(schema: Record<string, unknown>): Compiled {
  if (schema.type !== 'object') return { issues: [{ path: '', message: 'must be a JSON Schema with "type": "object"' }] };
  const dialect = dialectOf(schema);
  if (!dialect) {
    return { issues: [{ path: '$schema', message: 'must name JSON Schema 2020-12 (the default) or draft-07' }] };
  }
  const budget = budgetIssues(schema);
  if (budget.length > 0) return { issues: budget };
  const headers = headerDeclarations(schema);
  if ('issue' in headers) return { issues: [headers.issue] };
  const checker = metaCheckers[dialect];
  if (!checker.validateSchema(schema)) {
    return { issues: [{ path: '', message: `is not a valid JSON Schema: ${checker.errorsText(checker.errors)}` }] };
  }
  try {
    return { validate: compileIsolated(dialect, schema) };
  } catch (error) {
    return { issues: [{ path: '', message: `is not a valid JSON Schema: ${(error as Error).message}` }] };
  }
}

/** An argument a 2026-07-28 MCP client also sends as the header `Mcp-Param-<headerName>`. */
export interface HeaderDeclaration {
  /** Property names from the schema's root down to the argument. */
  path: string[];
  headerName: string;
  type: 'string' | 'integer' | 'boolean';
}

/** RFC 9110 token: what a header name may hold. */
const HEADER_TOKEN = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;
const HEADER_TYPES = new Set(['string', 'integer', 'boolean']);
/** Keywords whose subschemas are not reached by a chain of `properties`: no `x-mcp-header` below them. */
const UNREACHABLE = [
  ...['items', 'prefixItems', 'contains', 'additionalProperties', 'unevaluatedProperties', 'unevaluatedItems', 'propertyNames'],
  ...['oneOf', 'anyOf', 'allOf', 'not', 'if', 'then', 'else'],
];
const UNREACHABLE_MAPS = ['patternProperties', 'dependentSchemas', '$defs', 'definitions'];

/**
 * A device may mark an argument `x-mcp-header` (MCP 2026-07-28 Streamable HTTP, "Schema
 * Extension"); clients then repeat it in an `Mcp-Param-*` header and drop a tool whose marks
 * break the extension's rules, so a schema that breaks them is refused at publish
 * (docs/reference/rules.md "MCP"): a non-empty RFC 9110 token, on a string, integer or boolean property
 * reached from the root through `properties` only, unique ignoring case. Paths are relative to
 * the schema, as the other schema issues.
 */
export function headerDeclarations(schema: Record<string, unknown>): { declarations: HeaderDeclaration[] } | { issue: ErrorIssue } {
  const declarations: HeaderDeclaration[] = [];
  const seen = new Map<string, string>();
  const visit = (node: unknown, at: string[], path: string[], reachable: boolean): ErrorIssue | undefined => {
    if (typeof node !== 'object' || node === null || Array.isArray(node)) return undefined;
    const here = node as Record<string, unknown>;
    if ('x-mcp-header' in here) {
      const issue = (message: string) => ({ path: [...at, 'x-mcp-header'].join('.'), message });
      const name = here['x-mcp-header'];
      if (!reachable || path.length === 0) return issue('is allowed only on a property reached from the root through "properties" alone');
      if (typeof name !== 'string' || !HEADER_TOKEN.test(name)) return issue('must be a non-empty HTTP header name token (RFC 9110)');
      if (typeof here.type !== 'string' || !HEADER_TYPES.has(here.type)) return issue('is allowed only on a property of type string, integer or boolean');
      const prior = seen.get(name.toLowerCase());
      if (prior !== undefined) return issue(`repeats the header name "${prior}" (header names ignore case)`);
      seen.set(name.toLowerCase(), name);
      declarations.push({ path, headerName: name, type: here.type as HeaderDeclaration['type'] });
    }
    const children: [unknown, string[], string[], boolean][] = [];
    if (typeof here.properties === 'object' && here.properties !== null) {
      for (const [key, child] of Object.entries(here.properties)) children.push([child, [...at, 'properties', key], [...path, key], reachable]);
    }
    for (const key of UNREACHABLE) {
      const value = here[key];
      if (Array.isArray(value)) value.forEach((child, index) => children.push([child, [...at, key, String(index)], path, false]));
      else if (value !== undefined) children.push([value, [...at, key], path, false]);
    }
    for (const key of UNREACHABLE_MAPS) {
      const map = here[key];
      if (typeof map === 'object' && map !== null) for (const [name, child] of Object.entries(map)) children.push([child, [...at, key, name], path, false]);
    }
    for (const [child, childAt, childPath, childReachable] of children) {
      const issue = visit(child, childAt, childPath, childReachable);
      if (issue) return issue;
    }
    return undefined;
  };
  const issue = visit(schema, [], [], true);
  return issue ? { issue } : { declarations };
}

/** Device argument schemas, checked and compiled once each: one per service, handed to operations in `ctx.schemas`. */
export interface ArgumentSchemas {
  /**
   * Checks a schema a device publishes and compiles it into the cache, so the first call does
   * not pay for it. Issue paths are relative to the schema (`''` is the schema itself).
   */
  schemaIssues(schema: Record<string, unknown>): ErrorIssue[];
  /**
   * Checks arguments (or a reported result, under another `root`) against a capability's
   * stored schema; issues point into `root`, `arguments` unless named. After
   * a restart, or once the LRU dropped it, the schema is compiled again here; a schema stored
   * before these rules that breaks them is reported as an issue, never run.
   */
  argumentIssues(schemaText: string, args: unknown, root?: string): ErrorIssue[];
}

/** A bounded LRU of compiled validators keyed by the SHA-256 of the schema's stored text. */
export function createArgumentSchemas(cacheSize = VALIDATOR_CACHE_SIZE): ArgumentSchemas {
  const validators = new Map<string, ValidateFunction>();
  const remember = (key: string, validate: ValidateFunction) => {
    validators.delete(key);
    validators.set(key, validate);
    if (validators.size > cacheSize) validators.delete(validators.keys().next().value!);
  };
  return {
    schemaIssues(schema) {
      const key = keyOf(JSON.stringify(schema));
      const cached = validators.get(key);
      // The same text was checked and compiled already: a device republishing its manifest costs nothing.
      if (cached) {
        remember(key, cached);
        return [];
      }
      const compiled = check(schema);
      if ('issues' in compiled) return compiled.issues.slice(0, MAX_ARGUMENT_ISSUES);
      remember(key, compiled.validate);
      return [];
    },
    argumentIssues(schemaText, args, root = 'arguments') {
      const key = keyOf(schemaText);
      let validate = validators.get(key);
      if (!validate) {
        const compiled = check(JSON.parse(schemaText) as Record<string, unknown>);
        if ('issues' in compiled) {
          return [{ path: root, message: "cannot be checked: the function's schema is refused now; the device must publish its manifest again" }];
        }
        validate = compiled.validate;
      }
      remember(key, validate);
      if (validate(args)) return [];
      return (validate.errors ?? []).slice(0, MAX_ARGUMENT_ISSUES).map((error) => {
        const missing = error.keyword === 'required' ? `/${String((error.params as { missingProperty: string }).missingProperty)}` : '';
        const pointer = `${error.instancePath}${missing}`;
        return {
          path: [root, ...pointer.split('/').filter(Boolean)].join('.'),
          message: error.message ?? 'is not valid',
        };
      });
    },
  };
}

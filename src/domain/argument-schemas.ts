import { createHash } from 'node:crypto';
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
/** Compiled validators kept (least recently used dropped first); README "Argument schemas". */
export const VALIDATOR_CACHE_SIZE = 256;

/**
 * `pattern` and `patternProperties` run on RE2JS, a linear-time engine: a backtracking pattern
 * from one device must not stall every workspace. Ajv reads `code` only to write standalone
 * code, which this service never does.
 */
const re2: NonNullable<NonNullable<Options['code']>['regExp']> = Object.assign((pattern: string) => RE2JS.compile(pattern), { code: 're2js' });

const options: Options = {
  // Stop at the first failing value: with allErrors a 1.4 KiB nested anyOf made one call collect
  // 315,000 errors (issue 13). anyOf still reports each branch's first failure.
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

const keyOf = (schemaText: string) => createHash('sha256').update(schemaText).digest('hex');

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

/** Device argument schemas, checked and compiled once each: one per service, handed to operations in `ctx.schemas`. */
export interface ArgumentSchemas {
  /**
   * Checks a schema a device publishes and compiles it into the cache, so the first call does
   * not pay for it. Issue paths are relative to the schema (`''` is the schema itself).
   */
  schemaIssues(schema: Record<string, unknown>): ErrorIssue[];
  /**
   * Checks arguments against a capability's stored schema; issues point into `arguments`. After
   * a restart, or once the LRU dropped it, the schema is compiled again here; a schema stored
   * before these rules that breaks them is reported as an issue, never run.
   */
  argumentIssues(schemaText: string, args: unknown): ErrorIssue[];
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
    argumentIssues(schemaText, args) {
      const key = keyOf(schemaText);
      let validate = validators.get(key);
      if (!validate) {
        const compiled = check(JSON.parse(schemaText) as Record<string, unknown>);
        if ('issues' in compiled) {
          return [
            { path: 'arguments', message: "cannot be checked: the function's argument schema is refused now; the device must publish its manifest again" },
          ];
        }
        validate = compiled.validate;
      }
      remember(key, validate);
      if (validate(args)) return [];
      return (validate.errors ?? []).slice(0, MAX_ARGUMENT_ISSUES).map((error) => {
        const missing = error.keyword === 'required' ? `/${String((error.params as { missingProperty: string }).missingProperty)}` : '';
        const pointer = `${error.instancePath}${missing}`;
        return {
          path: ['arguments', ...pointer.split('/').filter(Boolean)].join('.'),
          message: error.message ?? 'is not valid',
        };
      });
    },
  };
}

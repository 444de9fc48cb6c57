import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { ErrorIssue } from './errors.js';

// ajv-formats ships CommonJS with its function on `default`.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

/**
 * Capability argument schemas are JSON Schema documents published by devices. Each distinct
 * schema text is compiled once and kept; a republished manifest with new text compiles anew.
 */
const ajv = addFormats(new Ajv({ allErrors: true, strict: false }));
const compiled = new Map<string, ValidateFunction>();

function compile(schemaText: string): ValidateFunction {
  let validate = compiled.get(schemaText);
  if (!validate) {
    validate = ajv.compile(JSON.parse(schemaText) as object);
    compiled.set(schemaText, validate);
  }
  return validate;
}

/** Why a published argument schema is unusable, or undefined when it is fine. */
export function argumentSchemaProblem(schema: Record<string, unknown>): string | undefined {
  if (schema.type !== 'object') return 'must be a JSON Schema with "type": "object"';
  try {
    compile(JSON.stringify(schema));
    return undefined;
  } catch (error) {
    return `is not a valid JSON Schema: ${(error as Error).message}`;
  }
}

/** Checks arguments against a capability's schema; issues point into `arguments`. */
export function argumentIssues(schemaText: string, args: unknown): ErrorIssue[] {
  const validate = compile(schemaText);
  if (validate(args)) return [];
  return (validate.errors ?? []).map((error) => {
    const missing = error.keyword === 'required' ? `/${String((error.params as { missingProperty: string }).missingProperty)}` : '';
    const pointer = `${error.instancePath}${missing}`;
    return {
      path: ['arguments', ...pointer.split('/').filter(Boolean)].join('.'),
      message: error.message ?? 'is not valid',
    };
  });
}

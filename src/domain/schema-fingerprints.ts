import { createHash } from 'node:crypto';
import type { Db } from '../store/driver.js';
import { fingerprintMigratedGrants, setCapabilityFingerprint, unfingerprintedCapabilities } from '../store/grants.js';
import { canonical } from './idempotency.js';

/**
 * Keywords that only annotate a schema: changing their text never changes which arguments
 * are valid, so it never changes what a grant allows (docs/reference/rules.md "Access").
 */
const ANNOTATIONS = new Set(['description', 'title', 'examples', '$comment']);
/** Keywords whose value is one subschema. */
const SUBSCHEMA = new Set([
  'additionalProperties',
  'additionalItems',
  'unevaluatedProperties',
  'unevaluatedItems',
  'items',
  'contains',
  'propertyNames',
  'not',
  'if',
  'then',
  'else',
]);
/** Keywords whose value is a list of subschemas (`items` too, in draft-07's tuple form). */
const SUBSCHEMA_LIST = new Set(['allOf', 'anyOf', 'oneOf', 'prefixItems', 'items']);
/** Keywords whose value maps names to subschemas: the names are data and stay, the subschemas are walked. */
const SUBSCHEMA_MAP = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas', 'dependencies']);

function isObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === 'object' && !Array.isArray(value);
}

/** The schema without its annotations, walked keyword by keyword so a property named `description` stays. */
function withoutAnnotations(schema: unknown): unknown {
  if (!isObject(schema)) return schema; // `true` / `false` schemas
  const out: Record<string, unknown> = {};
  for (const [keyword, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(keyword)) continue;
    if (SUBSCHEMA_LIST.has(keyword) && Array.isArray(value)) out[keyword] = value.map(withoutAnnotations);
    else if (SUBSCHEMA.has(keyword)) out[keyword] = withoutAnnotations(value);
    else if (SUBSCHEMA_MAP.has(keyword) && isObject(value)) {
      // draft-07 `dependencies` may also map a name to a list of names: a list is not a schema and stays as is.
      out[keyword] = Object.fromEntries(Object.entries(value).map(([name, sub]) => [name, Array.isArray(sub) ? sub : withoutAnnotations(sub)]));
    } else out[keyword] = value;
  }
  return out;
}

/**
 * The fingerprint of a function's argument schema: sha256 of its canonical JSON (keys sorted,
 * annotations left out). Two schemas are compatible exactly when their fingerprints are equal:
 * any other change, even one that only widens what is accepted, makes grants given under
 * the old schema stale until the owner grants again (docs/reference/rules.md "Access").
 */
export function schemaFingerprint(schema: unknown): string {
  return createHash('sha256')
    .update(canonical(withoutAnnotations(schema)))
    .digest('hex');
}

/**
 * Completes migration 0014, which cannot hash in SQL: fingerprints the capabilities published
 * before it, then gives the grants it recorded a kind for the fingerprint of the same
 * function. Runs at every start before the service answers, in one transaction; after the
 * first run nothing is left to fill. A grant whose function was gone at migration time keeps
 * no fingerprint, so it never applies again (docs/reference/rules.md "Access").
 */
export async function backfillSchemaFingerprints(db: Db): Promise<void> {
  // A read first, so a start after the first one costs no write transaction.
  if ((await unfingerprintedCapabilities(db)).length === 0) return;
  await db.transaction(async (tx) => {
    for (const c of await unfingerprintedCapabilities(tx)) {
      await setCapabilityFingerprint(tx, c.deviceId, c.name, schemaFingerprint(JSON.parse(c.arguments)));
    }
    await fingerprintMigratedGrants(tx);
  });
}

import { createHash } from 'node:crypto';
import fc from 'fast-check';
import { expect } from 'vitest';
import type { Db } from '../../src/store/driver.js';

/**
 * Building blocks for the hostile-input tests: values a careless or malicious
 * client sends, a JSON writer that can emit what JSON.stringify cannot (-0, 1e400, lone
 * surrogate escapes), the error-envelope check and a fingerprint of the whole database.
 */

/** A piece of JSON text written verbatim, for tokens JSON.stringify would normalise away. */
export class RawJson {
  constructor(readonly text: string) {}
}

/** JSON text of `value`, with RawJson pieces inserted as they are. */
export function jsonText(value: unknown): string {
  if (value instanceof RawJson) return value.text;
  if (Array.isArray(value)) return `[${value.map(jsonText).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    return `{${Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .map(([k, v]) => `${JSON.stringify(k)}:${jsonText(v)}`)
      .join(',')}}`;
  }
  // Node's JSON.stringify escapes lone surrogates as \udXXX (well-formed JSON.stringify).
  return JSON.stringify(value) ?? 'null';
}

export const traversal = ['../', '../../../../etc/passwd', '..\\..\\windows\\win.ini', '/..;/', '....//....//', '%2e%2e%2f', '..%252f'];
export const sqlMeta = ["' OR 1=1 --", "'; DROP TABLE actions; --", '" OR ""="', "1' UNION SELECT token_hash FROM connections --", '`', ';', '%', '_', '\\'];

/** Strings that have broken parsers, loggers, SQL and path handling somewhere. */
export const nastyStrings = [
  '',
  ' ',
  '\t\n\r',
  ...traversal,
  ...sqlMeta,
  '%00',
  '\u0000',
  'a\u0000b',
  '\ud800',
  '\udfff',
  'x\udc00\ud800y',
  '😀',
  '\u{10FFFF}',
  'Ω≈ç√∫˜µ≤≥÷',
  '\u202egnp.exe',
  '\ufeff',
  'Z̴̡̪͉͔̾a̷l̶g̸o̵',
  '<script>alert(1)</script>',
  '${7*7}{{7*7}}',
  '__proto__',
  'constructor',
  'null',
  'undefined',
  'NaN',
  'Infinity',
  '-0',
  '1e308',
  'true',
  '00000000-0000-0000-0000-000000000000',
  'ffffffff-ffff-4fff-bfff-ffffffffffff',
  'FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF',
  'x'.repeat(65),
  'x'.repeat(129),
  'x'.repeat(1025),
  'é'.repeat(4000),
];

/** Numbers at and past every edge: JSON-representable ones, and raw tokens for the rest. */
export const nastyNumbers: unknown[] = [
  0,
  -1,
  1,
  0.5,
  59,
  61,
  300,
  301,
  86_401,
  31_536_001,
  1e308,
  -1e308,
  5e-324,
  2 ** 31,
  2 ** 53 - 1,
  Number.MAX_SAFE_INTEGER + 2,
  new RawJson('-0'),
  new RawJson('1e400'),
  new RawJson('-1e400'),
  new RawJson('9007199254740993'),
  new RawJson('-9007199254740993'),
  new RawJson('123456789012345678901234567890123456789'),
  new RawJson('1E-400'),
  new RawJson('60.0'),
  new RawJson('6e1'),
];

/** Raw JSON string tokens JSON.stringify would never write. */
export const nastyStringTokens = ['"\\ud800"', '"\\udfff\\ud800"', '"\\u0000"', '"a\\u0000b"', '"\\uDBFF\\uDFFF"', '"\\/\\/"'].map((t) => new RawJson(t));

export function deepArray(depth: number): RawJson {
  return new RawJson('['.repeat(depth) + ']'.repeat(depth));
}

export function deepObject(depth: number): RawJson {
  return new RawJson('{"a":'.repeat(depth) + '1' + '}'.repeat(depth));
}

const nastyString = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...nastyStrings) },
  { weight: 1, arbitrary: fc.constantFrom(...nastyStringTokens) },
  { weight: 2, arbitrary: fc.string({ unit: 'binary', maxLength: 24 }) },
  { weight: 1, arbitrary: fc.string({ minLength: 60, maxLength: 200 }) },
);

const nastyNumber = fc.oneof(
  { weight: 3, arbitrary: fc.constantFrom(...nastyNumbers) },
  { weight: 1, arbitrary: fc.integer() },
  { weight: 1, arbitrary: fc.double({ noNaN: true, noDefaultInfinity: true }) },
);

const nastyScalar = fc.oneof(nastyString, nastyNumber, fc.boolean(), fc.constant(null));

/** Any JSON value a hostile client might put where the schema wants something else. */
export const nastyValue: fc.Arbitrary<unknown> = fc.letrec<{ value: unknown }>((tie) => ({
  value: fc.oneof(
    { depthSize: 'small', withCrossShrink: true },
    { weight: 6, arbitrary: nastyScalar },
    { weight: 1, arbitrary: fc.array(tie('value'), { maxLength: 4 }) },
    {
      weight: 1,
      arbitrary: fc.dictionary(fc.oneof(fc.constantFrom('__proto__', 'constructor', '', '\u0000', 'a'), fc.string({ maxLength: 8 })), tie('value'), {
        maxKeys: 4,
      }),
    },
    { weight: 1, arbitrary: fc.integer({ min: 1, max: 3000 }).map((d) => (d % 2 ? deepArray(d) : deepObject(d))) },
  ),
})).value;

/** Header values fetch can send (latin-1, no CR, LF or NUL), from the nasty strings. */
export const nastyHeaderValue = fc
  .oneof(fc.constantFrom(...nastyStrings), fc.string({ maxLength: 80 }), fc.constant('f'.repeat(64)), fc.constant('F'.repeat(64)), fc.constant('g'.repeat(64)))
  .map((s) => s.replace(/[^\x20-\x7e\x80-\xff\t]/g, '?'));

/** Bodies that are not JSON objects at all, as bytes. */
export const malformedBodies: (string | Uint8Array)[] = [
  '{',
  '{"a":1',
  '{"a":1}}',
  '{"a":1,}',
  "{'a':1}",
  '{"a":01}',
  '{"a":NaN}',
  '{"a":Infinity}',
  '{"a":undefined}',
  '{"a":"\\x41"}',
  '{"a":"\u0001"}',
  '\ufeff{}',
  '[]',
  '[1,2,3]',
  'null',
  'true',
  '0',
  '"x"',
  ' ',
  '\u0000',
  '{"__proto__":{"admin":true}}',
  '{"a":1,"a":2}',
  '['.repeat(16_000),
  '['.repeat(8000) + ']'.repeat(8000),
  new Uint8Array([0xff, 0xfe, 0x7b, 0x7d]),
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xed, 0xa0, 0x80, 0x22, 0x7d]), // {"a":"<CESU surrogate>"}
  new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xc0, 0xaf, 0x22, 0x7d]), // overlong '/'
];

/** Path segments that are not what the route expects (sent verbatim, so some are already encoded). */
export const nastySegments = [
  '..',
  '%2e%2e',
  '..%2f..%2fetc%2fpasswd',
  '%00',
  '%ED%A0%80',
  '%C0%AF',
  '%zz',
  '%',
  "'%20OR%201=1%20--",
  '%27%3B%20DROP%20TABLE%20actions%3B--',
  '%F0%9F%98%80',
  'null',
  '00000000-0000-0000-0000-000000000000',
  'FFFFFFFF-FFFF-4FFF-BFFF-FFFFFFFFFFFF',
  '123e4567-e89b-12d3-a456-426614174000',
  'x'.repeat(2000),
];

/** Checks an answer against the contract for a request the server should reject or accept. */
export function expectWellFormed(status: number, body: unknown, context: string): void {
  expect(status, context).toBeGreaterThanOrEqual(200);
  expect(status, context).toBeLessThan(500);
  if (status < 300) return;
  expect(body, context).toBeTypeOf('object');
  expect(body, context).not.toBeNull();
  const envelope = body as { error?: { code?: unknown; issues?: unknown } };
  expect(Object.keys(envelope), context).toEqual(['error']);
  expect(envelope.error?.code, context).toBeTypeOf('string');
  if (envelope.error?.code === 'validation_failed') {
    const issues = envelope.error.issues as { path: unknown; message: unknown }[];
    expect(Array.isArray(issues) && issues.length > 0, `${context}: validation_failed needs issues`).toBe(true);
    for (const issue of issues) {
      expect(issue.path, context).toBeTypeOf('string');
      expect(issue.message, context).toBeTypeOf('string');
    }
  }
}

/**
 * Row counts and a hash of every row of every table. `devices.last_seen_at` is left out:
 * a device that calls in is seen even when its request is refused later (a heartbeat, not
 * data the request asked to write). So is `webhook_dispatch`, the webhook dispatcher's place
 * in the event journal: it moves in the background after earlier, accepted requests.
 */
export async function fingerprint(db: Db): Promise<string> {
  const tables = await db.all<{ name: string }>(
    "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' AND name <> 'webhook_dispatch' ORDER BY name",
  );
  const hash = createHash('sha256');
  const counts: string[] = [];
  for (const { name } of tables) {
    // No ORDER BY: a full scan reads rows in storage order, the same for the same content.
    const rows = await db.all<Record<string, unknown>>(`SELECT * FROM "${name}"`);
    counts.push(`${name}=${rows.length}`);
    hash.update(name);
    for (const row of rows) {
      if (name === 'devices') delete row.last_seen_at;
      hash.update(JSON.stringify(row, (_key, v) => (typeof v === 'bigint' ? v.toString() : v)));
    }
  }
  return `${counts.join(',')} ${hash.digest('hex')}`;
}

/**
 * `fingerprint` with a shortcut: SQLite's total_changes() counts every row the service's one
 * embedded connection inserted, updated or deleted (rolled-back ones included), so while it
 * stands still the tables cannot have changed and the last fingerprint still holds. When it
 * moves, the whole fingerprint is taken again. This keeps thousands of cases cheap as the
 * database grows, without trusting anything but the database.
 */
export function fingerprinter(db: Db): () => Promise<string> {
  let changes = -1;
  let last = '';
  return async () => {
    const now = (await db.get<{ n: number }>('SELECT total_changes() AS n'))!.n;
    if (now !== changes) {
      last = await fingerprint(db);
      changes = now;
    }
    return last;
  };
}

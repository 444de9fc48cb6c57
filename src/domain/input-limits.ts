import type { ErrorIssue } from './errors.js';

/**
 * Input the service cannot keep or handle as sent, refused by `invoke` before any schema
 * runs (each was found by the hostile-input tests):
 *
 * - U+0000 in a string: the embedded libSQL binding ends a text value at the first NUL, so
 *   a name `a\u0000b` was stored as `a`.
 * - Unpaired UTF-16 surrogates: JSON can carry `"\ud800"`, UTF-8 cannot, so it was stored
 *   as U+FFFD — something other than what was sent.
 * - Nesting deeper than MAX_DEPTH: JSON.parse copes, but JSON.stringify (storing a result or
 *   arguments) overflowed the stack at about 5,000 levels and answered 500.
 */
export const MAX_DEPTH = 64;

// eslint-disable-next-line no-control-regex -- NUL is one of the characters this rejects
const UNSAFE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

const MAX_ISSUES = 20;

/** Issues for every string (value or key) holding unsafe text, and for nesting past MAX_DEPTH; [] when none. */
export function inputIssues(input: unknown): ErrorIssue[] {
  const issues: ErrorIssue[] = [];
  // Iterative: a body may nest thousands of levels deep within 16 KiB.
  const stack: { value: unknown; path: string; depth: number }[] = [{ value: input, path: '', depth: 0 }];
  while (stack.length > 0 && issues.length < MAX_ISSUES) {
    const { value, path, depth } = stack.pop()!;
    if (typeof value === 'string') {
      if (UNSAFE.test(value)) issues.push({ path, message: 'must be valid Unicode text without NUL (U+0000) characters' });
      continue;
    }
    if (value === null || typeof value !== 'object') continue;
    if (depth >= MAX_DEPTH) {
      issues.push({ path, message: `nests deeper than ${MAX_DEPTH} levels` });
      continue;
    }
    if (Array.isArray(value)) {
      value.forEach((item, index) => stack.push({ value: item, path: path ? `${path}.${index}` : String(index), depth: depth + 1 }));
      continue;
    }
    for (const [key, item] of Object.entries(value)) {
      const at = path ? `${path}.${key}` : key;
      if (UNSAFE.test(key)) issues.push({ path: at, message: 'a key must be valid Unicode text without NUL (U+0000) characters' });
      stack.push({ value: item, path: at, depth: depth + 1 });
    }
  }
  return issues;
}

import { createHash } from 'node:crypto';
import { findIdempotent, saveIdempotent } from '../store/idempotency.js';
import type { Queryable } from '../store/driver.js';
import { DomainError } from './errors.js';

/** Keys replay for 24 hours (docs/reference/rules.md "Actions"). */
export const IDEMPOTENCY_WINDOW_MS = 24 * 60 * 60 * 1000;

/** JSON with object keys sorted, so the same request always hashes the same. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

export interface IdempotencyScope {
  workspaceId: string;
  principal: string;
  key: string;
}

/** The hash a key's record keeps of the request it answered. */
export function requestHash(request: unknown): string {
  return createHash('sha256').update(canonical(request)).digest('hex');
}

/**
 * The first answer under this key within the window, to replay; undefined when there is none.
 * The same key with another request is `idempotency_key_reused`.
 */
export async function previousAnswer<T>(db: Queryable, scope: IdempotencyScope, hash: string, now: number): Promise<T | undefined> {
  const previous = await findIdempotent(db, scope, now - IDEMPOTENCY_WINDOW_MS);
  if (!previous) return undefined;
  if (previous.requestHash !== hash) {
    throw new DomainError('idempotency_key_reused', 'This idempotency key was used with a different request in the last 24 hours.');
  }
  return JSON.parse(previous.response) as T;
}

/**
 * Runs `create` once per key: the same key and request within the window replays the first
 * answer and creates nothing; the same key with another request is `idempotency_key_reused`.
 * Call inside the transaction that creates the actions, so the record and the actions
 * commit together or not at all.
 */
export async function once<T>(
  tx: Queryable,
  scope: IdempotencyScope | null,
  request: unknown,
  now: number,
  create: () => Promise<T>,
): Promise<{ value: T; replayed: boolean }> {
  if (!scope) return { value: await create(), replayed: false };
  const hash = requestHash(request);
  const previous = await previousAnswer<T>(tx, scope, hash, now);
  if (previous !== undefined) return { value: previous, replayed: true };
  const value = await create();
  await saveIdempotent(tx, scope, { requestHash: hash, response: JSON.stringify(value), createdAt: now }, now - IDEMPOTENCY_WINDOW_MS);
  return { value, replayed: false };
}

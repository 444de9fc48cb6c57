import { createHash } from 'node:crypto';
import { findIdempotent, saveIdempotent } from '../store/idempotency.js';
import type { Queryable } from '../store/driver.js';
import { DomainError } from './errors.js';

/** Keys replay for 24 hours (docs/rules.md "Actions"). */
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
  const requestHash = createHash('sha256').update(canonical(request)).digest('hex');
  const previous = await findIdempotent(tx, scope, now - IDEMPOTENCY_WINDOW_MS);
  if (previous) {
    if (previous.requestHash !== requestHash) {
      throw new DomainError('idempotency_key_reused', 'This idempotency key was used with a different request in the last 24 hours.');
    }
    return { value: JSON.parse(previous.response) as T, replayed: true };
  }
  const value = await create();
  await saveIdempotent(tx, scope, { requestHash, response: JSON.stringify(value), createdAt: now });
  return { value, replayed: false };
}

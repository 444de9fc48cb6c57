import { z } from 'zod';
import type { PageKey, PageQuery } from '../store/paging.js';
import type { ErrorIssue } from './errors.js';

export type { PageKey, PageQuery };

/** A list's page size when the caller names none, and the most it may ask for. */
export const PAGE_DEFAULT = 100;
export const PAGE_MAX = 1000;

/** One part of a list's sort key, as the cursor carries it. */
export type KeyPart = 'number' | 'string';

/** The paging fields every list operation takes besides its own input. */
export const pageFields = z.strictObject({
  limit: z.coerce.number().int().min(1).max(PAGE_MAX).optional().describe(`Items per page, 1 to ${PAGE_MAX}; ${PAGE_DEFAULT} unless given.`),
  cursor: z.string().min(1).max(1024).optional().describe('Opaque: the `cursor` of the previous answer\'s `Link: <…>; rel="next"` header.'),
});

/**
 * A cursor is base64url of JSON `[operation, workspace, ...key]`: the key of the last item
 * served, scoped to the list and workspace that served it. It carries nothing the holder did
 * not already receive, and a cursor of another list or workspace is refused rather than read,
 * so it can position a caller only inside its own list.
 */
export function encodeCursor(operation: string, workspaceId: string, key: PageKey): string {
  return Buffer.from(JSON.stringify([operation, workspaceId, ...key])).toString('base64url');
}

/** The key a cursor names, or the issue at `cursor` that refuses it. */
export function decodeCursor(cursor: string, operation: string, workspaceId: string, shape: readonly KeyPart[]): PageKey | ErrorIssue {
  const refused = (message: string): ErrorIssue => ({ path: 'cursor', message });
  let parts: unknown;
  try {
    parts = /^[A-Za-z0-9_-]+$/.test(cursor) ? JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) : undefined;
  } catch {
    parts = undefined;
  }
  if (!Array.isArray(parts)) return refused('not a cursor this service issued');
  const [list, workspace, ...key] = parts as unknown[];
  if (list !== operation || workspace !== workspaceId) return refused('a cursor of another list');
  if (key.length !== shape.length || key.some((part, i) => typeof part !== shape[i])) return refused('not a cursor this service issued');
  return key as PageKey;
}

/** What a list operation answers: its items and, when more follow, the key to continue after. */
export interface Page<T> {
  items: T;
  next: PageKey | null;
}

/** The sort keys the lists page by (src/store/paging.ts): `(created_at, id)`, `(created_at, rowid)`, and a function's `(device created_at, device id, position)`. */
export const NEWEST_FIRST_KEY: readonly KeyPart[] = ['number', 'string'];
export const ROW_ORDER_KEY: readonly KeyPart[] = ['number', 'number'];
export const FUNCTION_KEY: readonly KeyPart[] = ['number', 'string', 'number'];

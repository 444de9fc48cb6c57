/** Reading many actions: one principal's newest, the owner's filtered history, the approvals inbox and the export. */
import type { ActionStatus } from '../domain/action-states.js';
import { COLUMNS, statusIn, type ActionRow } from './actions.js';
import type { Queryable } from './driver.js';
import { cutPage, type PageKey, type PageQuery, type RowsPage } from './paging.js';

/** The newest actions one principal requested. */
export function recentActionsOf(db: Queryable, workspaceId: string, principal: string, limit: number): Promise<ActionRow[]> {
  return db.all<ActionRow>(`SELECT ${COLUMNS} FROM actions WHERE workspace_id = ? AND principal = ? ORDER BY created_at DESC, rowid DESC LIMIT ?`, [
    workspaceId,
    principal,
    limit,
  ]);
}

/** What the owner's history list narrows to; each field left null keeps every action. */
export interface ActionFilter {
  status: ActionStatus | null;
  deviceId: string | null;
  principal: string | null;
  capability: string | null;
  /** Created at or after (Unix ms). */
  since: number | null;
  /** Created before (Unix ms). */
  until: number | null;
}

export const NO_ACTION_FILTER: ActionFilter = { status: null, deviceId: null, principal: null, capability: null, since: null, until: null };

/**
 * The newest actions first, a page of them (src/store/paging.ts), keyed by `(created_at, rowid)`
 * as `actions_history` holds them; only those the filter keeps. The page is cut after the
 * filter, in SQL, so a narrow filter still fills pages with matches from the whole history.
 */
export async function recentActions(
  db: Queryable,
  workspaceId: string,
  page: PageQuery,
  filter: ActionFilter = NO_ACTION_FILTER,
): Promise<RowsPage<ActionRow>> {
  // The status is one of the table's constants, written into the SQL so that
  // `awaiting_approval` (the owner's inbox) walks its partial index actions_awaiting_by_workspace.
  const where = [filter.status === null ? '' : `AND ${statusIn([filter.status])}`];
  const args: (string | number)[] = [workspaceId];
  const keep = (condition: string, value: string | number | null) => {
    if (value === null) return;
    where.push(condition);
    args.push(value);
  };
  keep('AND device_id = ?', filter.deviceId);
  keep('AND principal = ?', filter.principal);
  keep('AND capability = ?', filter.capability);
  keep('AND created_at >= ?', filter.since);
  keep('AND created_at < ?', filter.until);
  if (page.after) where.push('AND (created_at, rowid) < (?, ?)');
  const rows = await db.all<ActionRow & { position: number }>(
    `SELECT ${COLUMNS}, rowid AS position FROM actions WHERE workspace_id = ? ${where.join(' ')} ORDER BY created_at DESC, rowid DESC LIMIT ?`,
    [...args, ...(page.after ?? []), page.limit + 1],
  );
  return cutPage(rows, page.limit, (row) => [row.createdAt, row.position], withoutPosition);
}

/**
 * One page of the owner's approvals inbox, oldest first (the window that ends soonest on top):
 * the `limit` waiting actions after the key `after`, or, reading backwards, the `limit`
 * before the key `before`. `more` says whether the inbox goes on past the page's far end in
 * the direction read, `total` how many wait in all. Keyset, not OFFSET: an action decided
 * meanwhile shifts no page.
 */
export async function awaitingApprovals(
  db: Queryable,
  workspaceId: string,
  page: { limit: number; after: PageKey | null; before: PageKey | null },
): Promise<{ rows: (ActionRow & { position: number })[]; more: boolean; total: number }> {
  const backwards = page.before !== null;
  const key = page.before ?? page.after;
  const rows = await db.all<ActionRow & { position: number }>(
    `SELECT ${COLUMNS}, rowid AS position FROM actions WHERE workspace_id = ? AND ${statusIn(['awaiting_approval'])}
       ${key ? `AND (created_at, rowid) ${backwards ? '<' : '>'} (?, ?)` : ''}
     ORDER BY created_at ${backwards ? 'DESC' : ''}, rowid ${backwards ? 'DESC' : ''} LIMIT ?`,
    [workspaceId, ...(key ?? []), page.limit + 1],
  );
  const counted = await db.get<{ total: number }>(`SELECT count(*) AS total FROM actions WHERE workspace_id = ? AND ${statusIn(['awaiting_approval'])}`, [
    workspaceId,
  ]);
  const more = rows.length > page.limit;
  const kept = rows.slice(0, page.limit);
  return { rows: backwards ? kept.reverse() : kept, more, total: counted?.total ?? 0 };
}

function withoutPosition({ position: _position, ...row }: ActionRow & { position: number }): ActionRow {
  return row;
}

/**
 * One batch of the export, oldest first, created in [since, until): the same keyset walk
 * over `actions_history`, so the export reads the history in bounded batches however long it is.
 */
export async function exportActions(
  db: Queryable,
  workspaceId: string,
  range: { since: number | null; until: number },
  page: PageQuery,
): Promise<RowsPage<ActionRow>> {
  const rows = await db.all<ActionRow & { position: number }>(
    `SELECT ${COLUMNS}, rowid AS position FROM actions WHERE workspace_id = ? AND (? IS NULL OR created_at >= ?) AND created_at < ?
       ${page.after ? 'AND (created_at, rowid) > (?, ?)' : ''}
     ORDER BY created_at, rowid LIMIT ?`,
    [workspaceId, range.since, range.since, range.until, ...(page.after ?? []), page.limit + 1],
  );
  return cutPage(rows, page.limit, (row) => [row.createdAt, row.position], withoutPosition);
}

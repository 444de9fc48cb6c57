import type { Queryable } from './driver.js';

/**
 * The workspace event journal (migrations 0016 and 0022): rows written by triggers in the transaction
 * of the change they report, or by `appendWorkspaceEvent` for what no write reveals (a device
 * going quiet). `data` is a JSON snapshot in the store's column names: an `ActionRow` for
 * `action.*` and `approval.*`, the grant's or device's columns otherwise.
 */
export interface WorkspaceEventRow {
  id: number;
  workspaceId: string;
  type: string;
  subjectId: string;
  data: string;
  createdAt: number;
}

const COLUMNS = 'id, workspace_id AS workspaceId, type, subject_id AS subjectId, data, created_at AS createdAt';

/** One workspace's events after `afterId`, oldest first: the replay behind `Last-Event-ID`. */
export function listWorkspaceEvents(db: Queryable, workspaceId: string, afterId: number, limit: number): Promise<WorkspaceEventRow[]> {
  return db.all<WorkspaceEventRow>(`SELECT ${COLUMNS} FROM workspace_events WHERE workspace_id = ? AND id > ? ORDER BY id LIMIT ?`, [
    workspaceId,
    afterId,
    limit,
  ]);
}

/**
 * The journal's kept range across the service: `first`, its oldest kept event (one past `last`
 * when pruning emptied it), and `last`, the newest id ever given (0 before the first event).
 * A resumption after an id below `first - 1` has lost the pruned events in between.
 *
 * Ids are the rowid (max(id) + 1, migration 0022). Pruning never lowers max(id): deleting the
 * newest row leaves a tombstone in its place (workspace id '', read by no one), so `last` is
 * max(id) and `first` the oldest row that is not a tombstone, read in rowid order (a
 * tombstone older than a kept event is at most the first row: the next pruning deletes it).
 */
export async function journalBounds(db: Queryable): Promise<{ first: number; last: number }> {
  const row = await db.get<{ first: number | null; last: number | null }>(
    `SELECT (SELECT id FROM workspace_events WHERE workspace_id <> '' ORDER BY id LIMIT 1) AS first, (SELECT max(id) FROM workspace_events) AS last`,
  );
  const last = row?.last ?? 0;
  return { first: row?.first ?? last + 1, last };
}

/** The workspace's newest kept event at or before `atMost`, or undefined when it has none kept. */
export async function newestWorkspaceEventId(db: Queryable, workspaceId: string, atMost: number): Promise<number | undefined> {
  const row = await db.get<{ id: number | null }>('SELECT max(id) AS id FROM workspace_events WHERE workspace_id = ? AND id <= ?', [workspaceId, atMost]);
  return row?.id ?? undefined;
}

/** Records an event no row change reveals (e.g. a device going offline), with the service's clock. */
export async function appendWorkspaceEvent(
  db: Queryable,
  event: { workspaceId: string; type: string; subjectId: string; data: unknown; createdAt: number },
): Promise<number> {
  const row = await db.get<{ id: number }>(
    'INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at) VALUES (?, ?, ?, ?, ?) RETURNING id',
    [event.workspaceId, event.type, event.subjectId, JSON.stringify(event.data), event.createdAt],
  );
  return row!.id;
}

/** The last journal id shown as a plain number, before ids were encrypted (migration 0025). */
export async function legacyEventIdLimit(db: Queryable): Promise<number> {
  return (await db.get<{ lastId: number }>('SELECT last_id AS lastId FROM legacy_event_ids'))?.lastId ?? 0;
}

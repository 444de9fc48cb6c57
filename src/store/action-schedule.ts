/** Scheduled actions becoming due (docs/agents/actions.md "Scheduling"): the `due` move and the read that finds them. */
import { COLUMNS, guard, type ActionRow } from './actions.js';
import type { Queryable } from './driver.js';
import { refusal } from './action-refusal.js';

/**
 * The scheduled actions due at `now`, earliest first, at most `limit`: one read over the
 * partial index actions_scheduled_by_due, however many wait for a later time.
 */
export function dueScheduled(db: Queryable, now: number, limit: number): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `SELECT ${COLUMNS} FROM actions INDEXED BY actions_scheduled_by_due
     WHERE ${guard('due')} AND not_before <= ? ORDER BY not_before LIMIT ?`,
    [now, limit],
  );
}

/**
 * When the earliest scheduled action becomes due; undefined when none waits. The first entry of
 * the partial index actions_scheduled_by_due: one step however many wait.
 */
export async function nextDueAt(db: Queryable): Promise<number | undefined> {
  const row = await db.get<{ at: number }>(
    `SELECT not_before AS at FROM actions INDEXED BY actions_scheduled_by_due WHERE ${guard('due')} ORDER BY not_before LIMIT 1`,
  );
  return row?.at;
}

/**
 * scheduled → queued, or awaiting_approval when it must wait for the owner (requested under an
 * approval mode, with no yes given), only while the permission it was requested under still
 * holds as the statement runs (the same `refusal` the hand-out checks). A waiting one's deadline
 * becomes its approval window (`approval_expires_at`, set at creation from `notBefore`).
 * `allowedUntil` is the end of its grant's schedule window for one that is queued. One guarded
 * UPDATE: of two instances promoting the same action, one matches. Undefined when it was no longer
 * scheduled, not yet due, or refused.
 */
export function promoteScheduled(db: Queryable, workspaceId: string, id: string, allowedUntil: number | null, now: number): Promise<ActionRow | undefined> {
  const waits = `a.approval <> 'none' AND a.decided_at IS NULL`;
  return db.get<ActionRow>(
    `UPDATE actions AS a SET
       status = CASE WHEN ${waits} THEN '${'awaiting_approval' satisfies ActionRow['status']}' ELSE '${'queued' satisfies ActionRow['status']}' END,
       expires_at = CASE WHEN ${waits} THEN coalesce(a.approval_expires_at, a.expires_at) ELSE a.expires_at END,
       allowed_until = CASE WHEN ${waits} THEN NULL ELSE ?2 END
     WHERE a.workspace_id = ?3 AND a.id = ?4 AND ${guard('due')} AND a.not_before <= ?1 AND ${refusal('a', '?1')} IS NULL
     RETURNING ${COLUMNS}`,
    [now, allowedUntil, workspaceId, id],
  );
}

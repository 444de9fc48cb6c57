/** The device's side: handing out the next command, skipping and cancelling refused ones, and storing its result. */
import { COLUMNS, QUEUED_ONLY, enter, guard, markable, type ActionRow, type Destination } from './actions.js';
import { refusal } from './action-refusal.js';
import type { Queryable } from './driver.js';

/** The action's workspace has not paused device control: its commands may be handed out. */
const CONTROLS_RUNNING = 'NOT EXISTS (SELECT 1 FROM workspaces w WHERE w.id = actions.workspace_id AND w.controls_paused_at IS NOT NULL)';

/**
 * Hands the oldest queued, unexpired command for a device (and, for a gateway, its
 * children: they share the gateway as target) that may still run (`refusal` is NULL at this
 * moment) to exactly one caller. One guarded UPDATE: a SELECT-then-UPDATE pair handed the
 * same command to two pollers thousands of times in a measured run (docs/performance.md
 * "Storage facts the code relies on"). `skippedOlder` says whether older queued commands were
 * passed over (they may not run): only then is `cancelRefused` worth a statement. The owner's
 * pause is part of the guard, so no read before it is needed, and a pause that commits at any
 * moment before this UPDATE holds the command.
 */
export async function claimNext(db: Queryable, targetId: string, now: number): Promise<{ row: ActionRow; skippedOlder: boolean } | undefined> {
  const claimed = await db.get<ActionRow & { skippedOlder: number }>(
    `UPDATE actions SET ${enter('claim', 'received')}, dispatched_at = ?1
     WHERE id = (SELECT id FROM actions a WHERE target_id = ?2 AND ${guard('claim')} AND expires_at > ?1 AND ${refusal('a', '?1')} IS NULL
                 ORDER BY created_at, rowid LIMIT 1)
       AND ${guard('claim')}
       AND ${CONTROLS_RUNNING}
     RETURNING ${COLUMNS}, EXISTS (SELECT 1 FROM actions b WHERE b.target_id = ?2 AND b.${guard('claim')} AND b.expires_at > ?1
       AND (b.created_at, b.rowid) < (actions.created_at, actions.rowid)) AS skippedOlder`,
    [now, targetId],
  );
  if (!claimed) return undefined;
  const { skippedOlder, ...row } = claimed;
  return { row, skippedOlder: skippedOlder === 1 };
}

/**
 * Whether a target has queued, unexpired commands in a workspace whose owner has not paused
 * device control: after a `claimNext` that found none, they are all refused. While paused they
 * are held, not refused, so none is reported and nothing is cancelled.
 */
export async function hasQueued(db: Queryable, targetId: string, now: number): Promise<boolean> {
  const row = await db.get<{ one: number }>(
    `SELECT 1 AS one FROM actions WHERE target_id = ? AND ${guard('claim')} AND expires_at > ?
       AND ${CONTROLS_RUNNING} LIMIT 1`,
    [targetId, now],
  );
  return row !== undefined;
}

/**
 * The oldest queued, unexpired command of each target in the workspace: one per device that
 * holds work, to wake it when device control resumes (src/domain/device-controls.ts).
 */
export function oldestQueuedPerTarget(db: Queryable, workspaceId: string, now: number): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `SELECT ${COLUMNS} FROM actions a WHERE a.workspace_id = ?1 AND ${guard('claim')} AND a.expires_at > ?2
       AND a.id = (SELECT b.id FROM actions b WHERE b.target_id = a.target_id AND b.status = a.status AND b.expires_at > ?2 ORDER BY b.created_at, b.id LIMIT 1)`,
    [workspaceId, now],
  );
}

/**
 * Cancels a target's queued, unexpired commands that may no longer run, each with its
 * reason, created at or before `upTo` (the command `claimNext` just handed out; null for
 * all): what the same `next` skipped over (docs/reference/rules.md "Actions").
 */
export function cancelRefused(db: Queryable, targetId: string, upTo: number | null, now: number): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `UPDATE actions AS a SET ${enter('cancel', 'cancelled')}, completed_at = ?1, cancel_reason = ${refusal('a', '?1')}
     WHERE target_id = ?2 AND ${QUEUED_ONLY} AND expires_at > ?1 AND (?3 IS NULL OR created_at <= ?3) AND ${refusal('a', '?1')} IS NOT NULL
     RETURNING ${COLUMNS}`,
    [now, targetId, upTo],
  );
}

/** received → succeeded | failed, only before the deadline and only for the fetching device. */
export async function completeAction(
  db: Queryable,
  report: { id: string; targetId: string; ok: boolean; result: string | null; errorCode: string | null; errorMessage: string | null },
  now: number,
): Promise<{ row: ActionRow; isRead: boolean } | undefined> {
  const status: Destination<'complete'> = report.ok ? 'succeeded' : 'failed';
  // isRead: whether the action's function is a read one, so its result is a last-known value (migration 0034).
  const answer = await db.get<ActionRow & { isRead: number | null }>(
    `UPDATE actions SET status = ?, completed_at = ?, result = ?, error_code = ?, error_message = ?
     WHERE id = ? AND target_id = ? AND ${guard('complete')} AND expires_at > ?
     RETURNING ${COLUMNS}, (SELECT c.kind = 'read' FROM capabilities c WHERE c.device_id = actions.device_id AND c.name = actions.capability) AS isRead`,
    [status, now, report.result, report.errorCode, report.errorMessage, report.id, report.targetId, now],
  );
  if (!answer) return undefined;
  const { isRead, ...row } = answer;
  return { row, isRead: isRead === 1 };
}

/** The handed-out, unexpired commands of a target that were recalled: a wake socket opening is told them again. */
export function recalledFor(db: Queryable, targetId: string, now: number): Promise<ActionRow[]> {
  // The terms repeat index actions_recalled_by_target's WHERE, so SQLite uses it.
  return db.all<ActionRow>(
    `SELECT ${COLUMNS} FROM actions WHERE target_id = ? AND cancel_requested_at IS NOT NULL AND ${markable('recall')} AND expires_at > ?`,
    [targetId, now],
  );
}

/**
 * A result that arrived after the deadline of a command the device had fetched: stored on the
 * `expired` action with the time it arrived, once (the `reportLate` mark). The status stays
 * `expired`; the result says what physically happened (docs/reference/rules.md "Actions").
 */
export function reportLate(
  db: Queryable,
  report: { id: string; targetId: string; result: string | null; errorCode: string | null; errorMessage: string | null },
  now: number,
): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions SET reported_late_at = ?, result = ?, error_code = ?, error_message = ?
     WHERE id = ? AND target_id = ? AND ${markable('reportLate')} AND dispatched_at IS NOT NULL AND reported_late_at IS NULL
     RETURNING ${COLUMNS}`,
    [now, report.result, report.errorCode, report.errorMessage, report.id, report.targetId],
  );
}

export function findTargetedAction(db: Queryable, targetId: string, id: string): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(`SELECT ${COLUMNS} FROM actions WHERE target_id = ? AND id = ?`, [targetId, id]);
}

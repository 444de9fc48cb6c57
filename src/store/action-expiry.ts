import type { ExpiredReason } from '../domain/action-states.js';
import { COLUMNS, enter, guard, statusIn, type ActionRow } from './actions.js';
import type { Queryable } from './driver.js';

/**
 * awaiting_approval | queued | received past the deadline → expired, stamped with the deadline
 * itself and why (`expired_reason`). Run on
 * read and by the periodic sweep, so history is true even for a device that never calls.
 * `workspaceId` / `id` narrow it; null means all.
 */
export function expireDue(db: Queryable, now: number, scope: { workspaceId?: string; id?: string } = {}): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    // A waiting action's `expires_at` is its approval window: it ends `approval_timeout`.
    `UPDATE actions SET ${enter('expire', 'expired')}, completed_at = expires_at,
       expired_reason = CASE WHEN ${statusIn(['awaiting_approval'])} THEN '${'approval_timeout' satisfies ExpiredReason}' ELSE '${'deadline' satisfies ExpiredReason}' END
     WHERE ${guard('expire')} AND expires_at <= ?
       AND (? IS NULL OR workspace_id = ?) AND (? IS NULL OR id = ?)
     RETURNING ${COLUMNS}`,
    [now, scope.workspaceId ?? null, scope.workspaceId ?? null, scope.id ?? null, scope.id ?? null],
  );
}

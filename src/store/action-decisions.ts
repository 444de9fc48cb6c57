/** The owner's (or the confirming user's) decision on a waiting action: approve, reject, or end it when its permission is gone. */
import { COLUMNS, enter, guard, type ActionRow } from './actions.js';
import { refusal } from './action-refusal.js';
import type { Queryable } from './driver.js';

/**
 * awaiting_approval → queued (docs/reference/rules.md "Approvals"): only inside the approval window and
 * while the permission it was requested under still holds (the `refusal` the hand-out checks).
 * The execution deadline starts now. Undefined when nothing matched: the caller tells why.
 */
export function approveAction(
  db: Queryable,
  decision: { workspaceId: string; id: string; decidedBy: string; reason: string | null; allowedUntil?: number | null },
  now: number,
): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions AS a SET ${enter('approve', 'queued')}, expires_at = ?1 + COALESCE(ttl_seconds, 30) * 1000, decided_by = ?2, decided_at = ?1,
       decision_reason = ?3, allowed_until = ?6
     WHERE workspace_id = ?4 AND id = ?5 AND ${guard('approve')} AND expires_at > ?1 AND ${refusal('a', '?1')} IS NULL
     RETURNING ${COLUMNS}`,
    [now, decision.decidedBy, decision.reason, decision.workspaceId, decision.id, decision.allowedUntil ?? null],
  );
}

/** awaiting_approval → rejected, with who said no, when and why. */
export function rejectAction(
  db: Queryable,
  decision: { workspaceId: string; id: string; decidedBy: string; reason: string | null },
  now: number,
): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions SET ${enter('reject', 'rejected')}, completed_at = ?1, decided_by = ?2, decided_at = ?1, decision_reason = ?3
     WHERE workspace_id = ?4 AND id = ?5 AND ${guard('reject')}
     RETURNING ${COLUMNS}`,
    [now, decision.decidedBy, decision.reason, decision.workspaceId, decision.id],
  );
}

/**
 * Cancels one waiting or queued action whose permission no longer holds, with the reason
 * (an approval that found it refused: docs/reference/rules.md "Approvals"); undefined while it may run.
 */
export function cancelIfRefused(db: Queryable, workspaceId: string, id: string, now: number): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions AS a SET ${enter('cancel', 'cancelled')}, completed_at = ?1, cancel_reason = ${refusal('a', '?1')}
     WHERE workspace_id = ?2 AND id = ?3 AND ${guard('cancel')} AND ${refusal('a', '?1')} IS NOT NULL
     RETURNING ${COLUMNS}`,
    [now, workspaceId, id],
  );
}

/**
 * Cancels one waiting or queued action with a reason the domain found (its grant's conditions
 * no longer allow it: docs/owners/grants.md "Conditions"); undefined when it was no longer waiting or queued.
 */
export function cancelForConditions(
  db: Queryable,
  workspaceId: string,
  id: string,
  reason: 'outside_schedule' | 'conditions_changed',
  now: number,
): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions SET ${enter('cancel', 'cancelled')}, completed_at = ?1, cancel_reason = ?2
     WHERE workspace_id = ?3 AND id = ?4 AND ${guard('cancel')}
     RETURNING ${COLUMNS}`,
    [now, reason, workspaceId, id],
  );
}

/** The waiting and queued actions of one principal on one device function: what a change of its grant's conditions is checked against. */
export function pendingForFunction(
  db: Queryable,
  scope: { workspaceId: string; principal: string; deviceId: string; capability: string },
  now: number,
): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `SELECT ${COLUMNS} FROM actions
     WHERE workspace_id = ? AND principal = ? AND device_id = ? AND capability = ? AND ${guard('cancel')} AND expires_at > ?`,
    [scope.workspaceId, scope.principal, scope.deviceId, scope.capability, now],
  );
}

/** Cancels of queued commands and recalls of handed-out ones: by the requester, the owner, or a withdrawn permission. */
import { TRANSITIONS, type CancelReason } from '../domain/action-states.js';
import { BY_TARGET, CANCELLED, COLUMNS, PENDING_BY_DEVICE, eachStatus, enter, guard, markable, statusIn, type ActionRow } from './actions.js';
import { refusal } from './action-refusal.js';
import type { Queryable } from './driver.js';

/** Which actions a withdrawal looks at: a workspace's, narrowed to a principal, a connection or a device (and its children). */
export interface WithdrawalScope {
  workspaceId: string;
  principal?: string;
  connectionId?: string;
  deviceId?: string;
}

function scoped(scope: WithdrawalScope): { sql: string; args: (string | null)[] } {
  return {
    sql: `workspace_id = ? AND (? IS NULL OR principal = ?) AND (? IS NULL OR connection_id = ?) AND (? IS NULL OR target_id = ? OR device_id = ?)`,
    args: [
      scope.workspaceId,
      scope.principal ?? null,
      scope.principal ?? null,
      scope.connectionId ?? null,
      scope.connectionId ?? null,
      scope.deviceId ?? null,
      scope.deviceId ?? null,
      scope.deviceId ?? null,
    ],
  };
}

/**
 * After a revocation, in its transaction: cancels the queued commands in `scope` that may no
 * longer run, each with its reason (docs/reference/rules.md "Actions"). The same refusal `next` checks,
 * so the eager cancel and the hand-out agree.
 */
export function cancelWithdrawn(db: Queryable, scope: WithdrawalScope, now: number): Promise<ActionRow[]> {
  const where = scoped(scope);
  // Waiting actions too (docs/reference/rules.md "Approvals"): a revocation while the owner decides ends them.
  return eachStatus(TRANSITIONS.cancel.from, (status) =>
    db.all<ActionRow>(
      // ?1 is `now` wherever it appears; the scope's plain `?` placeholders number on from 2.
      `UPDATE actions AS a SET ${enter('cancel', 'cancelled')}, completed_at = ?1, cancel_reason = ${refusal('a', '?1')}
       WHERE ${statusIn([status])} AND ${where.sql} AND ${refusal('a', '?1')} IS NOT NULL
       RETURNING ${COLUMNS}`,
      [now, ...where.args],
    ),
  );
}

/**
 * Recalls the handed-out commands in `scope` (all workspaces when null) that may no longer
 * run: the `recall` mark, once each, with the reason. Run with `cancelWithdrawn` after a
 * revocation, and by the expiry sweep for grants that expired (an expiry is no event).
 */
export function recallWithdrawn(db: Queryable, scope: WithdrawalScope | null, now: number): Promise<ActionRow[]> {
  const where = scope ? scoped(scope) : { sql: '1', args: [] };
  // Only handed-out commands can be recalled: the statement walks index
  // actions_received_by_device, the few commands devices hold now. Left to itself the planner
  // took the scope's `workspace_id = ?` to index actions_history and read the workspace's
  // whole history inside the revocation's write transaction (80 ms per 300,000 actions).
  return db.all<ActionRow>(
    `UPDATE actions AS a INDEXED BY actions_received_by_device SET cancel_requested_at = ?1, cancel_reason = ${refusal('a', '?1')}
     WHERE ${guard('expire')} AND expires_at > ?1 AND ${markable('recall')} AND cancel_requested_at IS NULL AND ${where.sql}
       AND ${refusal('a', '?1')} IS NOT NULL
     RETURNING ${COLUMNS}`,
    [now, ...where.args],
  );
}

/** queued → cancelled; `principal` limits it to the requester's own actions. */
export function cancelQueued(
  db: Queryable,
  workspaceId: string,
  id: string,
  principal: string | null,
  reason: CancelReason,
  now: number,
): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions SET ${CANCELLED}
     WHERE workspace_id = ? AND id = ? AND ${guard('cancel')} AND (? IS NULL OR principal = ?)
     RETURNING ${COLUMNS}`,
    [now, reason, workspaceId, id, principal, principal],
  );
}

/**
 * Asks the device holding a handed-out command to stop it: marks a `received` action, once,
 * with when and why. The status stays `received`: the device may already have acted, and
 * whatever it reports is stored (docs/reference/rules.md "Actions").
 */
export function requestRecall(db: Queryable, workspaceId: string, id: string, reason: CancelReason, now: number): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions SET cancel_requested_at = ?, cancel_reason = ?
     WHERE workspace_id = ? AND id = ? AND ${markable('recall')} AND cancel_requested_at IS NULL
     RETURNING ${COLUMNS}`,
    [now, reason, workspaceId, id],
  );
}

/**
 * Cancels a principal's queued commands on a gateway's service devices, detached ones
 * included (gateway grant replacement without includeServices, spec rule 5).
 */
export function cancelQueuedOnServices(db: Queryable, workspaceId: string, principal: string, gatewayId: string, now: number): Promise<ActionRow[]> {
  return eachStatus(TRANSITIONS.cancel.from, (status) =>
    db.all<ActionRow>(
      // By the services' pending commands (a partial index per status), not the principal's whole history.
      `UPDATE actions INDEXED BY ${PENDING_BY_DEVICE[status]} SET ${CANCELLED}
       WHERE workspace_id = ? AND principal = ? AND ${statusIn([status])}
         AND device_id IN (SELECT id FROM devices WHERE workspace_id = ? AND parent_id = ? AND kind = 'service')
       RETURNING ${COLUMNS}`,
      [now, 'gateway_grant_replaced' satisfies CancelReason, workspaceId, principal, workspaceId, gatewayId],
    ),
  );
}

/**
 * Cancels the queued commands of a gateway's children that its latest manifest left out
 * (detached): the gateway no longer runs them, so handing them over would be wrong.
 */
export function cancelQueuedOnDetachedChildren(db: Queryable, workspaceId: string, gatewayId: string, now: number): Promise<ActionRow[]> {
  return eachStatus(BY_TARGET, (status) =>
    db.all<ActionRow>(
      `UPDATE actions SET ${CANCELLED}
       WHERE workspace_id = ? AND target_id = ? AND ${statusIn([status])}
         AND device_id IN (SELECT id FROM devices WHERE workspace_id = ? AND parent_id = ? AND detached_at IS NOT NULL)
       RETURNING ${COLUMNS}`,
      [now, 'device_detached' satisfies CancelReason, workspaceId, gatewayId, workspaceId, gatewayId],
    ),
  );
}

/** Cancels every queued command fetched by a revoked device: nothing can deliver them now. */
export function cancelQueuedForTarget(db: Queryable, workspaceId: string, targetId: string, now: number): Promise<ActionRow[]> {
  return eachStatus(BY_TARGET, (status) =>
    db.all<ActionRow>(
      `UPDATE actions SET ${CANCELLED}
       WHERE workspace_id = ? AND (target_id = ? OR device_id = ?) AND ${statusIn([status])}
       RETURNING ${COLUMNS}`,
      [now, 'device_revoked' satisfies CancelReason, workspaceId, targetId, targetId],
    ),
  );
}

/** The commands for one function of one device, whoever asked for them. */
export interface FunctionOfDevice {
  workspaceId: string;
  deviceId: string;
  capability: string;
}

/**
 * Cancels every queued command for one function of one device: a republish changed or removed
 * it, so none was requested under what is published now (docs/reference/rules.md "Access").
 */
export function cancelQueuedForFunction(db: Queryable, fn: FunctionOfDevice, reason: CancelReason, now: number): Promise<ActionRow[]> {
  return eachStatus(TRANSITIONS.cancel.from, (status) =>
    db.all<ActionRow>(
      `UPDATE actions SET ${CANCELLED}
       WHERE device_id = ? AND ${statusIn([status])} AND workspace_id = ? AND capability = ?
       RETURNING ${COLUMNS}`,
      [now, reason, fn.deviceId, fn.workspaceId, fn.capability],
    ),
  );
}

/** Recalls every handed-out command for one function of one device, once each (same reason as cancelQueuedForFunction). */
export function recallForFunction(db: Queryable, fn: FunctionOfDevice, reason: CancelReason, now: number): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `UPDATE actions SET cancel_requested_at = ?, cancel_reason = ?
     WHERE device_id = ? AND ${markable('recall')} AND workspace_id = ? AND capability = ? AND cancel_requested_at IS NULL
     RETURNING ${COLUMNS}`,
    [now, reason, fn.deviceId, fn.workspaceId, fn.capability],
  );
}

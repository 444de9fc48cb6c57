/** The actions table's row, and the SQL pieces every transition shares: the guards, the moves, the columns read back. */
import { MARKS, TRANSITIONS, type ActionStatus, type CancelReason, type ExpiredReason, type MarkName, type TransitionName } from '../domain/action-states.js';
import type { Queryable } from './driver.js';
import type { ApprovalMode } from './grants.js';

export interface ActionRow {
  id: string;
  workspaceId: string;
  deviceId: string;
  targetId: string;
  capability: string;
  arguments: string;
  status: ActionStatus;
  principal: string;
  broadcastId: string | null;
  createdAt: number;
  expiresAt: number;
  dispatchedAt: number | null;
  completedAt: number | null;
  result: string | null;
  errorCode: string | null;
  errorMessage: string | null;
  /** The agent connection that requested it; null for actions older than migration 0013. */
  connectionId: string | null;
  cancelReason: CancelReason | null;
  /** A handed-out command whose permission was withdrawn: the device was asked to stop. */
  cancelRequestedAt: number | null;
  /** A result that arrived after the deadline, stored beside the `expired` status. */
  reportedLateAt: number | null;
  /** The approval mode it was requested under (docs/reference/rules.md "Approvals"); `none` for actions older than migration 0017. */
  approval: ApprovalMode;
  /** The end of the approval window of an action that had to wait for a yes. */
  approvalExpiresAt: number | null;
  /** The execution deadline asked for, in seconds: an approval starts it. */
  ttlSeconds: number | null;
  /** Who approved or rejected it (the owner's subject, or the principal whose user confirmed), when, and why. */
  decidedBy: string | null;
  decidedAt: number | null;
  decisionReason: string | null;
  expiredReason: ExpiredReason | null;
  /** Until when its grant's schedule allows handing it out (the end of the window it was queued or approved in); null without a schedule. */
  allowedUntil: number | null;
  /** When a scheduled action becomes due (docs/agents/actions.md "Scheduling"); null for one queued at once. */
  notBefore: number | null;
}

export const COLUMNS = `id, workspace_id AS workspaceId, device_id AS deviceId, target_id AS targetId, capability, arguments,
  status, principal, broadcast_id AS broadcastId, created_at AS createdAt, expires_at AS expiresAt,
  dispatched_at AS dispatchedAt, completed_at AS completedAt, result, error_code AS errorCode, error_message AS errorMessage,
  connection_id AS connectionId, cancel_reason AS cancelReason, cancel_requested_at AS cancelRequestedAt, reported_late_at AS reportedLateAt,
  approval, approval_expires_at AS approvalExpiresAt, ttl_seconds AS ttlSeconds, decided_by AS decidedBy, decided_at AS decidedAt,
  decision_reason AS decisionReason, expired_reason AS expiredReason, allowed_until AS allowedUntil, not_before AS notBefore`;

/**
 * The SQL condition "the status is one of `statuses`". The statuses are the state table's
 * constants, never input, so they are written into the SQL text where the query planner
 * can match them against the partial indexes on `status`; one status is written
 * `status = '…'`, the form those indexes name.
 */
export function statusIn(statuses: readonly ActionStatus[]): string {
  const quoted = statuses.map((status) => `'${status}'`);
  return quoted.length === 1 ? `status = ${quoted[0]}` : `status IN (${quoted.join(', ')})`;
}

/**
 * Pending actions (waiting for approval or queued) in the workspace, and those one principal
 * holds on one device, as SQL expressions over the given parameter references: a waiting
 * action holds its place too, so an agent cannot flood the owner's approval inbox. One count
 * per status, each over its partial index. `countQueued` (src/store/capacity.ts) reads them;
 * `insertActionIfAllowed` checks them in the statement that would take the place.
 */
export function pendingCounts(workspaceId: string, deviceId: string, principal: string): { workspace: string; principalOnDevice: string } {
  const count = (where: string, status: 'queued' | 'awaiting_approval') => `(SELECT count(*) FROM actions WHERE ${where} AND ${statusIn([status])})`;
  const inWorkspace = `workspace_id = ${workspaceId}`;
  const onDevice = `device_id = ${deviceId} AND principal = ${principal}`;
  return {
    workspace: `${count(inWorkspace, 'queued')} + ${count(inWorkspace, 'awaiting_approval')}`,
    principalOnDevice: `${count(onDevice, 'queued')} + ${count(onDevice, 'awaiting_approval')}`,
  };
}

/** Scheduled actions (not yet due) in the workspace, as an SQL expression over the given parameter reference: one count over its partial index. */
export function scheduledCount(workspaceId: string): string {
  return `(SELECT count(*) FROM actions WHERE workspace_id = ${workspaceId} AND ${statusIn(['scheduled'])})`;
}

/** The guard of a move: the action is in a status the move leaves, so of two racing moves only one matches. */
export function guard(move: TransitionName): string {
  return statusIn(TRANSITIONS[move].from);
}

/** The guard of a mark: the action is in a status it applies in (the caller adds "not made before"). */
export function markable(mark: MarkName): string {
  return statusIn(MARKS[mark].on);
}

export type Destination<M extends TransitionName> = (typeof TRANSITIONS)[M]['to'][number];

/** The SET of a move into `status`; naming the move lets the compiler check that `status` is one of its destinations. */
export function enter<M extends TransitionName>(_move: M, status: Destination<M>): string {
  return `status = '${status}'`;
}

/**
 * Runs one statement per status the caller lists and returns every row they changed. SQLite
 * uses a partial index only for a query that names its status exactly (migration 0009), so
 * a withdrawal that leaves both `awaiting_approval` and `queued` walks each one's partial index
 * instead of the workspace's whole history.
 */
export async function eachStatus(statuses: readonly ActionStatus[], statement: (status: ActionStatus) => Promise<ActionRow[]>): Promise<ActionRow[]> {
  const rows: ActionRow[] = [];
  for (const status of statuses) rows.push(...(await statement(status)));
  return rows;
}

/** The partial index holding one pending status's actions by device and principal (migrations 0014, 0017). */
export const PENDING_BY_DEVICE: Partial<Record<ActionStatus, string>> = {
  scheduled: 'actions_scheduled_by_device',
  queued: 'actions_queued_by_device',
  awaiting_approval: 'actions_awaiting_by_device',
};

export function getAction(db: Queryable, workspaceId: string, id: string): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(`SELECT ${COLUMNS} FROM actions WHERE workspace_id = ? AND id = ?`, [workspaceId, id]);
}

/** The SET of a cancel: the status, when, and why (docs/reference/rules.md "Actions"). */
export const CANCELLED = `${enter('cancel', 'cancelled')}, completed_at = ?, cancel_reason = ?`;

/**
 * The guard of the cancels that look at a device's queue, by the device that fetches it:
 * queued commands only. A waiting action is not in that queue (no index holds it by target),
 * and its approval re-checks the same permission (`approveAction`), so none is left to run.
 */
export const QUEUED_ONLY = statusIn(['queued' satisfies (typeof TRANSITIONS.cancel.from)[number]]);

/**
 * The statuses a device's withdrawal cancels by the device that fetches it: queued commands, and
 * scheduled ones, which would be queued for it (each over its partial index by target).
 */
export const BY_TARGET = ['scheduled', 'queued'] as const satisfies readonly (typeof TRANSITIONS.cancel.from)[number][];

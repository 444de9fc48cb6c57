/* eslint-disable max-lines -- the actions table's guarded transitions and reads, one repo file per table group; edited in parallel, to be split by transition after that */
import {
  MARKS,
  TRANSITIONS,
  type ActionStatus,
  type CancelReason,
  type ExpiredReason,
  type InitialStatus,
  type MarkName,
  type TransitionName,
} from '../domain/action-states.js';
import type { Queryable, SqlValue, Statement } from './driver.js';
import { ownsKey } from './idempotency.js';
import { approvalRank, grantMatchesFunction, type ApprovalMode } from './grants.js';
import { cutPage, type PageKey, type PageQuery, type RowsPage } from './paging.js';
import { STORAGE_BUDGETS, storageRoom, type StorageBudget, type StorageLimits } from './usage.js';

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
}

const COLUMNS = `id, workspace_id AS workspaceId, device_id AS deviceId, target_id AS targetId, capability, arguments,
  status, principal, broadcast_id AS broadcastId, created_at AS createdAt, expires_at AS expiresAt,
  dispatched_at AS dispatchedAt, completed_at AS completedAt, result, error_code AS errorCode, error_message AS errorMessage,
  connection_id AS connectionId, cancel_reason AS cancelReason, cancel_requested_at AS cancelRequestedAt, reported_late_at AS reportedLateAt,
  approval, approval_expires_at AS approvalExpiresAt, ttl_seconds AS ttlSeconds, decided_by AS decidedBy, decided_at AS decidedAt,
  decision_reason AS decisionReason, expired_reason AS expiredReason`;

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

/** The guard of a move: the action is in a status the move leaves, so of two racing moves only one matches. */
function guard(move: TransitionName): string {
  return statusIn(TRANSITIONS[move].from);
}

/** The guard of a mark: the action is in a status it applies in (the caller adds "not made before"). */
function markable(mark: MarkName): string {
  return statusIn(MARKS[mark].on);
}

type Destination<M extends TransitionName> = (typeof TRANSITIONS)[M]['to'][number];

/** The SET of a move into `status`; naming the move lets the compiler check that `status` is one of its destinations. */
function enter<M extends TransitionName>(_move: M, status: Destination<M>): string {
  return `status = '${status}'`;
}

export type NewActionRow = Omit<
  ActionRow,
  | 'status'
  | 'dispatchedAt'
  | 'completedAt'
  | 'result'
  | 'errorCode'
  | 'errorMessage'
  | 'cancelReason'
  | 'cancelRequestedAt'
  | 'reportedLateAt'
  | 'decisionReason'
  | 'expiredReason'
> & {
  /** `awaiting_approval` with `expiresAt` = `approvalExpiresAt` (the window), or `queued` with the execution deadline. */
  status: InitialStatus;
};

/** The columns a new action is created with besides `created_at`, in the order `newActionArgs` gives their values. */
const NEW_ACTION_COLUMNS = [
  'id',
  'workspace_id',
  'device_id',
  'target_id',
  'capability',
  'arguments',
  'status',
  'principal',
  'connection_id',
  'broadcast_id',
  'expires_at',
  'approval',
  'approval_expires_at',
  'ttl_seconds',
  'decided_by',
  'decided_at',
] as const;

function newActionArgs(row: NewActionRow): SqlValue[] {
  return [
    row.id,
    row.workspaceId,
    row.deviceId,
    row.targetId,
    row.capability,
    row.arguments,
    row.status,
    row.principal,
    row.connectionId,
    row.broadcastId,
    row.expiresAt,
    row.approval,
    row.approvalExpiresAt,
    row.ttlSeconds,
    row.decidedBy,
    row.decidedAt,
  ];
}

export async function insertAction(db: Queryable, row: NewActionRow): Promise<ActionRow> {
  return (await db.get<ActionRow>(
    `INSERT INTO actions (${NEW_ACTION_COLUMNS.join(', ')}, created_at) VALUES (${NEW_ACTION_COLUMNS.map(() => '?').join(', ')}, ?) RETURNING ${COLUMNS}`,
    [...newActionArgs(row), row.createdAt],
  ))!;
}

/**
 * Creates the action only if, as the statement runs, it may be created: the device, its
 * gateway, the requesting connection, the function and the principal's grant pass the same
 * `refusal` the hand-out checks (a grant re-given in a stricter approval mode included), and the
 * principal's share of the device's queue and the workspace's queue have room (`limits`).
 * One guarded statement: the caller reads and decides outside any transaction, and on a
 * libSQL server this holds the write lock for one round trip instead of a transaction's
 * seven (docs/performance.md "On a libSQL server (sqld)"). Undefined when a check failed;
 * the caller then finds out which by checking again inside a transaction.
 */
export async function insertActionIfAllowed(db: Queryable, row: NewActionRow, limits: QueueLimits): Promise<ActionRow | undefined> {
  const { sql, args } = guardedActionInsert(row, limits);
  return db.get<ActionRow>(`${sql} RETURNING ${COLUMNS}`, args);
}

export interface QueueLimits {
  perPrincipalOnDevice: number;
  perWorkspace: number;
  /** The workspace's storage budgets (docs/operators/budgets.md): a new action must fit them. */
  storage: StorageLimits;
}

/**
 * The statement of `insertActionIfAllowed`, for a batch (without RETURNING: a batch step that
 * returns rows is left unfinished by the embedded driver's `run`): with `key`, it also creates the action
 * only if the idempotency key holds exactly `response` (the batch claimed it just before,
 * src/store/idempotency.ts), so two requests racing with one key create one action.
 */
export function guardedActionInsert(
  row: NewActionRow,
  limits: QueueLimits,
  key?: { workspaceId: string; principal: string; key: string; response: string },
): Statement {
  const columns = [...NEW_ACTION_COLUMNS, 'created_at', 'dispatched_at'].join(', ');
  const values = NEW_ACTION_COLUMNS.map((_, index) => `?${index + 2}`).join(', ');
  const last = NEW_ACTION_COLUMNS.length + 1;
  const pending = pendingCounts('?3', '?4', '?9');
  const owned = key ? `AND ${ownsKey('?3', '?9', `?${last + 3}`, `?${last + 4}`)}` : '';
  const firstBudget = last + (key ? 5 : 3);
  const budgetRefs = Object.fromEntries(STORAGE_BUDGETS.map((budget, index) => [budget, `?${firstBudget + index}`])) as Record<StorageBudget, string>;
  return {
    sql: `WITH a (${columns}) AS (VALUES (${values}, ?1, NULL))
     INSERT INTO actions (${[...NEW_ACTION_COLUMNS, 'created_at'].join(', ')})
     SELECT ${[...NEW_ACTION_COLUMNS, 'created_at'].join(', ')} FROM a
     WHERE ${refusal('a', '?1')} IS NULL AND ${pending.principalOnDevice} < ?${last + 1} AND ${pending.workspace} < ?${last + 2} ${owned}
       AND ${storageRoom('?3', 'length(CAST(?7 AS BLOB))', budgetRefs)}`,
    args: [
      row.createdAt,
      ...newActionArgs(row),
      limits.perPrincipalOnDevice,
      limits.perWorkspace,
      ...(key ? [key.key, key.response] : []),
      ...STORAGE_BUDGETS.map((budget) => limits.storage[budget]),
    ],
  };
}

/** The row `guardedActionInsert` creates, as the database will hold it: what the request set, nothing happened yet. */
export function newActionRow(row: NewActionRow): ActionRow {
  return {
    ...row,
    dispatchedAt: null,
    completedAt: null,
    result: null,
    errorCode: null,
    errorMessage: null,
    cancelReason: null,
    cancelRequestedAt: null,
    reportedLateAt: null,
    decisionReason: null,
    expiredReason: null,
  };
}

/**
 * Runs one statement per status the caller lists and returns every row they changed. SQLite
 * uses a partial index only for a query that names its status exactly (migration 0009), so
 * a withdrawal that leaves both `awaiting_approval` and `queued` walks each one's partial index
 * instead of the workspace's whole history.
 */
async function eachStatus(statuses: readonly ActionStatus[], statement: (status: ActionStatus) => Promise<ActionRow[]>): Promise<ActionRow[]> {
  const rows: ActionRow[] = [];
  for (const status of statuses) rows.push(...(await statement(status)));
  return rows;
}

/** The partial index holding one pending status's actions by device and principal (migrations 0014, 0017). */
const PENDING_BY_DEVICE: Partial<Record<ActionStatus, string>> = { queued: 'actions_queued_by_device', awaiting_approval: 'actions_awaiting_by_device' };

/**
 * awaiting_approval → queued (docs/reference/rules.md "Approvals"): only inside the approval window and
 * while the permission it was requested under still holds (the `refusal` the hand-out checks).
 * The execution deadline starts now. Undefined when nothing matched: the caller tells why.
 */
export function approveAction(
  db: Queryable,
  decision: { workspaceId: string; id: string; decidedBy: string; reason: string | null },
  now: number,
): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(
    `UPDATE actions AS a SET ${enter('approve', 'queued')}, expires_at = ?1 + COALESCE(ttl_seconds, 30) * 1000, decided_by = ?2, decided_at = ?1,
       decision_reason = ?3
     WHERE workspace_id = ?4 AND id = ?5 AND ${guard('approve')} AND expires_at > ?1 AND ${refusal('a', '?1')} IS NULL
     RETURNING ${COLUMNS}`,
    [now, decision.decidedBy, decision.reason, decision.workspaceId, decision.id],
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

export function getAction(db: Queryable, workspaceId: string, id: string): Promise<ActionRow | undefined> {
  return db.get<ActionRow>(`SELECT ${COLUMNS} FROM actions WHERE workspace_id = ? AND id = ?`, [workspaceId, id]);
}

/**
 * The condition under which the grant `g` no longer fits the function `f` as it is now
 * published, given the requesting connection `c` (docs/reference/rules.md "Access", "Actions":
 * `function_changed`): the grant recorded another kind or argument schema (a grant without
 * that record never fits: COALESCE turns its NULL into a refusal), or a `read` ceiling faces
 * a function that is no longer `read` (a connection's ceiling is only ever raised, so the
 * function's kind changed after the command was requested).
 */
const FUNCTION_CHANGED = `((c.access = 'read' AND f.kind <> 'read') OR NOT COALESCE(${grantMatchesFunction('g', 'f')}, FALSE))`;

/**
 * The grant `g` asks for a stricter yes than the action `a` had, and `a` has not been handed
 * out: the owner re-granted the function in a stricter approval mode (which revokes the grant
 * `a` was requested under) while `a` was queued. The mode is read live like every other
 * permission (docs/reference/rules.md "Approvals"), so `a` may not run without the yes the grant now
 * wants. An action the owner approved (it had an approval window) had the strictest yes.
 */
const stricterGrant = (a: string) =>
  `(${a}.dispatched_at IS NULL AND ${a}.approval_expires_at IS NULL AND ${approvalRank('g.approval')} < ${approvalRank(`${a}.approval`)})`;

/**
 * Why the action `a` (an alias of `actions`) may no longer move its device, or NULL while it
 * may (docs/reference/rules.md "Actions"): the device and its gateway attached and unrevoked, the
 * requesting connection unrevoked and unexpired (its token no longer authenticates: what it
 * asked for ends with it, as with a grant's expiry; actions older than migration 0013 name none: the
 * principal's grant alone decides), the function still published, the principal's grant for
 * it live at `now` (an SQL parameter), and the function still the one it was granted as.
 * One row lookup per table, each by its key; at most one unrevoked grant exists per
 * principal, device and capability (index grants_unrevoked).
 */
function refusal(a: string, now: string): string {
  return `(SELECT CASE
      WHEN d.revoked_at IS NOT NULL OR p.revoked_at IS NOT NULL THEN 'device_revoked'
      WHEN d.detached_at IS NOT NULL THEN 'device_detached'
      WHEN c.revoked_at IS NOT NULL THEN 'principal_revoked'
      WHEN c.expires_at IS NOT NULL AND c.expires_at <= ${now} THEN 'principal_expired'
      WHEN f.name IS NULL THEN 'function_removed'
      WHEN g.id IS NULL THEN 'grant_revoked'
      WHEN g.expires_at IS NOT NULL AND g.expires_at <= ${now} THEN 'grant_expired'
      WHEN ${FUNCTION_CHANGED} THEN 'function_changed'
      WHEN ${stricterGrant(a)} THEN 'grant_revoked'
    END
    FROM devices d
    LEFT JOIN devices p ON p.id = d.parent_id
    LEFT JOIN capabilities f ON f.device_id = d.id AND f.name = ${a}.capability
    LEFT JOIN connections c ON c.id = ${a}.connection_id
    LEFT JOIN grants g ON g.workspace_id = ${a}.workspace_id AND g.principal = ${a}.principal AND g.device_id = ${a}.device_id
      AND g.capability = ${a}.capability AND g.revoked_at IS NULL
    WHERE d.id = ${a}.device_id)`;
}

/**
 * Hands the oldest queued, unexpired command for a device (and, for a gateway, its
 * children: they share the gateway as target) that may still run (`refusal` is NULL at this
 * moment) to exactly one caller. One guarded UPDATE: a SELECT-then-UPDATE pair handed the
 * same command to two pollers thousands of times in a measured run (docs/performance.md
 * "Storage facts the code relies on"). `skippedOlder` says whether older queued commands were
 * passed over (they may not run): only then is `cancelRefused` worth a statement.
 */
export async function claimNext(db: Queryable, targetId: string, now: number): Promise<{ row: ActionRow; skippedOlder: boolean } | undefined> {
  const claimed = await db.get<ActionRow & { skippedOlder: number }>(
    `UPDATE actions SET ${enter('claim', 'received')}, dispatched_at = ?1
     WHERE id = (SELECT id FROM actions a WHERE target_id = ?2 AND ${guard('claim')} AND expires_at > ?1 AND ${refusal('a', '?1')} IS NULL
                 ORDER BY created_at, rowid LIMIT 1)
       AND ${guard('claim')}
     RETURNING ${COLUMNS}, EXISTS (SELECT 1 FROM actions b WHERE b.target_id = ?2 AND b.${guard('claim')} AND b.expires_at > ?1
       AND (b.created_at, b.rowid) < (actions.created_at, actions.rowid)) AS skippedOlder`,
    [now, targetId],
  );
  if (!claimed) return undefined;
  const { skippedOlder, ...row } = claimed;
  return { row, skippedOlder: skippedOlder === 1 };
}

/** Whether a target has queued, unexpired commands: after a `claimNext` that found none, they are all refused. */
export async function hasQueued(db: Queryable, targetId: string, now: number): Promise<boolean> {
  const row = await db.get<{ one: number }>(`SELECT 1 AS one FROM actions WHERE target_id = ? AND ${guard('claim')} AND expires_at > ? LIMIT 1`, [
    targetId,
    now,
  ]);
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

/** received → succeeded | failed, only before the deadline and only for the fetching device. */
export function completeAction(
  db: Queryable,
  report: { id: string; targetId: string; ok: boolean; result: string | null; errorCode: string | null; errorMessage: string | null },
  now: number,
): Promise<ActionRow | undefined> {
  const status: Destination<'complete'> = report.ok ? 'succeeded' : 'failed';
  return db.get<ActionRow>(
    `UPDATE actions SET status = ?, completed_at = ?, result = ?, error_code = ?, error_message = ?
     WHERE id = ? AND target_id = ? AND ${guard('complete')} AND expires_at > ?
     RETURNING ${COLUMNS}`,
    [status, now, report.result, report.errorCode, report.errorMessage, report.id, report.targetId, now],
  );
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

/** The SET of a cancel: the status, when, and why (docs/reference/rules.md "Actions"). */
const CANCELLED = `${enter('cancel', 'cancelled')}, completed_at = ?, cancel_reason = ?`;

/**
 * The guard of the cancels that look at a device's queue, by the device that fetches it:
 * queued commands only. A waiting action is not in that queue (no index holds it by target),
 * and its approval re-checks the same permission (`approveAction`), so none is left to run.
 */
const QUEUED_ONLY = statusIn(['queued' satisfies (typeof TRANSITIONS.cancel.from)[number]]);

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
  return db.all<ActionRow>(
    `UPDATE actions SET ${CANCELLED}
     WHERE workspace_id = ? AND target_id = ? AND ${QUEUED_ONLY}
       AND device_id IN (SELECT id FROM devices WHERE workspace_id = ? AND parent_id = ? AND detached_at IS NOT NULL)
     RETURNING ${COLUMNS}`,
    [now, 'device_detached' satisfies CancelReason, workspaceId, gatewayId, workspaceId, gatewayId],
  );
}

/** Cancels every queued command fetched by a revoked device: nothing can deliver them now. */
export function cancelQueuedForTarget(db: Queryable, workspaceId: string, targetId: string, now: number): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `UPDATE actions SET ${CANCELLED}
     WHERE workspace_id = ? AND (target_id = ? OR device_id = ?) AND ${QUEUED_ONLY}
     RETURNING ${COLUMNS}`,
    [now, 'device_revoked' satisfies CancelReason, workspaceId, targetId, targetId],
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

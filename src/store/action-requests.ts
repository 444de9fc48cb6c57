/** Creating actions: the plain insert, and the guarded one that checks permission, queue room and storage in its own statement. */
import type { InitialStatus } from '../domain/action-states.js';
import { COLUMNS, pendingCounts, scheduledCount, type ActionRow } from './actions.js';
import { refusal } from './action-refusal.js';
import type { Queryable, SqlValue, Statement } from './driver.js';
import { ownsKey } from './idempotency.js';
import { ACTION_RESERVED_BYTES, STORAGE_BUDGETS, storageRoom, type StorageBudget, type StorageLimits } from './usage.js';

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
  | 'allowedUntil'
  | 'notBefore'
> & {
  /** When a `scheduled` one becomes due; absent or null for one queued (or waiting) at once. */
  notBefore?: number | null;
  /** Until when its grant's schedule allows handing it out; absent or null without a schedule (or while it waits for approval). */
  allowedUntil?: number | null;
  /**
   * `awaiting_approval` with `expiresAt` = `approvalExpiresAt` (the window), `queued` with the
   * execution deadline, or `scheduled` with `notBefore` and the deadline counted from it.
   */
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
  'allowed_until',
  'not_before',
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
    row.allowedUntil ?? null,
    row.notBefore ?? null,
  ];
}

export async function insertAction(db: Queryable, row: NewActionRow): Promise<ActionRow> {
  return (await db.get<ActionRow>(
    `INSERT INTO actions (${NEW_ACTION_COLUMNS.join(', ')}, created_at, reserved_bytes)
     VALUES (${NEW_ACTION_COLUMNS.map(() => '?').join(', ')}, ?, ${ACTION_RESERVED_BYTES}) RETURNING ${COLUMNS}`,
    [...newActionArgs(row), row.createdAt],
  ))!;
}

/**
 * Creates the action only if, as the statement runs, it may be created: the device, its
 * gateway, the requesting connection, the function and the principal's grant pass the same
 * `refusal` the hand-out checks (a grant re-given in a stricter approval mode included), and the
 * principal's share of the device's queue and the workspace's queue have room (`limits`); a
 * scheduled one takes no place in a queue until it is due, and needs room among the workspace's
 * scheduled actions instead; and the workspace's owner has not paused device control.
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
  /** Scheduled actions, not yet due, per workspace: what a scheduled action needs room among instead of the queues. */
  scheduledPerWorkspace: number;
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
  const scheduled = row.status === 'scheduled';
  // A scheduled action's room: among the workspace's scheduled ones (the share's parameter is then unused).
  const room = scheduled ? `${scheduledCount('?3')} < ?${last + 2}` : `${pending.principalOnDevice} < ?${last + 1} AND ${pending.workspace} < ?${last + 2}`;
  const owned = key ? `AND ${ownsKey('?3', '?9', `?${last + 3}`, `?${last + 4}`)}` : '';
  const firstBudget = last + (key ? 5 : 3);
  const budgetRefs = Object.fromEntries(STORAGE_BUDGETS.map((budget, index) => [budget, `?${firstBudget + index}`])) as Record<StorageBudget, string>;
  return {
    sql: `WITH a (${columns}) AS (VALUES (${values}, ?1, NULL))
     INSERT INTO actions (${[...NEW_ACTION_COLUMNS, 'created_at'].join(', ')}, reserved_bytes)
     SELECT ${[...NEW_ACTION_COLUMNS, 'created_at'].join(', ')}, ${ACTION_RESERVED_BYTES} FROM a
     WHERE ${refusal('a', '?1')} IS NULL AND ${room} ${owned}
       AND ${storageRoom('?3', 'length(CAST(?7 AS BLOB))', budgetRefs)} AND ${GRANT_BUDGET_HAS_ROOM} AND ${CONTROLS_RUNNING}`,
    args: [
      row.createdAt,
      ...newActionArgs(row),
      limits.perPrincipalOnDevice,
      scheduled ? limits.scheduledPerWorkspace : limits.perWorkspace,
      ...(key ? [key.key, key.response] : []),
      ...STORAGE_BUDGETS.map((budget) => limits.storage[budget]),
    ],
  };
}

/**
 * The principal's grant for the function has no budget (docs/owners/grants.md "Conditions"), or
 * fewer than its `max` actions were created for the same principal, device and function in the
 * last `perSeconds` seconds before `?1` (a sliding window; every action counts, whatever became
 * of it). Read in the inserting statement itself, which holds the write lock, so concurrent
 * requests never overshoot. It reads no more than `max` actions: whether the `max`-th newest in
 * the window exists (OFFSET `max` - 1 on index actions_by_grant_function), `max` read from the
 * same grant (one live grant per principal, device and function: index grants_unrevoked).
 */
const GRANT_BUDGET_HAS_ROOM = `NOT EXISTS (SELECT 1 FROM grants bg
  WHERE bg.workspace_id = ?3 AND bg.principal = ?9 AND bg.device_id = ?4 AND bg.capability = ?6 AND bg.revoked_at IS NULL
    AND json_extract(bg.conditions, '$.budget.max') IS NOT NULL
    AND EXISTS (SELECT 1 FROM actions x
          WHERE x.workspace_id = ?3 AND x.principal = ?9 AND x.device_id = ?4 AND x.capability = ?6
            AND x.created_at > ?1 - json_extract(bg.conditions, '$.budget.perSeconds') * 1000
          ORDER BY x.created_at DESC LIMIT 1
          OFFSET (SELECT json_extract(lg.conditions, '$.budget.max') - 1 FROM grants lg
                  WHERE lg.workspace_id = ?3 AND lg.principal = ?9 AND lg.device_id = ?4 AND lg.capability = ?6 AND lg.revoked_at IS NULL)))`;

/**
 * The workspace's owner has not paused device control (src/domain/device-controls.ts): read in
 * the inserting statement, so a pause committed before it queues nothing, whatever a request
 * read earlier, and a plain request needs no read of the switch of its own.
 */
const CONTROLS_RUNNING = 'NOT EXISTS (SELECT 1 FROM workspaces pw WHERE pw.id = ?3 AND pw.controls_paused_at IS NOT NULL)';

/**
 * How much of a budget of `max` actions per `perMs` is used at `now` for one principal, device
 * and function, and when one more is allowed: when the oldest action that keeps the count at
 * `max` leaves the window (`retryAt`, or `now` while there is room).
 */
export async function grantBudgetUse(
  db: Queryable,
  scope: { workspaceId: string; principal: string; deviceId: string; capability: string },
  budget: { max: number; perMs: number },
  now: number,
): Promise<{ used: number; retryAt: number }> {
  const since = now - budget.perMs;
  const rows = await db.all<{ createdAt: number }>(
    `SELECT created_at AS createdAt FROM actions
     WHERE workspace_id = ? AND principal = ? AND device_id = ? AND capability = ? AND created_at > ?
     ORDER BY created_at DESC LIMIT ?`,
    [scope.workspaceId, scope.principal, scope.deviceId, scope.capability, since, budget.max],
  );
  const used = rows.length;
  // The newest `max` actions: once the oldest of them leaves the window, there is room for one more.
  const retryAt = used < budget.max ? now : rows[used - 1]!.createdAt + budget.perMs;
  return { used, retryAt };
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
    allowedUntil: row.allowedUntil ?? null,
    notBefore: row.notBefore ?? null,
  };
}

import type { Queryable } from './driver.js';

/**
 * What a workspace has made the service store (migration 0024 keeps the counters, by trigger,
 * in the statement that writes or deletes each row). docs/operators/budgets.md.
 */
export const STORAGE_BUDGETS = ['actions', 'action_bytes', 'event_bytes', 'webhook_deliveries'] as const;
export type StorageBudget = (typeof STORAGE_BUDGETS)[number];

export type StorageUsage = Record<StorageBudget, number>;
export type StorageLimits = Record<StorageBudget, number>;

/**
 * The most bytes a device's result may take stored (its JSON text as the service writes it):
 * a body is at most 16 KiB, but numbers such as `1e20` are written out in full, so the stored
 * text can be longer than the body was. A longer result is refused (400 at `result`).
 */
export const RESULT_MAX_BYTES = 16 * 1024;

/**
 * What an action reserves in `action_bytes` when it is created (migration 0031): room for the
 * most that may still be written into it — its result (`RESULT_MAX_BYTES`, which also covers an
 * error message of 1,024 characters) and a decision reason of 500 characters (3 bytes each at
 * most, a character outside the BMP being two). So no result can take a workspace past its
 * budget: the room was taken when the action was accepted.
 */
export const ACTION_RESERVED_BYTES = RESULT_MAX_BYTES + 1500;

const NONE: StorageUsage = { actions: 0, action_bytes: 0, event_bytes: 0, webhook_deliveries: 0 };

export async function workspaceUsage(db: Queryable, workspaceId: string): Promise<StorageUsage> {
  const row = await db.get<StorageUsage>(`SELECT ${STORAGE_BUDGETS.join(', ')} FROM workspace_usage WHERE workspace_id = ?`, [workspaceId]);
  return row ?? NONE;
}

/**
 * The SQL condition "storing one more action whose caller-chosen bytes are `bytes` keeps the
 * workspace within its budgets", over parameter references: the action's own count and bytes,
 * with its reservation (`ACTION_RESERVED_BYTES`), must fit; the journal and the deliveries, which the action adds to only afterwards (its
 * events, their deliveries), must not be full already. One lookup by key; a workspace without
 * a counter row yet counts as using nothing, so its first action is checked too.
 */
export function storageRoom(workspaceId: string, bytes: string, limits: Record<StorageBudget, string>): string {
  const used = STORAGE_BUDGETS.map((budget) => `coalesce(max(${budget}), 0) AS ${budget}`).join(', ');
  return `NOT EXISTS (SELECT 1 FROM (SELECT ${used} FROM workspace_usage WHERE workspace_id = ${workspaceId}) u
    WHERE u.actions + 1 > ${limits.actions} OR u.action_bytes + ${bytes} + ${ACTION_RESERVED_BYTES} > ${limits.action_bytes}
      OR u.event_bytes >= ${limits.event_bytes} OR u.webhook_deliveries >= ${limits.webhook_deliveries})`;
}

/** The workspaces using the largest share of `budget`'s limit, most first (the metrics' bounded top N). */
export async function topUsage(db: Queryable, budget: StorageBudget, n: number): Promise<{ workspaceId: string; used: number }[]> {
  return db.all<{ workspaceId: string; used: number }>(
    `SELECT workspace_id AS workspaceId, ${budget} AS used FROM workspace_usage WHERE ${budget} > 0 ORDER BY ${budget} DESC, workspace_id LIMIT ?`,
    [n],
  );
}

/** Every workspace's usage summed: what the budgets hold in all. */
export async function totalUsage(db: Queryable): Promise<StorageUsage> {
  const row = await db.get<StorageUsage>(`SELECT ${STORAGE_BUDGETS.map((b) => `coalesce(sum(${b}), 0) AS ${b}`).join(', ')} FROM workspace_usage`);
  return row ?? NONE;
}

import type { Queryable } from './driver.js';

export interface IdempotencyRecord {
  requestHash: string;
  response: string;
  createdAt: number;
}

/** The first answer under this key, if it is still within its replay window. */
export function findIdempotent(
  db: Queryable,
  scope: { workspaceId: string; principal: string; key: string },
  notBefore: number,
): Promise<IdempotencyRecord | undefined> {
  return db.get<IdempotencyRecord>(
    `SELECT request_hash AS requestHash, response, created_at AS createdAt FROM idempotency_keys
     WHERE workspace_id = ? AND principal = ? AND key = ? AND created_at > ?`,
    [scope.workspaceId, scope.principal, scope.key, notBefore],
  );
}

/** Stores the answer; an expired record under the same key is replaced. Run in the transaction that created the actions. */
export async function saveIdempotent(db: Queryable, scope: { workspaceId: string; principal: string; key: string }, record: IdempotencyRecord): Promise<void> {
  await db.run(
    `INSERT INTO idempotency_keys (workspace_id, principal, key, request_hash, response, created_at) VALUES (?, ?, ?, ?, ?, ?)
     ON CONFLICT (workspace_id, principal, key) DO UPDATE SET request_hash = excluded.request_hash, response = excluded.response, created_at = excluded.created_at`,
    [scope.workspaceId, scope.principal, scope.key, record.requestHash, record.response, record.createdAt],
  );
}

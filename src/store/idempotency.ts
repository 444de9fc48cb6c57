import type { Queryable, Statement } from './driver.js';

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

/**
 * Stores the answer; an expired record under the same key is replaced. Run in the transaction
 * that created the actions, after `findIdempotent` found no live record: the same statement as
 * `claimIdempotencyKey`.
 */
export async function saveIdempotent(
  db: Queryable,
  scope: { workspaceId: string; principal: string; key: string },
  record: IdempotencyRecord,
  notBefore: number,
): Promise<void> {
  const { sql, args } = claimIdempotencyKey(scope, record, notBefore);
  await db.run(sql, args);
}

/**
 * Takes the key for `record` unless a record within the replay window holds it (an expired one
 * is replaced): a statement for a batch that creates what the record answers. A concurrent
 * request that took the key first leaves this one without it; `ownsKey` then fails.
 */
export function claimIdempotencyKey(scope: { workspaceId: string; principal: string; key: string }, record: IdempotencyRecord, notBefore: number): Statement {
  return {
    sql: `INSERT INTO idempotency_keys (workspace_id, principal, key, request_hash, response, created_at) VALUES (?, ?, ?, ?, ?, ?)
          ON CONFLICT (workspace_id, principal, key) DO UPDATE SET request_hash = excluded.request_hash, response = excluded.response, created_at = excluded.created_at
          WHERE idempotency_keys.created_at <= ?`,
    args: [scope.workspaceId, scope.principal, scope.key, record.requestHash, record.response, record.createdAt, notBefore],
  };
}

/** The SQL condition "this key holds exactly `response`", over four parameter references (workspace, principal, key, response). */
export function ownsKey(workspaceId: string, principal: string, key: string, response: string): string {
  return `EXISTS (SELECT 1 FROM idempotency_keys WHERE workspace_id = ${workspaceId} AND principal = ${principal} AND key = ${key} AND response = ${response})`;
}

/** Gives the key back when what its record answers was not created after all (the batch's guarded insert refused it). */
export function releaseUnusedKey(scope: { workspaceId: string; principal: string; key: string }, response: string, actionId: string): Statement {
  return {
    sql: 'DELETE FROM idempotency_keys WHERE workspace_id = ? AND principal = ? AND key = ? AND response = ? AND NOT EXISTS (SELECT 1 FROM actions WHERE id = ?)',
    args: [scope.workspaceId, scope.principal, scope.key, response, actionId],
  };
}

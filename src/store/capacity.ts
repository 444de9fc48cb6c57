import { pendingCounts, scheduledCount } from './actions.js';
import type { Queryable } from './driver.js';

/** Device records that count against the workspace's capacity: attached, not revoked, not detached. */
export async function countActiveDevices(db: Queryable, workspaceId: string): Promise<number> {
  const row = await db.get<{ n: number }>('SELECT count(*) AS n FROM devices WHERE workspace_id = ? AND revoked_at IS NULL AND detached_at IS NULL', [
    workspaceId,
  ]);
  return row!.n;
}

/**
 * Pending actions in the workspace, and those one principal holds on one device
 * (`pendingCounts`, src/store/actions.ts): the queue capacity check.
 */
export async function countQueued(
  db: Queryable,
  workspaceId: string,
  deviceId: string,
  principal: string,
): Promise<{ workspace: number; principalOnDevice: number }> {
  const counts = pendingCounts('?1', '?2', '?3');
  const row = await db.get<{ workspace: number; principalOnDevice: number }>(
    `SELECT ${counts.workspace} AS workspace, ${counts.principalOnDevice} AS principalOnDevice`,
    [workspaceId, deviceId, principal],
  );
  return row!;
}

/** Actions the workspace holds scheduled for later, not yet due (the partial index actions_scheduled_by_workspace). */
export async function countScheduled(db: Queryable, workspaceId: string): Promise<number> {
  const row = await db.get<{ n: number }>(`SELECT ${scheduledCount('?1')} AS n`, [workspaceId]);
  return row!.n;
}

/** What a workspace cap counts (docs/reference/rules.md "Errors and limits"). */
export type CappedKind = 'agentConnections' | 'setupTokens' | 'grants' | 'oauthClients' | 'enrollmentCodes' | 'webhooks';

// Live rows only: revoked, expired or used ones hold no place (their housekeeping is elsewhere).
const live = 'revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)';
const liveCounts: Record<CappedKind, { sql: string; withNow: boolean }> = {
  agentConnections: { sql: `SELECT count(*) AS n FROM connections WHERE workspace_id = ? AND purpose = 'agent' AND ${live}`, withNow: true },
  setupTokens: { sql: `SELECT count(*) AS n FROM connections WHERE workspace_id = ? AND purpose = 'device-setup' AND ${live}`, withNow: true },
  grants: { sql: `SELECT count(*) AS n FROM grants WHERE workspace_id = ? AND ${live}`, withNow: true },
  // Clients the workspace registered (a dynamically registered one belongs to no workspace)
  // whose connection is not revoked: revoking keeps the client row but frees the place.
  oauthClients: {
    sql: 'SELECT count(*) AS n FROM oauth_clients o JOIN connections c ON c.oauth_client = o.id WHERE o.workspace_id = ? AND c.revoked_at IS NULL',
    withNow: false,
  },
  enrollmentCodes: { sql: 'SELECT count(*) AS n FROM enrollments WHERE workspace_id = ? AND used_at IS NULL AND expires_at > ?', withNow: true },
  webhooks: { sql: 'SELECT count(*) AS n FROM webhooks WHERE workspace_id = ? AND revoked_at IS NULL', withNow: false },
};

export async function countLive(db: Queryable, kind: CappedKind, workspaceId: string, now: number): Promise<number> {
  const { sql, withNow } = liveCounts[kind];
  const row = await db.get<{ n: number }>(sql, withNow ? [workspaceId, now] : [workspaceId]);
  return row!.n;
}

/** Actions queued or awaiting approval in the workspace: what the queue capacity counts. */
export async function countPending(db: Queryable, workspaceId: string): Promise<number> {
  const row = await db.get<{ n: number }>(`SELECT ${pendingCounts('?1', "''", "''").workspace} AS n`, [workspaceId]);
  return row!.n;
}

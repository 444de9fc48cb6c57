import { statusIn } from './actions.js';
import type { Queryable } from './driver.js';

/** Device records that count against the workspace's capacity: attached, not revoked, not detached. */
export async function countActiveDevices(db: Queryable, workspaceId: string): Promise<number> {
  const row = await db.get<{ n: number }>('SELECT count(*) AS n FROM devices WHERE workspace_id = ? AND revoked_at IS NULL AND detached_at IS NULL', [
    workspaceId,
  ]);
  return row!.n;
}

export async function countQueued(db: Queryable, workspaceId: string, deviceId: string): Promise<{ workspace: number; device: number }> {
  const row = await db.get<{ workspace: number; device: number }>(
    `SELECT (SELECT count(*) FROM actions WHERE workspace_id = ? AND ${statusIn(['queued'])}) AS workspace,
            (SELECT count(*) FROM actions WHERE device_id = ? AND ${statusIn(['queued'])}) AS device`,
    [workspaceId, deviceId],
  );
  return row!;
}

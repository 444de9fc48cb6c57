import type { Db, Queryable } from './driver.js';

/** One 2025-era MCP session: its agent connection and the nonce of its session id (migration 0041). */
export interface SessionKey {
  workspaceId: string;
  connectionId: string;
  session: string;
}

/**
 * Subscribes the session to a device's state resource, unless it follows `perSession` already,
 * and keeps the newest `perConnection` subscriptions of the connection (a 2025 session never
 * says it ended: an abandoned one's subscriptions go first). One batch. Answers false when the
 * session's bound was reached and nothing was stored.
 */
export async function subscribeSessionResource(
  db: Db,
  key: SessionKey,
  deviceId: string,
  now: number,
  bounds: { perSession: number; perConnection: number },
): Promise<boolean> {
  const [inserted] = await db.batch([
    {
      sql: `INSERT INTO mcp_resource_subscriptions (connection_id, session, workspace_id, device_id, created_at)
            SELECT ?, ?, ?, ?, ? WHERE (SELECT count(*) FROM mcp_resource_subscriptions WHERE connection_id = ? AND session = ? AND device_id <> ?) < ?
            ON CONFLICT (connection_id, session, device_id) DO UPDATE SET created_at = excluded.created_at`,
      args: [key.connectionId, key.session, key.workspaceId, deviceId, now, key.connectionId, key.session, deviceId, bounds.perSession],
    },
    {
      sql: `DELETE FROM mcp_resource_subscriptions WHERE workspace_id = ? AND connection_id = ? AND created_at < coalesce(
              (SELECT created_at FROM mcp_resource_subscriptions WHERE connection_id = ? ORDER BY created_at DESC LIMIT 1 OFFSET ?), -1)`,
      args: [key.workspaceId, key.connectionId, key.connectionId, bounds.perConnection - 1],
    },
  ]);
  return (inserted?.changes ?? 0) > 0;
}

/** Ends the session's subscriptions of these devices (all of them when `deviceIds` is undefined). */
export async function unsubscribeSessionResources(db: Queryable, key: SessionKey, deviceIds?: readonly string[]): Promise<void> {
  const base = 'DELETE FROM mcp_resource_subscriptions WHERE workspace_id = ? AND connection_id = ? AND session = ?';
  const args = [key.workspaceId, key.connectionId, key.session];
  if (deviceIds === undefined) await db.run(base, args);
  else if (deviceIds.length > 0) await db.run(`${base} AND device_id IN (${deviceIds.map(() => '?').join(', ')})`, [...args, ...deviceIds]);
}

/** The devices whose state resource the session follows, oldest subscription first. */
export async function sessionResourceDevices(db: Queryable, key: SessionKey): Promise<string[]> {
  const rows = await db.all<{ deviceId: string }>(
    `SELECT device_id AS deviceId FROM mcp_resource_subscriptions WHERE workspace_id = ? AND connection_id = ? AND session = ?
     ORDER BY created_at, device_id`,
    [key.workspaceId, key.connectionId, key.session],
  );
  return rows.map((row) => row.deviceId);
}

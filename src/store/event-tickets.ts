import type { Db, Queryable } from './driver.js';

/**
 * Stores a new ticket and drops the device's tickets that can no longer open anything (used
 * or expired), so the table holds at most the few live tickets of each device. One batch: on
 * a libSQL server one network round trip instead of a transaction's three.
 */
export async function issueEventTicket(
  db: Db,
  row: { ticketHash: string; workspaceId: string; deviceId: string; expiresAt: number; createdAt: number },
): Promise<void> {
  await db.batch([
    {
      sql: 'DELETE FROM event_tickets WHERE workspace_id = ? AND device_id = ? AND (used_at IS NOT NULL OR expires_at <= ?)',
      args: [row.workspaceId, row.deviceId, row.createdAt],
    },
    {
      sql: 'INSERT INTO event_tickets (ticket_hash, workspace_id, device_id, expires_at, created_at) VALUES (?, ?, ?, ?, ?)',
      args: [row.ticketHash, row.workspaceId, row.deviceId, row.expiresAt, row.createdAt],
    },
  ]);
}

/**
 * Uses a ticket once, for the device it was issued to, before its deadline, and only while
 * that device is not revoked: one guarded UPDATE, so two upgrades racing with the same
 * ticket cannot both win. A ticket presented for another device is not consumed.
 */
export function consumeEventTicket(
  db: Queryable,
  ticketHash: string,
  deviceId: string,
  now: number,
): Promise<{ workspaceId: string; deviceId: string } | undefined> {
  return db.get<{ workspaceId: string; deviceId: string }>(
    `UPDATE event_tickets SET used_at = ?1
     WHERE ticket_hash = ?2 AND device_id = ?3 AND used_at IS NULL AND expires_at > ?1
       AND EXISTS (SELECT 1 FROM devices d
                   WHERE d.id = event_tickets.device_id AND d.workspace_id = event_tickets.workspace_id AND d.revoked_at IS NULL)
     RETURNING workspace_id AS workspaceId, device_id AS deviceId`,
    [now, ticketHash, deviceId],
  );
}

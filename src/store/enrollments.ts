import type { Queryable } from './driver.js';

export interface EnrollmentRow {
  id: string;
  workspaceId: string;
  codePrefix: string;
  expiresAt: number;
  usedAt: number | null;
  createdAt: number;
}

export async function insertEnrollment(db: Queryable, row: EnrollmentRow & { codeHash: string; createdBy: string }): Promise<void> {
  await db.run(
    `INSERT INTO enrollments (id, workspace_id, code_hash, code_prefix, expires_at, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspaceId, row.codeHash, row.codePrefix, row.expiresAt, row.createdBy, row.createdAt],
  );
}

/** Uses an enrollment code once: the guarded UPDATE lets exactly one caller through. */
export async function consumeEnrollment(db: Queryable, codeHash: string, now: number): Promise<{ id: string; workspaceId: string } | undefined> {
  return db.get<{ id: string; workspaceId: string }>(
    `UPDATE enrollments SET used_at = ? WHERE code_hash = ? AND used_at IS NULL AND expires_at > ?
     RETURNING id, workspace_id AS workspaceId`,
    [now, codeHash, now],
  );
}

export async function recordEnrolledDevice(db: Queryable, enrollmentId: string, deviceId: string): Promise<void> {
  await db.run('UPDATE enrollments SET device_id = ? WHERE id = ?', [deviceId, enrollmentId]);
}

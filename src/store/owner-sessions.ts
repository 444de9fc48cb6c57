import type { Queryable } from './driver.js';

/** The owner's browser sessions (the consent page and the console), stored by the hash of their token. */
export interface SessionRow {
  tokenHash: string;
  workspaceId: string;
  subject: string;
  expiresAt: number;
  createdAt: number;
}

export async function insertSession(db: Queryable, row: SessionRow): Promise<void> {
  await db.run('INSERT INTO owner_sessions (token_hash, workspace_id, subject, expires_at, created_at) VALUES (?, ?, ?, ?, ?)', [
    row.tokenHash,
    row.workspaceId,
    row.subject,
    row.expiresAt,
    row.createdAt,
  ]);
}

export function findSession(db: Queryable, tokenHash: string): Promise<SessionRow | undefined> {
  return db.get<SessionRow>(
    'SELECT token_hash AS tokenHash, workspace_id AS workspaceId, subject, expires_at AS expiresAt, created_at AS createdAt FROM owner_sessions WHERE token_hash = ?',
    [tokenHash],
  );
}

export async function deleteSession(db: Queryable, tokenHash: string): Promise<void> {
  await db.run('DELETE FROM owner_sessions WHERE token_hash = ?', [tokenHash]);
}

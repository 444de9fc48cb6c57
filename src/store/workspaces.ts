import { randomBytes, randomUUID } from 'node:crypto';
import type { Queryable } from './driver.js';

export interface WorkspaceRow {
  id: string;
  externalId: string;
  routingId: string;
  createdAt: number;
}

const COLUMNS = 'id, external_id AS externalId, routing_id AS routingId, created_at AS createdAt';

/** The owner's workspace, created on first use (docs/reference/rules.md "Credentials"). */
export async function workspaceForOwner(db: Queryable, externalId: string, now: number): Promise<WorkspaceRow> {
  const existing = await db.get<WorkspaceRow>(`SELECT ${COLUMNS} FROM workspaces WHERE external_id = ?`, [externalId]);
  if (existing) return existing;
  await db.run('INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?) ON CONFLICT (external_id) DO NOTHING', [
    randomUUID(),
    externalId,
    randomBytes(32).toString('hex'),
    now,
  ]);
  return (await db.get<WorkspaceRow>(`SELECT ${COLUMNS} FROM workspaces WHERE external_id = ?`, [externalId]))!;
}

export function getWorkspace(db: Queryable, id: string): Promise<WorkspaceRow | undefined> {
  return db.get<WorkspaceRow>(`SELECT ${COLUMNS} FROM workspaces WHERE id = ?`, [id]);
}

export interface WorkspaceUsage {
  devices: number;
  agentConnections: number;
  setupTokens: number;
}

export async function workspaceUsage(db: Queryable, workspaceId: string): Promise<WorkspaceUsage> {
  const row = await db.get<WorkspaceUsage>(
    `SELECT
       (SELECT count(*) FROM devices WHERE workspace_id = ?1 AND revoked_at IS NULL AND detached_at IS NULL) AS devices,
       (SELECT count(*) FROM connections WHERE workspace_id = ?1 AND purpose = 'agent' AND revoked_at IS NULL) AS agentConnections,
       (SELECT count(*) FROM connections WHERE workspace_id = ?1 AND purpose = 'device-setup' AND revoked_at IS NULL) AS setupTokens`,
    [workspaceId],
  );
  return row!;
}

/** The owner's pause switch (migration 0027); null fields while device control runs. */
export interface ControlsPause {
  pausedAt: number | null;
  pausedBy: string | null;
}

export async function controlsPause(db: Queryable, workspaceId: string): Promise<ControlsPause> {
  const row = await db.get<ControlsPause>('SELECT controls_paused_at AS pausedAt, controls_paused_by AS pausedBy FROM workspaces WHERE id = ?', [workspaceId]);
  return row ?? { pausedAt: null, pausedBy: null };
}

/**
 * Pauses device control (1 when it was running, 0 when paused already); pausing a paused workspace keeps the first pause's time and owner, so
 * the screen says since when it has been off.
 */
export async function pauseControls(db: Queryable, workspaceId: string, subject: string, now: number): Promise<number> {
  // What agents may call changes with the switch: their tool lists are rebuilt (functions_version).
  const result = await db.run(
    `UPDATE workspaces SET controls_paused_at = ?, controls_paused_by = ?, functions_version = functions_version + 1
      WHERE id = ? AND controls_paused_at IS NULL`,
    [now, subject, workspaceId],
  );
  return result.changes;
}

/** Resumes device control; 1 when it was paused, 0 when it was running already. */
export async function resumeControls(db: Queryable, workspaceId: string): Promise<number> {
  const result = await db.run(
    'UPDATE workspaces SET controls_paused_at = NULL, controls_paused_by = NULL, functions_version = functions_version + 1 WHERE id = ? AND controls_paused_at IS NOT NULL',
    [workspaceId],
  );
  return result.changes;
}

import type { DeviceKind } from './devices.js';
import { COLUMNS, type ActionRow } from './actions.js';
import type { Queryable } from './driver.js';

/** How an action's device is named to an agent: its name, its kind, and its gateway's name. */
export interface DevicePlaceRow {
  deviceName: string;
  deviceKind: DeviceKind;
  parentId: string | null;
  parentName: string | null;
}

/**
 * The names an MCP task's result uses for the device its action ran on (docs/agents/tasks.md):
 * read even when the device was detached or revoked since, since a finished task still
 * describes what ran where.
 */
export function devicePlace(db: Queryable, workspaceId: string, deviceId: string): Promise<DevicePlaceRow | undefined> {
  return db.get<DevicePlaceRow>(
    `SELECT d.name AS deviceName, d.kind AS deviceKind, d.parent_id AS parentId, p.name AS parentName
       FROM devices d LEFT JOIN devices p ON p.id = d.parent_id
      WHERE d.workspace_id = ? AND d.id = ?`,
    [workspaceId, deviceId],
  );
}

/**
 * An agent connection's standing and its workspace's functions version, in one read; with an
 * OAuth access token's id, that token's own revocation and expiry too (an expiry of null: no
 * such token, or none asked for).
 */
export interface AgentStandingRow {
  revokedAt: number | null;
  expiresAt: number | null;
  functionsVersion: number;
  tokenRevokedAt: number | null;
  tokenExpiresAt: number | null;
}

export function agentStanding(db: Queryable, workspaceId: string, connectionId: string, oauthTokenId: string | null): Promise<AgentStandingRow | undefined> {
  return db.get<AgentStandingRow>(
    `SELECT c.revoked_at AS revokedAt, c.expires_at AS expiresAt,
            (SELECT w.functions_version FROM workspaces w WHERE w.id = c.workspace_id) AS functionsVersion,
            (SELECT t.revoked_at FROM oauth_tokens t WHERE t.id = ?3 AND t.connection_id = c.id) AS tokenRevokedAt,
            (SELECT t.expires_at FROM oauth_tokens t WHERE t.id = ?3 AND t.connection_id = c.id) AS tokenExpiresAt
       FROM connections c
      WHERE c.workspace_id = ?1 AND c.id = ?2 AND c.purpose = 'agent'`,
    [workspaceId, connectionId, oauthTokenId],
  );
}

/**
 * Of `ids`, the actions an agent connection requested itself, in the order the ids are given and
 * at most `limit` of them: one read however many ids a subscriptions/listen names, each a
 * primary-key lookup (docs/agents/tasks.md "Notifications").
 */
export function ownActionsAmong(
  db: Queryable,
  owner: { workspaceId: string; principal: string; connectionId: string },
  ids: readonly string[],
  limit: number,
): Promise<ActionRow[]> {
  return db.all<ActionRow>(
    `WITH asked(position, actionId) AS (SELECT key, value FROM json_each(?))
     SELECT ${COLUMNS} FROM asked JOIN actions ON actions.id = asked.actionId
      WHERE workspace_id = ? AND principal = ? AND connection_id = ?
      ORDER BY asked.position LIMIT ?`,
    [JSON.stringify(ids), owner.workspaceId, owner.principal, owner.connectionId, limit],
  );
}

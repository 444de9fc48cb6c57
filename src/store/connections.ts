import type { Queryable } from './driver.js';
import { cutPage, newestFirstAfter, type PageQuery, type RowsPage } from './paging.js';

export type ConnectionPurpose = 'agent' | 'device-setup';

export interface ConnectionRow {
  id: string;
  workspaceId: string;
  purpose: ConnectionPurpose;
  name: string;
  principal: string;
  access: 'read' | 'act';
  tokenPrefix: string;
  deviceLimit: number;
  attachedCount: number;
  expiresAt: number | null;
  revokedAt: number | null;
  createdAt: number;
  /** The client's registration when the connection belongs to an OAuth client. */
  oauth: OAuthInfo | null;
}

export interface OAuthInfo {
  applicationId: string;
  clientId: string;
  redirectUris: string[];
  public: boolean;
}

/** What authentication needs: the connection alone, no join on its hot path. */
export type CredentialConnectionRow = Omit<ConnectionRow, 'oauth'>;

const BASE_COLUMNS = `c.id, c.workspace_id AS workspaceId, c.purpose, c.name, c.principal, c.access, c.token_prefix AS tokenPrefix,
  c.device_limit AS deviceLimit, c.attached_count AS attachedCount, c.expires_at AS expiresAt,
  c.revoked_at AS revokedAt, c.created_at AS createdAt`;
const COLUMNS = `${BASE_COLUMNS},
  o.id AS oauthApplicationId, o.client_id AS oauthClientId, o.redirect_uris AS oauthRedirectUris, o.public AS oauthPublic`;
// An OAuth client acts through an agent connection linked to its registration (0005_oauth.sql).
const FROM = 'connections c LEFT JOIN oauth_clients o ON o.id = c.oauth_client';

interface RawConnectionRow extends CredentialConnectionRow {
  oauthApplicationId: string | null;
  oauthClientId: string | null;
  oauthRedirectUris: string | null;
  oauthPublic: number | null;
}

function toRow({ oauthApplicationId, oauthClientId, oauthRedirectUris, oauthPublic, ...row }: RawConnectionRow): ConnectionRow {
  return {
    ...row,
    oauth:
      oauthApplicationId === null
        ? null
        : { applicationId: oauthApplicationId, clientId: oauthClientId!, redirectUris: JSON.parse(oauthRedirectUris!) as string[], public: oauthPublic === 1 },
  };
}

export interface NewConnectionRow extends Omit<ConnectionRow, 'attachedCount' | 'revokedAt' | 'oauth'> {
  tokenHash: string;
  createdBy: string;
}

export async function insertConnection(db: Queryable, row: NewConnectionRow): Promise<void> {
  await db.run(
    `INSERT INTO connections (id, workspace_id, purpose, name, principal, access, token_hash, token_prefix,
       device_limit, expires_at, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id,
      row.workspaceId,
      row.purpose,
      row.name,
      row.principal,
      row.access,
      row.tokenHash,
      row.tokenPrefix,
      row.deviceLimit,
      row.expiresAt,
      row.createdBy,
      row.createdAt,
    ],
  );
}

/** Newest first; a page of them (src/store/paging.ts). */
export async function listConnections(db: Queryable, workspaceId: string, purpose: ConnectionPurpose, page: PageQuery): Promise<RowsPage<ConnectionRow>> {
  const after = newestFirstAfter(page.after, 'c.created_at', 'c.id');
  const rows = await db.all<RawConnectionRow>(
    `SELECT ${COLUMNS} FROM ${FROM} WHERE c.workspace_id = ? AND c.purpose = ? ${after.sql} ORDER BY c.created_at DESC, c.id LIMIT ?`,
    [workspaceId, purpose, ...after.args, page.limit + 1],
  );
  return cutPage(rows, page.limit, (row) => [row.createdAt, row.id], toRow);
}

export async function getConnection(db: Queryable, workspaceId: string, purpose: ConnectionPurpose, id: string): Promise<ConnectionRow | undefined> {
  const row = await db.get<RawConnectionRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE c.workspace_id = ? AND c.purpose = ? AND c.id = ?`, [
    workspaceId,
    purpose,
    id,
  ]);
  return row && toRow(row);
}

/** Sets the revoked time once; a repeated revoke keeps the first time. */
export async function revokeConnection(
  db: Queryable,
  workspaceId: string,
  purpose: ConnectionPurpose,
  id: string,
  now: number,
): Promise<ConnectionRow | undefined> {
  await db.run('UPDATE connections SET revoked_at = ? WHERE workspace_id = ? AND purpose = ? AND id = ? AND revoked_at IS NULL', [
    now,
    workspaceId,
    purpose,
    id,
  ]);
  return getConnection(db, workspaceId, purpose, id);
}

/** A token's connection, with its workspace's functions_version read in the same statement (the agent credential's `functionsVersion`). */
export interface TokenConnectionRow extends CredentialConnectionRow {
  functionsVersion: number;
}

export function findConnectionByTokenHash(db: Queryable, tokenHash: string): Promise<TokenConnectionRow | undefined> {
  return db.get<TokenConnectionRow>(
    `SELECT ${BASE_COLUMNS}, (SELECT w.functions_version FROM workspaces w WHERE w.id = c.workspace_id) AS functionsVersion
     FROM connections c WHERE c.token_hash = ?`,
    [tokenHash],
  );
}

/**
 * Takes one attachment slot of a setup token, or none: expiry, revocation and the device
 * limit are checked in the same guarded UPDATE, so two concurrent attaches on a limit-1
 * token cannot both win.
 */
export async function claimAttachSlot(db: Queryable, connectionId: string, now: number): Promise<boolean> {
  const result = await db.run(
    `UPDATE connections SET attached_count = attached_count + 1
     WHERE id = ? AND purpose = 'device-setup' AND revoked_at IS NULL
       AND (expires_at IS NULL OR expires_at > ?) AND attached_count < device_limit`,
    [connectionId, now],
  );
  return result.changes === 1;
}

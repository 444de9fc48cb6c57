import type { Queryable } from './driver.js';
import { cutPage, newestFirstAfter, type PageQuery, type RowsPage } from './paging.js';

/** SQL of the authorization server: clients, their connections, codes, tokens, owner sessions. */

export type ClientSource = 'registered' | 'dynamic' | 'metadata-document';

export interface OAuthClientRow {
  id: string;
  clientId: string;
  source: ClientSource;
  workspaceId: string | null;
  name: string;
  clientUri: string | null;
  redirectUris: string[];
  public: boolean;
  secretHash: string | null;
  secretPrefix: string | null;
  freshUntil: number | null;
  createdAt: number;
  updatedAt: number;
}

interface RawClientRow extends Omit<OAuthClientRow, 'redirectUris' | 'public'> {
  redirectUris: string;
  public: number;
}

const CLIENT_COLUMNS = `id, client_id AS clientId, source, workspace_id AS workspaceId, name, client_uri AS clientUri,
  redirect_uris AS redirectUris, public, secret_hash AS secretHash, secret_prefix AS secretPrefix,
  fresh_until AS freshUntil, created_at AS createdAt, updated_at AS updatedAt`;

function toClient(raw: RawClientRow | undefined): OAuthClientRow | undefined {
  if (!raw) return undefined;
  return { ...raw, redirectUris: JSON.parse(raw.redirectUris) as string[], public: raw.public === 1 };
}

export async function findClient(db: Queryable, clientId: string): Promise<OAuthClientRow | undefined> {
  return toClient(await db.get<RawClientRow>(`SELECT ${CLIENT_COLUMNS} FROM oauth_clients WHERE client_id = ?`, [clientId]));
}

export async function insertClient(db: Queryable, row: OAuthClientRow): Promise<void> {
  await db.run(
    `INSERT INTO oauth_clients (id, client_id, source, workspace_id, name, client_uri, redirect_uris, public,
       secret_hash, secret_prefix, fresh_until, created_at, updated_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id,
      row.clientId,
      row.source,
      row.workspaceId,
      row.name,
      row.clientUri,
      JSON.stringify(row.redirectUris),
      row.public ? 1 : 0,
      row.secretHash,
      row.secretPrefix,
      row.freshUntil,
      row.createdAt,
      row.updatedAt,
    ],
  );
}

/** Refreshes a cached Client ID Metadata Document (insert on first fetch). */
export async function upsertMetadataClient(db: Queryable, row: OAuthClientRow): Promise<OAuthClientRow> {
  await db.run(
    `INSERT INTO oauth_clients (id, client_id, source, workspace_id, name, client_uri, redirect_uris, public,
       secret_hash, secret_prefix, fresh_until, created_at, updated_at)
     VALUES (?, ?, 'metadata-document', NULL, ?, ?, ?, 1, NULL, NULL, ?, ?, ?)
     ON CONFLICT (client_id) DO UPDATE SET name = excluded.name, client_uri = excluded.client_uri,
       redirect_uris = excluded.redirect_uris, fresh_until = excluded.fresh_until, updated_at = excluded.updated_at
     WHERE oauth_clients.source = 'metadata-document'`,
    [row.id, row.clientId, row.name, row.clientUri, JSON.stringify(row.redirectUris), row.freshUntil, row.createdAt, row.updatedAt],
  );
  return (await findClient(db, row.clientId))!;
}

// Connections of OAuth clients (agent connections with an oauth link).

export interface OAuthConnectionRow {
  id: string;
  workspaceId: string;
  name: string;
  principal: string;
  access: 'read' | 'act';
  tokenPrefix: string;
  expiresAt: number | null;
  revokedAt: number | null;
  createdAt: number;
  applicationId: string;
  clientId: string;
  source: ClientSource;
  redirectUris: string[];
  public: boolean;
}

const CONNECTION_COLUMNS = `c.id, c.workspace_id AS workspaceId, c.name, c.principal, c.access, c.token_prefix AS tokenPrefix,
  c.expires_at AS expiresAt, c.revoked_at AS revokedAt, c.created_at AS createdAt,
  o.id AS applicationId, o.client_id AS clientId, o.source, o.redirect_uris AS redirectUris, o.public`;

type RawConnectionRow = Omit<OAuthConnectionRow, 'redirectUris' | 'public'> & { redirectUris: string; public: number };

function toConnectionRow(raw: RawConnectionRow): OAuthConnectionRow {
  return { ...raw, redirectUris: JSON.parse(raw.redirectUris) as string[], public: raw.public === 1 };
}

/** Newest first; a page of them (src/store/paging.ts). */
export async function listClientConnections(db: Queryable, workspaceId: string, page: PageQuery): Promise<RowsPage<OAuthConnectionRow>> {
  const after = newestFirstAfter(page.after, 'c.created_at', 'c.id');
  const rows = await db.all<RawConnectionRow>(
    `SELECT ${CONNECTION_COLUMNS} FROM connections c JOIN oauth_clients o ON o.id = c.oauth_client
     WHERE c.workspace_id = ? AND c.purpose = 'agent' ${after.sql} ORDER BY c.created_at DESC, c.id LIMIT ?`,
    [workspaceId, ...after.args, page.limit + 1],
  );
  return cutPage(rows, page.limit, (row) => [row.createdAt, row.id], toConnectionRow);
}

/** The live connection of a client in a workspace, if any. */
export async function liveClientConnection(db: Queryable, workspaceId: string, applicationId: string): Promise<OAuthConnectionRow | undefined> {
  const raw = await db.get<RawConnectionRow>(
    `SELECT ${CONNECTION_COLUMNS} FROM connections c JOIN oauth_clients o ON o.id = c.oauth_client
     WHERE c.workspace_id = ? AND c.oauth_client = ? AND c.revoked_at IS NULL`,
    [workspaceId, applicationId],
  );
  return raw && toConnectionRow(raw);
}

/** Whether a client has a live connection in this workspace: its owner approved it and has not revoked it. */
export async function clientApproved(db: Queryable, applicationId: string, workspaceId: string): Promise<boolean> {
  return (
    (await db.get<{ one: number }>('SELECT 1 AS one FROM connections WHERE oauth_client = ? AND workspace_id = ? AND revoked_at IS NULL LIMIT 1', [
      applicationId,
      workspaceId,
    ])) !== undefined
  );
}

/** The newest connection (live or revoked) of a client in a workspace, by protocol client id. */
export async function clientConnectionByClientId(db: Queryable, workspaceId: string, clientId: string): Promise<OAuthConnectionRow | undefined> {
  const raw = await db.get<RawConnectionRow>(
    `SELECT ${CONNECTION_COLUMNS} FROM connections c JOIN oauth_clients o ON o.id = c.oauth_client
     WHERE c.workspace_id = ? AND o.client_id = ? ORDER BY c.revoked_at IS NULL DESC, c.created_at DESC LIMIT 1`,
    [workspaceId, clientId],
  );
  return raw && toConnectionRow(raw);
}

export async function getClientConnection(db: Queryable, connectionId: string): Promise<OAuthConnectionRow | undefined> {
  const raw = await db.get<RawConnectionRow>(`SELECT ${CONNECTION_COLUMNS} FROM connections c JOIN oauth_clients o ON o.id = c.oauth_client WHERE c.id = ?`, [
    connectionId,
  ]);
  return raw && toConnectionRow(raw);
}

export async function linkConnection(db: Queryable, connectionId: string, applicationId: string): Promise<void> {
  await db.run('UPDATE connections SET oauth_client = ? WHERE id = ?', [applicationId, connectionId]);
}

/** Raises (never lowers) a connection's ceiling: an owner approved `act` on the consent page. */
export async function raiseConnectionAccess(db: Queryable, connectionId: string): Promise<void> {
  await db.run("UPDATE connections SET access = 'act' WHERE id = ? AND revoked_at IS NULL", [connectionId]);
}

/** Revokes a connection and every token it holds, in the caller's transaction. */
export async function revokeClientConnection(db: Queryable, workspaceId: string, connectionId: string, now: number): Promise<void> {
  await db.run('UPDATE connections SET revoked_at = ? WHERE workspace_id = ? AND id = ? AND revoked_at IS NULL', [now, workspaceId, connectionId]);
  await db.run('UPDATE oauth_tokens SET revoked_at = ? WHERE workspace_id = ? AND connection_id = ? AND revoked_at IS NULL', [now, workspaceId, connectionId]);
}

// Authorization codes.

export interface CodeRow {
  codeHash: string;
  familyId: string;
  connectionId: string;
  workspaceId: string;
  clientId: string;
  redirectUri: string;
  codeChallenge: string;
  scope: string;
  resource: string;
  expiresAt: number;
  usedAt: number | null;
  createdBy: string;
  createdAt: number;
}

const CODE_COLUMNS = `code_hash AS codeHash, family_id AS familyId, connection_id AS connectionId, workspace_id AS workspaceId,
  client_id AS clientId, redirect_uri AS redirectUri, code_challenge AS codeChallenge, scope, resource,
  expires_at AS expiresAt, used_at AS usedAt, created_by AS createdBy, created_at AS createdAt`;

export async function insertCode(db: Queryable, row: Omit<CodeRow, 'usedAt'>): Promise<void> {
  await db.run(
    `INSERT INTO oauth_codes (code_hash, family_id, connection_id, workspace_id, client_id, redirect_uri, code_challenge,
       scope, resource, expires_at, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.codeHash,
      row.familyId,
      row.connectionId,
      row.workspaceId,
      row.clientId,
      row.redirectUri,
      row.codeChallenge,
      row.scope,
      row.resource,
      row.expiresAt,
      row.createdBy,
      row.createdAt,
    ],
  );
}

export function findCode(db: Queryable, codeHash: string): Promise<CodeRow | undefined> {
  return db.get<CodeRow>(`SELECT ${CODE_COLUMNS} FROM oauth_codes WHERE code_hash = ?`, [codeHash]);
}

/** Marks a code used; false when another request used it first (guarded, so one use wins). */
export async function consumeCode(db: Queryable, codeHash: string, now: number): Promise<boolean> {
  const result = await db.run('UPDATE oauth_codes SET used_at = ? WHERE code_hash = ? AND used_at IS NULL', [now, codeHash]);
  return result.changes === 1;
}

// Access and refresh tokens.

export interface TokenRow {
  id: string;
  tokenHash: string;
  tokenPrefix: string;
  kind: 'access' | 'refresh';
  familyId: string;
  connectionId: string;
  workspaceId: string;
  clientId: string;
  scope: string;
  resource: string;
  expiresAt: number;
  rotatedAt: number | null;
  revokedAt: number | null;
  createdAt: number;
}

const tokenColumns = (t: string) => `${t}.id, ${t}.token_hash AS tokenHash, ${t}.token_prefix AS tokenPrefix, ${t}.kind,
  ${t}.family_id AS familyId, ${t}.connection_id AS connectionId, ${t}.workspace_id AS workspaceId, ${t}.client_id AS clientId,
  ${t}.scope, ${t}.resource, ${t}.expires_at AS expiresAt, ${t}.rotated_at AS rotatedAt, ${t}.revoked_at AS revokedAt,
  ${t}.created_at AS createdAt`;

export async function insertToken(db: Queryable, row: Omit<TokenRow, 'rotatedAt' | 'revokedAt'>): Promise<void> {
  await db.run(
    `INSERT INTO oauth_tokens (id, token_hash, token_prefix, kind, family_id, connection_id, workspace_id, client_id,
       scope, resource, expires_at, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [
      row.id,
      row.tokenHash,
      row.tokenPrefix,
      row.kind,
      row.familyId,
      row.connectionId,
      row.workspaceId,
      row.clientId,
      row.scope,
      row.resource,
      row.expiresAt,
      row.createdAt,
    ],
  );
}

export function findToken(db: Queryable, tokenHash: string): Promise<TokenRow | undefined> {
  return db.get<TokenRow>(`SELECT ${tokenColumns('t')} FROM oauth_tokens t WHERE t.token_hash = ?`, [tokenHash]);
}

/** An access token with what the authenticator needs of its connection and workspace, in one read. */
export interface AccessTokenView extends TokenRow {
  principal: string;
  functionsVersion: number;
  connectionAccess: 'read' | 'act';
  connectionRevokedAt: number | null;
  connectionExpiresAt: number | null;
}

export function findAccessToken(db: Queryable, tokenHash: string): Promise<AccessTokenView | undefined> {
  return db.get<AccessTokenView>(
    `SELECT ${tokenColumns('t')}, c.principal, c.access AS connectionAccess,
       c.revoked_at AS connectionRevokedAt, c.expires_at AS connectionExpiresAt,
       (SELECT w.functions_version FROM workspaces w WHERE w.id = c.workspace_id) AS functionsVersion
     FROM oauth_tokens t JOIN connections c ON c.id = t.connection_id
     WHERE t.token_hash = ? AND t.kind = 'access'`,
    [tokenHash],
  );
}

/** Marks a refresh token exchanged; false when it already was (reuse) or is revoked. */
export async function rotateRefreshToken(db: Queryable, id: string, now: number): Promise<boolean> {
  const result = await db.run("UPDATE oauth_tokens SET rotated_at = ? WHERE id = ? AND kind = 'refresh' AND rotated_at IS NULL AND revoked_at IS NULL", [
    now,
    id,
  ]);
  return result.changes === 1;
}

export async function revokeFamily(db: Queryable, familyId: string, now: number): Promise<number> {
  const result = await db.run('UPDATE oauth_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL', [now, familyId]);
  return result.changes;
}

export async function revokeTokenById(db: Queryable, id: string, now: number): Promise<void> {
  await db.run('UPDATE oauth_tokens SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL', [now, id]);
}

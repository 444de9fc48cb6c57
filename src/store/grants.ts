import { randomUUID } from 'node:crypto';
import type { Queryable } from './driver.js';
import { cutPage, newestFirstAfter, type PageQuery, type RowsPage } from './paging.js';

export const APPROVAL_MODES = ['none', 'owner', 'user'] as const;

export type ApprovalMode = (typeof APPROVAL_MODES)[number];

export interface GrantRow {
  id: string;
  principal: string;
  deviceId: string;
  capability: string;
  gatewayId: string | null;
  expiresAt: number | null;
  revokedAt: number | null;
  createdAt: number;
  /** Whether a call under it needs a human's yes first (docs/reference/rules.md "Approvals"). */
  approval: ApprovalMode;
  /** The function's kind when it was granted; null for a grant whose function was gone when migration 0014 ran. */
  functionKind: 'read' | 'control' | null;
  /** The fingerprint of the function's argument schema when it was granted (src/domain/schema-fingerprints.ts). */
  schemaFingerprint: string | null;
  /** The function as published now; null when the device no longer has it. */
  currentKind: 'read' | 'control' | null;
  currentFingerprint: string | null;
  /** The grant's conditions as JSON text (src/domain/grant-conditions.ts); null for none. */
  conditions: string | null;
}

const COLUMNS = `g.id, g.principal, g.device_id AS deviceId, g.capability, g.gateway_id AS gatewayId,
  g.expires_at AS expiresAt, g.revoked_at AS revokedAt, g.created_at AS createdAt, g.approval,
  g.function_kind AS functionKind, g.schema_fingerprint AS schemaFingerprint,
  c.kind AS currentKind, c.schema_fingerprint AS currentFingerprint, g.conditions`;
/** A grant beside the function it names, as published now. */
const GRANT_AND_FUNCTION = 'grants g LEFT JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability';

/** A grant counts when it is not revoked and not past its expiry (docs/reference/rules.md "Access"). */
export const LIVE = '(g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > ?))';

/**
 * A grant applies to the function `c` only while `c` is still what the owner granted: the same
 * kind and the same argument-schema fingerprint (docs/reference/rules.md "Access"). Every query that asks
 * "does this grant allow calling this function" includes it, over `g` (grants) and `c`
 * (capabilities joined on device and name), or other aliases through `grantMatchesFunction`.
 * A grant recorded without a fingerprint never matches (the condition is then NULL, not true).
 */
export function grantMatchesFunction(grant = 'g', fn = 'c'): string {
  return `(${grant}.function_kind = ${fn}.kind AND ${grant}.schema_fingerprint = ${fn}.schema_fingerprint)`;
}

export const GRANT_MATCHES_FUNCTION = grantMatchesFunction();

export interface GrantFilter {
  principal?: string | undefined;
  deviceId?: string | undefined;
}

/** Unrevoked grants (expired ones included, marked by expiresAt), newest first; a page of them (src/store/paging.ts). */
export async function listGrants(db: Queryable, workspaceId: string, filter: GrantFilter, page: PageQuery): Promise<RowsPage<GrantRow>> {
  const after = newestFirstAfter(page.after, 'g.created_at', 'g.id');
  const rows = await db.all<GrantRow>(
    `SELECT ${COLUMNS} FROM ${GRANT_AND_FUNCTION}
     WHERE g.workspace_id = ? AND g.revoked_at IS NULL AND (? IS NULL OR g.principal = ?) AND (? IS NULL OR g.device_id = ?) ${after.sql}
     ORDER BY g.created_at DESC, g.id LIMIT ?`,
    [workspaceId, filter.principal ?? null, filter.principal ?? null, filter.deviceId ?? null, filter.deviceId ?? null, ...after.args, page.limit + 1],
  );
  return cutPage(
    rows,
    page.limit,
    (row) => [row.createdAt, row.id],
    (row) => row,
  );
}

export function getGrant(db: Queryable, workspaceId: string, id: string): Promise<GrantRow | undefined> {
  return db.get<GrantRow>(`SELECT ${COLUMNS} FROM ${GRANT_AND_FUNCTION} WHERE g.workspace_id = ? AND g.id = ?`, [workspaceId, id]);
}

/**
 * Writes a grant, replacing the unrevoked one for the same principal, device and capability
 * (its expiry is renewed by revoking it and inserting the new row, so history keeps both).
 * The grant records the function as it is published now, read in the same statement, so the
 * kind and fingerprint are exactly what the owner granted (docs/reference/rules.md "Access"); the
 * caller has checked that the function exists.
 */
export async function putGrant(
  db: Queryable,
  grant: {
    workspaceId: string;
    principal: string;
    deviceId: string;
    capability: string;
    gatewayId: string | null;
    expiresAt: number | null;
    approval: ApprovalMode;
    createdBy: string;
    now: number;
    /** JSON text, or null for no conditions. */
    conditions?: string | null;
  },
): Promise<string> {
  await db.run(`UPDATE grants SET revoked_at = ? WHERE workspace_id = ? AND principal = ? AND device_id = ? AND capability = ? AND revoked_at IS NULL`, [
    grant.now,
    grant.workspaceId,
    grant.principal,
    grant.deviceId,
    grant.capability,
  ]);
  const id = randomUUID();
  const written = await db.run(
    `INSERT INTO grants (id, workspace_id, principal, device_id, capability, gateway_id, expires_at, approval, created_by, created_at, conditions, function_kind, schema_fingerprint)
     SELECT ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, c.kind, c.schema_fingerprint FROM capabilities c WHERE c.device_id = ? AND c.name = ?`,
    [
      id,
      grant.workspaceId,
      grant.principal,
      grant.deviceId,
      grant.capability,
      grant.gatewayId,
      grant.expiresAt,
      grant.approval,
      grant.createdBy,
      grant.now,
      grant.conditions ?? null,
      grant.deviceId,
      grant.capability,
    ],
  );
  if (written.changes !== 1) throw new Error(`putGrant: the device has no function "${grant.capability}"`);
  return id;
}

/**
 * Changes a live grant's approval mode and expiry in place (`undefined` keeps a field). The
 * function it records (kind, fingerprint) is left as it is: an edit never turns a grant into one
 * for a function the owner did not see. One guarded UPDATE; 0 when the grant is revoked.
 */
export async function updateGrant(
  db: Queryable,
  workspaceId: string,
  id: string,
  change: { approval?: ApprovalMode | undefined; expiresAt?: number | null | undefined; conditions?: string | null | undefined },
  now: number,
): Promise<number> {
  const result = await db.run(
    `UPDATE grants SET approval = coalesce(?, approval), expires_at = CASE WHEN ? THEN ? ELSE expires_at END,
       conditions = CASE WHEN ? THEN ? ELSE conditions END
     WHERE workspace_id = ? AND id = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)`,
    [
      change.approval ?? null,
      change.expiresAt !== undefined ? 1 : 0,
      change.expiresAt ?? null,
      change.conditions !== undefined ? 1 : 0,
      change.conditions ?? null,
      workspaceId,
      id,
      now,
    ],
  );
  return result.changes;
}

export async function revokeGrantById(db: Queryable, workspaceId: string, id: string, now: number): Promise<number> {
  const result = await db.run('UPDATE grants SET revoked_at = ? WHERE workspace_id = ? AND id = ? AND revoked_at IS NULL', [now, workspaceId, id]);
  return result.changes;
}

export async function revokeGrants(
  db: Queryable,
  workspaceId: string,
  match: { principal: string; deviceIds: string[]; capability?: string | undefined },
  now: number,
): Promise<number> {
  if (match.deviceIds.length === 0) return 0;
  const placeholders = match.deviceIds.map(() => '?').join(', ');
  const result = await db.run(
    `UPDATE grants SET revoked_at = ? WHERE workspace_id = ? AND principal = ? AND device_id IN (${placeholders})
       AND revoked_at IS NULL ${match.capability !== undefined ? 'AND capability = ?' : ''}`,
    [now, workspaceId, match.principal, ...match.deviceIds, ...(match.capability !== undefined ? [match.capability] : [])],
  );
  return result.changes;
}

/**
 * Revokes a principal's grants on a gateway and every child it ever had, detached ones
 * included: a child left out of the manifest keeps its id and would bring its old grants
 * back when republished (gateway-grant rules 4 and 5).
 */
export async function revokeGatewayFamilyGrants(db: Queryable, workspaceId: string, principal: string, gatewayId: string, now: number): Promise<number> {
  const result = await db.run(
    `UPDATE grants SET revoked_at = ? WHERE workspace_id = ? AND principal = ? AND revoked_at IS NULL
       AND device_id IN (SELECT id FROM devices WHERE workspace_id = ? AND (id = ? OR parent_id = ?))`,
    [now, workspaceId, principal, workspaceId, gatewayId, gatewayId],
  );
  return result.changes;
}

/**
 * The earliest expiry among a principal's live grants, or null when none expires: until then,
 * and without a write to grants, devices or capabilities, its callable functions stay the same.
 */
export async function nextGrantExpiry(db: Queryable, workspaceId: string, principal: string, now: number): Promise<number | null> {
  const row = await db.get<{ at: number | null }>(
    `SELECT min(g.expires_at) AS at FROM grants g WHERE g.workspace_id = ? AND g.principal = ? AND ${LIVE} AND g.expires_at IS NOT NULL`,
    [workspaceId, principal, now],
  );
  return row?.at ?? null;
}

/** An approval mode as a number, the strictest lowest: `owner` over `user` over `none` (docs/reference/rules.md "Approvals"). */
export const approvalRank = (column: string) => `CASE ${column} WHEN 'owner' THEN 0 WHEN 'user' THEN 1 ELSE 2 END`;

const STRICTEST_APPROVAL = approvalRank('g.approval');

/**
 * What the live access check of one function call needs, in one read (docs/reference/rules.md "Access"):
 * the device (attached to its gateway's latest manifest, else undefined) and whether it or its
 * gateway is revoked, the function as published (null when it is not), and the approval mode
 * of the principal's live grant for it that still matches the function as published (the
 * strictest, were there several; null when there is none).
 */
export interface FunctionAccessRow {
  revokedAt: number | null;
  parentId: string | null;
  /** The gateway's row exists and is revoked: 1, else 0; null for a device without a gateway. */
  parentRevoked: number | null;
  kind: 'read' | 'control' | null;
  arguments: string | null;
  approval: ApprovalMode | null;
  /** The conditions (JSON text) of that same grant; null for none or without a grant. */
  conditions: string | null;
}

export function functionAccess(
  db: Queryable,
  workspaceId: string,
  principal: string,
  deviceId: string,
  capability: string,
  now: number,
): Promise<FunctionAccessRow | undefined> {
  return db.get<FunctionAccessRow>(
    `SELECT d.revoked_at AS revokedAt, d.parent_id AS parentId,
            CASE WHEN d.parent_id IS NULL THEN NULL WHEN p.id IS NULL OR p.revoked_at IS NOT NULL THEN 1 ELSE 0 END AS parentRevoked,
            f.kind, f.arguments,
            json_extract(lg.g, '$[0]') AS approval, json_extract(lg.g, '$[1]') AS conditions
     FROM devices d LEFT JOIN devices p ON p.id = d.parent_id LEFT JOIN capabilities f ON f.device_id = d.id AND f.name = ?
     LEFT JOIN (SELECT (SELECT json_array(g.approval, g.conditions) FROM grants g JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
             WHERE g.workspace_id = ? AND g.principal = ? AND g.device_id = ? AND g.capability = ? AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION}
             ORDER BY ${STRICTEST_APPROVAL} LIMIT 1) AS g) lg
     WHERE d.workspace_id = ? AND d.id = ? AND d.detached_at IS NULL`,
    [capability, workspaceId, principal, deviceId, capability, now, workspaceId, deviceId],
  );
}

/**
 * The id of the grant `functionAccess` reads the approval mode of: the principal's live grant
 * for the function that still matches it as published. A re-grant writes a new row (`putGrant`),
 * so a changed id means the grant was revoked or replaced.
 */
export async function liveGrantId(
  db: Queryable,
  workspaceId: string,
  principal: string,
  deviceId: string,
  capability: string,
  now: number,
): Promise<string | undefined> {
  const row = await db.get<{ id: string }>(
    `SELECT g.id FROM grants g JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
     WHERE g.workspace_id = ? AND g.principal = ? AND g.device_id = ? AND g.capability = ? AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION}
     ORDER BY ${STRICTEST_APPROVAL} LIMIT 1`,
    [workspaceId, principal, deviceId, capability, now],
  );
  return row?.id;
}

/** Capabilities published before migration 0014, which have no fingerprint yet. */
export function unfingerprintedCapabilities(db: Queryable): Promise<{ deviceId: string; name: string; arguments: string }[]> {
  return db.all('SELECT device_id AS deviceId, name, arguments FROM capabilities WHERE schema_fingerprint IS NULL');
}

export async function setCapabilityFingerprint(db: Queryable, deviceId: string, name: string, fingerprint: string): Promise<void> {
  await db.run('UPDATE capabilities SET schema_fingerprint = ? WHERE device_id = ? AND name = ? AND schema_fingerprint IS NULL', [fingerprint, deviceId, name]);
}

/**
 * Gives each grant migration 0014 recorded a kind for the fingerprint of its function, which
 * still has that kind: nothing was published between the migration and this backfill.
 */
export async function fingerprintMigratedGrants(db: Queryable): Promise<void> {
  await db.run(
    `UPDATE grants SET schema_fingerprint = (
       SELECT c.schema_fingerprint FROM capabilities c WHERE c.device_id = grants.device_id AND c.name = grants.capability AND c.kind = grants.function_kind)
     WHERE schema_fingerprint IS NULL AND function_kind IS NOT NULL`,
  );
}

/** The conditions (JSON text) of a principal's unrevoked grant for one device function; null for none or without a grant. */
export async function grantConditionsOf(db: Queryable, workspaceId: string, principal: string, deviceId: string, capability: string): Promise<string | null> {
  const row = await db.get<{ conditions: string | null }>(
    'SELECT conditions FROM grants WHERE workspace_id = ? AND principal = ? AND device_id = ? AND capability = ? AND revoked_at IS NULL',
    [workspaceId, principal, deviceId, capability],
  );
  return row?.conditions ?? null;
}

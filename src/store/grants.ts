import { randomUUID } from 'node:crypto';
import type { Queryable } from './driver.js';
import { cutPage, newestFirstAfter, type PageQuery, type RowsPage } from './paging.js';

export interface GrantRow {
  id: string;
  principal: string;
  deviceId: string;
  capability: string;
  gatewayId: string | null;
  expiresAt: number | null;
  revokedAt: number | null;
  createdAt: number;
}

const COLUMNS = `id, principal, device_id AS deviceId, capability, gateway_id AS gatewayId,
  expires_at AS expiresAt, revoked_at AS revokedAt, created_at AS createdAt`;

/** A grant counts when it is not revoked and not past its expiry (docs/rules.md "Access"). */
const LIVE = '(g.revoked_at IS NULL AND (g.expires_at IS NULL OR g.expires_at > ?))';

export interface GrantFilter {
  principal?: string | undefined;
  deviceId?: string | undefined;
}

/** Unrevoked grants (expired ones included, marked by expiresAt), newest first; a page of them (src/store/paging.ts). */
export async function listGrants(db: Queryable, workspaceId: string, filter: GrantFilter, page: PageQuery): Promise<RowsPage<GrantRow>> {
  const after = newestFirstAfter(page.after, 'created_at', 'id');
  const rows = await db.all<GrantRow>(
    `SELECT ${COLUMNS} FROM grants
     WHERE workspace_id = ? AND revoked_at IS NULL AND (? IS NULL OR principal = ?) AND (? IS NULL OR device_id = ?) ${after.sql}
     ORDER BY created_at DESC, id LIMIT ?`,
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
  return db.get<GrantRow>(`SELECT ${COLUMNS} FROM grants WHERE workspace_id = ? AND id = ?`, [workspaceId, id]);
}

/**
 * Writes a grant, replacing the unrevoked one for the same principal, device and capability
 * (its expiry is renewed by revoking it and inserting the new row, so history keeps both).
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
    createdBy: string;
    now: number;
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
  await db.run(
    `INSERT INTO grants (id, workspace_id, principal, device_id, capability, gateway_id, expires_at, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
    [id, grant.workspaceId, grant.principal, grant.deviceId, grant.capability, grant.gatewayId, grant.expiresAt, grant.createdBy, grant.now],
  );
  return id;
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

export interface FunctionRow {
  deviceId: string;
  deviceName: string;
  deviceKind: 'device' | 'gateway' | 'service';
  parentId: string | null;
  parentName: string | null;
  capability: string;
  kind: 'read' | 'control';
  description: string | null;
  arguments: string;
}

const FUNCTION_COLUMNS = `c.device_id AS deviceId, d.name AS deviceName, d.kind AS deviceKind, d.parent_id AS parentId,
  p.name AS parentName, c.name AS capability, c.kind, c.description, c.arguments`;
/** Functions in device then manifest order, keyed by `(device created_at, device id, position)`. */
const FUNCTION_ORDER = 'ORDER BY d.created_at, d.id, c.position';
const FUNCTION_KEY = 'AND (d.created_at, d.id, c.position) > (?, ?, ?)';

const USABLE_DEVICE = 'd.revoked_at IS NULL AND d.detached_at IS NULL AND (p.id IS NULL OR p.revoked_at IS NULL)';

/**
 * The functions a principal may call now: the intersection of docs/rules.md "Access" — a live grant,
 * the ceiling (`read` sees read functions only), and an attached, unrevoked device.
 */
export function callableFunctions(
  db: Queryable,
  workspaceId: string,
  principal: string,
  ceiling: 'read' | 'act',
  now: number,
  /** Only devices whose id starts with this text: one tool call's device, found through the grants index. */
  deviceIdPrefix?: string,
): Promise<FunctionRow[]> {
  const narrowed = deviceIdPrefix !== undefined;
  return db.all<FunctionRow>(
    `SELECT ${FUNCTION_COLUMNS}
     FROM grants g
     JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
     JOIN devices d ON d.id = g.device_id
     LEFT JOIN devices p ON p.id = d.parent_id
     WHERE g.workspace_id = ? AND g.principal = ? AND ${LIVE} AND ${USABLE_DEVICE} AND (? = 'act' OR c.kind = 'read')
       ${narrowed ? 'AND g.device_id >= ? AND g.device_id < ?' : ''}
     ${FUNCTION_ORDER}`,
    // Device ids are lowercase UUID text: every character after the prefix sorts below '~'.
    [workspaceId, principal, now, ceiling, ...(narrowed ? [deviceIdPrefix, `${deviceIdPrefix}~`] : [])],
  );
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

function functionsPage(rows: (FunctionRow & { createdAt: number; position: number })[], limit: number): RowsPage<FunctionRow> {
  return cutPage(
    rows,
    limit,
    (row) => [row.createdAt, row.deviceId, row.position],
    ({ createdAt: _createdAt, position: _position, ...row }) => row,
  );
}

/** A page of the functions a principal may call now (the same rule as `callableFunctions`). */
export async function callableFunctionsPage(
  db: Queryable,
  workspaceId: string,
  principal: string,
  ceiling: 'read' | 'act',
  now: number,
  page: PageQuery,
): Promise<RowsPage<FunctionRow>> {
  const rows = await db.all<FunctionRow & { createdAt: number; position: number }>(
    `SELECT ${FUNCTION_COLUMNS}, d.created_at AS createdAt, c.position
     FROM grants g
     JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
     JOIN devices d ON d.id = g.device_id
     LEFT JOIN devices p ON p.id = d.parent_id
     WHERE g.workspace_id = ? AND g.principal = ? AND ${LIVE} AND ${USABLE_DEVICE} AND (? = 'act' OR c.kind = 'read')
       ${page.after ? FUNCTION_KEY : ''}
     ${FUNCTION_ORDER} LIMIT ?`,
    [workspaceId, principal, now, ceiling, ...(page.after ?? []), page.limit + 1],
  );
  return functionsPage(rows, page.limit);
}

/** A page of every function of the workspace's usable devices (what an owner may grant). */
export async function workspaceFunctions(db: Queryable, workspaceId: string, page: PageQuery): Promise<RowsPage<FunctionRow>> {
  const rows = await db.all<FunctionRow & { createdAt: number; position: number }>(
    `SELECT ${FUNCTION_COLUMNS}, d.created_at AS createdAt, c.position
     FROM capabilities c JOIN devices d ON d.id = c.device_id LEFT JOIN devices p ON p.id = d.parent_id
     WHERE c.workspace_id = ? AND ${USABLE_DEVICE} ${page.after ? FUNCTION_KEY : ''}
     ${FUNCTION_ORDER} LIMIT ?`,
    [workspaceId, ...(page.after ?? []), page.limit + 1],
  );
  return functionsPage(rows, page.limit);
}

/** Whether a live grant exists for exactly this principal, device and capability. */
export async function hasLiveGrant(db: Queryable, workspaceId: string, principal: string, deviceId: string, capability: string, now: number): Promise<boolean> {
  const row = await db.get<{ one: number }>(
    `SELECT 1 AS one FROM grants g WHERE g.workspace_id = ? AND g.principal = ? AND g.device_id = ? AND g.capability = ? AND ${LIVE}`,
    [workspaceId, principal, deviceId, capability, now],
  );
  return row !== undefined;
}

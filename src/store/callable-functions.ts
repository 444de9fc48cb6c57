import type { Queryable } from './driver.js';
import { cutPage, type PageQuery, type RowsPage } from './paging.js';
import { GRANT_MATCHES_FUNCTION, LIVE, type ApprovalMode } from './grants.js';

/**
 * The functions a principal may call, and those of the whole workspace: a grant joined to the
 * function it names on an attached, unrevoked device. Grants themselves are in grants.ts.
 */

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

/** A function an agent may call, with the approval mode and conditions of the grant that allows it. */
export interface CallableFunctionRow extends FunctionRow {
  approval: ApprovalMode;
  /** The grant's conditions as JSON text; null for none. */
  conditions: string | null;
}

const FUNCTION_COLUMNS = `c.device_id AS deviceId, d.name AS deviceName, d.kind AS deviceKind, d.parent_id AS parentId,
  p.name AS parentName, c.name AS capability, c.kind, c.description, c.arguments`;
/** Functions in device then manifest order, keyed by `(device created_at, device id, position)`. */
const FUNCTION_ORDER = 'ORDER BY d.created_at, d.id, c.position';
const FUNCTION_KEY = 'AND (d.created_at, d.id, c.position) > (?, ?, ?)';

const USABLE_DEVICE = 'd.revoked_at IS NULL AND d.detached_at IS NULL AND (p.id IS NULL OR p.revoked_at IS NULL)';

/**
 * The functions a principal may call now: the intersection of docs/reference/rules.md "Access" — a live grant,
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
): Promise<CallableFunctionRow[]> {
  const narrowed = deviceIdPrefix !== undefined;
  return db.all<CallableFunctionRow>(
    `SELECT ${FUNCTION_COLUMNS}, g.approval, g.conditions
     FROM grants g
     JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
     JOIN devices d ON d.id = g.device_id
     LEFT JOIN devices p ON p.id = d.parent_id
     WHERE g.workspace_id = ? AND g.principal = ? AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION} AND ${USABLE_DEVICE} AND (? = 'act' OR c.kind = 'read')
       ${narrowed ? 'AND g.device_id >= ? AND g.device_id < ?' : ''}
     ${FUNCTION_ORDER}`,
    // Device ids are lowercase UUID text: every character after the prefix sorts below '~'.
    [workspaceId, principal, now, ceiling, ...(narrowed ? [deviceIdPrefix, `${deviceIdPrefix}~`] : [])],
  );
}

/** The page's rows keep their key columns (`createdAt`, `position`): callers map the fields they show. */
function functionsPage<Row extends FunctionRow>(rows: (Row & { createdAt: number; position: number })[], limit: number): RowsPage<Row> {
  return cutPage(
    rows,
    limit,
    (row) => [row.createdAt, row.deviceId, row.position],
    (row) => row,
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
): Promise<RowsPage<CallableFunctionRow>> {
  const rows = await db.all<CallableFunctionRow & { createdAt: number; position: number }>(
    `SELECT ${FUNCTION_COLUMNS}, g.approval, g.conditions, d.created_at AS createdAt, c.position
     FROM grants g
     JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
     JOIN devices d ON d.id = g.device_id
     LEFT JOIN devices p ON p.id = d.parent_id
     WHERE g.workspace_id = ? AND g.principal = ? AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION} AND ${USABLE_DEVICE} AND (? = 'act' OR c.kind = 'read')
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

/**
 * Which of these devices the principal may read state of now: those with a read function it
 * holds a live grant on, by the same rule as `callableFunctions`, in one read for the lot.
 */
export async function devicesWithReadableState(
  db: Queryable,
  workspaceId: string,
  principal: string,
  now: number,
  deviceIds: readonly string[],
): Promise<Set<string>> {
  if (deviceIds.length === 0) return new Set();
  const rows = await db.all<{ deviceId: string }>(
    `SELECT DISTINCT g.device_id AS deviceId
     FROM grants g
     JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
     JOIN devices d ON d.id = g.device_id
     LEFT JOIN devices p ON p.id = d.parent_id
     WHERE g.workspace_id = ? AND g.principal = ? AND g.device_id IN (SELECT value FROM json_each(?))
       AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION} AND ${USABLE_DEVICE} AND c.kind = 'read'`,
    [workspaceId, principal, JSON.stringify(deviceIds), now],
  );
  return new Set(rows.map((row) => row.deviceId));
}

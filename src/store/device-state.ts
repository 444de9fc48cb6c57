import type { Queryable } from './driver.js';
import { GRANT_MATCHES_FUNCTION, LIVE } from './grants.js';

/** A device's last-known value of one read function (migration 0034). */
export interface StateValueRow {
  capability: string;
  /** JSON text. */
  value: string;
  reportedAt: number;
  source: 'result' | 'report';
  actionId: string | null;
}

/** A device, with its last-known values as one reader may see them: one read. */
export interface DeviceStateRows {
  deviceId: string;
  lastSeenAt: number | null;
  revokedAt: number | null;
  /** For an agent: whether it holds any live grant on the device at all; 1 for an owner. */
  granted: number;
  values: StateValueRow[];
}

/**
 * The function an action handed to `targetId` runs, as published now: its kind and its result
 * schema (JSON text, null when it declares none); undefined when no such action is handed to
 * the device, or its function is gone.
 */
export async function functionOfAction(
  db: Queryable,
  targetId: string,
  actionId: string,
): Promise<{ kind: 'read' | 'control'; result: string | null } | undefined> {
  const row = await db.get<{ kind: 'read' | 'control' | null; result: string | null }>(
    `SELECT c.kind, c.result FROM actions a LEFT JOIN capabilities c ON c.device_id = a.device_id AND c.name = a.capability
     WHERE a.id = ? AND a.target_id = ?`,
    [actionId, targetId],
  );
  return row?.kind ? { kind: row.kind, result: row.result } : undefined;
}

/** The functions a device publishes, for a report it or its gateway (`reporterId`) sends: undefined when the device is not the reporter's. */
export async function reportableFunctions(
  db: Queryable,
  workspaceId: string,
  reporterId: string,
  deviceId: string,
): Promise<{ name: string; kind: 'read' | 'control'; result: string | null }[] | undefined> {
  const rows = await db.all<{ name: string | null; kind: 'read' | 'control' | null; result: string | null }>(
    `SELECT c.name, c.kind, c.result FROM devices d LEFT JOIN capabilities c ON c.device_id = d.id
     WHERE d.workspace_id = ? AND d.id = ? AND (d.id = ? OR d.parent_id = ?) AND d.detached_at IS NULL AND d.revoked_at IS NULL`,
    [workspaceId, deviceId, reporterId, reporterId],
  );
  if (rows.length === 0) return undefined;
  return rows.filter((row) => row.name !== null).map((row) => ({ name: row.name!, kind: row.kind!, result: row.result }));
}

/**
 * Stores a device's reported values in one statement, while the workspace's `action_bytes` is
 * not full already (`byteLimit`); an equal value only moves `reported_at`. Answers the rows
 * written with whether each value changed and whether its `device.state_changed` was journalled
 * now, or undefined when the budget refused the report.
 */
export async function storeReportedValues(
  db: Queryable,
  workspaceId: string,
  deviceId: string,
  values: { capability: string; value: string }[],
  now: number,
  byteLimit: number,
): Promise<{ capability: string; changed: number; journalled: number }[] | undefined> {
  const rows = await db.all<{ capability: string; changed: number; journalled: number }>(
    `INSERT INTO device_state (device_id, workspace_id, capability, value, source, action_id, reported_at, changed_at, event_at)
     SELECT ?, ?, json_extract(e.value, '$[0]'), json_extract(e.value, '$[1]'), 'report', NULL, ?, ?, ? FROM json_each(?) e
     WHERE NOT EXISTS (SELECT 1 FROM workspace_usage u WHERE u.workspace_id = ? AND u.action_bytes >= ?)
     ON CONFLICT (device_id, capability) DO UPDATE SET
       changed_at = CASE WHEN device_state.value = excluded.value THEN device_state.changed_at ELSE excluded.reported_at END,
       ${OWED_EVENT_COLUMNS},
       value = excluded.value, source = excluded.source, action_id = NULL, reported_at = excluded.reported_at
     RETURNING capability, changed_at = reported_at AS changed, event_at = reported_at AS journalled`,
    [deviceId, workspaceId, now, now, now, JSON.stringify(values.map((v) => [v.capability, v.value])), workspaceId, byteLimit],
  );
  return rows.length === 0 ? undefined : rows;
}

/** The shortest time between two `device.state_changed` events of one device and function. */
export const STATE_EVENT_INTERVAL_MS = 1000;

/**
 * The upsert's bookkeeping of `device.state_changed` (migration 0034, which repeats it for
 * results): an event is journalled (event_at moves) when the value changed, or a change is
 * owed, a second or more after the last event; a change within that second is owed instead.
 */
const OWED_EVENT_COLUMNS = `event_pending = CASE WHEN (device_state.value <> excluded.value OR device_state.event_pending = 1)
         AND excluded.reported_at - device_state.event_at < ${STATE_EVENT_INTERVAL_MS} THEN 1 ELSE 0 END,
       event_at = CASE WHEN (device_state.value <> excluded.value OR device_state.event_pending = 1)
         AND excluded.reported_at - device_state.event_at >= ${STATE_EVENT_INTERVAL_MS} THEN excluded.reported_at ELSE device_state.event_at END`;

/**
 * Journals the owed `device.state_changed` events whose second has passed, with the latest
 * value (the trigger writes them as event_at moves), at most `limit` in one statement.
 * Answers the workspaces that got one.
 */
export async function flushOwedStateEvents(db: Queryable, now: number, limit: number): Promise<string[]> {
  const rows = await db.all<{ workspaceId: string }>(
    `UPDATE device_state SET event_at = ?, event_pending = 0
     WHERE (device_id, capability) IN (SELECT device_id, capability FROM device_state WHERE event_pending = 1 AND event_at <= ? LIMIT ?)
       AND event_pending = 1
     RETURNING workspace_id AS workspaceId`,
    [now, now - STATE_EVENT_INTERVAL_MS, limit],
  );
  return [...new Set(rows.map((row) => row.workspaceId))];
}

/**
 * A device with the last-known values `principal` may see (every read function's for an owner,
 * `principal` null; an agent's: only those of read functions it holds a live grant on), in
 * manifest order; undefined when the device is not the workspace's, or, for an agent, is not
 * usable. One read.
 */
export async function readDeviceState(
  db: Queryable,
  workspaceId: string,
  deviceId: string,
  principal: string | null,
  now: number,
): Promise<DeviceStateRows | undefined> {
  const liveOn = (capability: string) =>
    `EXISTS (SELECT 1 FROM grants g JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
       WHERE g.workspace_id = d.workspace_id AND g.principal = ? AND g.device_id = d.id AND ${capability} AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION})`;
  const agent = principal !== null;
  const rows = await db.all<Omit<DeviceStateRows, 'values'> & Partial<StateValueRow> & { capability: string | null }>(
    `SELECT d.id AS deviceId, CASE WHEN d.parent_id IS NULL THEN d.last_seen_at ELSE p.last_seen_at END AS lastSeenAt,
            coalesce(d.revoked_at, p.revoked_at) AS revokedAt, ${agent ? liveOn('1 = 1') : '1'} AS granted,
            s.capability, s.value, s.reported_at AS reportedAt, s.source, s.action_id AS actionId
     FROM devices d LEFT JOIN devices p ON p.id = d.parent_id
     LEFT JOIN (device_state s JOIN capabilities f ON f.device_id = s.device_id AND f.name = s.capability AND f.kind = 'read')
       ON s.device_id = d.id ${agent ? `AND ${liveOn('g.capability = s.capability')}` : ''}
     WHERE d.workspace_id = ? AND d.id = ? AND d.detached_at IS NULL
       ${agent ? 'AND d.revoked_at IS NULL AND (p.id IS NULL OR p.revoked_at IS NULL)' : ''}
     ORDER BY f.position`,
    [...(agent ? [principal, now, principal, now] : []), workspaceId, deviceId],
  );
  const first = rows[0];
  if (!first) return undefined;
  return {
    deviceId: first.deviceId,
    lastSeenAt: first.lastSeenAt,
    revokedAt: first.revokedAt,
    granted: first.granted,
    values: rows
      .filter((row) => row.capability !== null)
      .map((row) => ({ capability: row.capability!, value: row.value!, reportedAt: row.reportedAt!, source: row.source!, actionId: row.actionId ?? null })),
  };
}

/** One last-known value of some device (`readStateValuesOf`). */
export interface DeviceStateValueRow extends StateValueRow {
  deviceId: string;
}

/**
 * The last-known values of several devices as `principal` may see them (every read function's
 * for an owner, `principal` null; an agent's: only those of read functions it holds a live
 * grant on), each device's in manifest order: one read for a page of devices, where reading
 * each device's state would be one read per device.
 */
export function readStateValuesOf(
  db: Queryable,
  workspaceId: string,
  deviceIds: readonly string[],
  principal: string | null,
  now: number,
): Promise<DeviceStateValueRow[]> {
  const agent = principal !== null;
  return db.all<DeviceStateValueRow>(
    `SELECT s.device_id AS deviceId, s.capability, s.value, s.reported_at AS reportedAt, s.source, s.action_id AS actionId
     FROM device_state s JOIN capabilities f ON f.device_id = s.device_id AND f.name = s.capability AND f.kind = 'read'
     WHERE s.workspace_id = ? AND s.device_id IN (SELECT value FROM json_each(?))
       ${
         agent
           ? `AND EXISTS (SELECT 1 FROM grants g JOIN capabilities c ON c.device_id = g.device_id AND c.name = g.capability
                WHERE g.workspace_id = s.workspace_id AND g.principal = ? AND g.device_id = s.device_id AND g.capability = s.capability
                  AND ${LIVE} AND ${GRANT_MATCHES_FUNCTION})`
           : ''
       }
     ORDER BY s.device_id, f.position`,
    [workspaceId, JSON.stringify(deviceIds), ...(agent ? [principal, now] : [])],
  );
}

import { randomUUID } from 'node:crypto';
import type { Queryable } from './driver.js';
import { cutPage, type PageQuery, type RowsPage } from './paging.js';

export type DeviceKind = 'device' | 'gateway' | 'service';

export interface DeviceRow {
  id: string;
  workspaceId: string;
  name: string;
  kind: DeviceKind;
  parentId: string | null;
  /** A gateway child's key in its gateway's manifest; null for attached devices. */
  childKey: string | null;
  /** For a gateway's child: when its gateway last called in. */
  lastSeenAt: number | null;
  revokedAt: number | null;
  createdAt: number;
}

export interface CapabilityRow {
  deviceId: string;
  name: string;
  kind: 'read' | 'control';
  description: string | null;
  /** JSON text of the argument schema. */
  arguments: string;
  /** JSON text of the result schema; null when the function declares none. */
  result: string | null;
}

export interface CapabilityInput {
  name: string;
  kind: 'read' | 'control';
  description?: string | undefined;
  arguments: Record<string, unknown>;
  result?: Record<string, unknown> | undefined;
  /** What grants record and are matched against (src/domain/schema-fingerprints.ts). */
  schemaFingerprint: string;
}

export interface ChildInput {
  key: string;
  name: string;
  kind: 'device' | 'service';
  capabilities: CapabilityInput[];
}

const COLUMNS = `d.id, d.workspace_id AS workspaceId, d.name, d.kind, d.parent_id AS parentId, d.child_key AS childKey,
  CASE WHEN d.parent_id IS NULL THEN d.last_seen_at ELSE p.last_seen_at END AS lastSeenAt,
  d.revoked_at AS revokedAt, d.created_at AS createdAt`;
const FROM = 'devices d LEFT JOIN devices p ON p.id = d.parent_id';

export async function insertDevice(
  db: Queryable,
  row: {
    id: string;
    workspaceId: string;
    name: string;
    kind: 'device' | 'gateway';
    tokenHash: string;
    tokenPrefix: string;
    attachedVia: string;
    createdAt: number;
  },
): Promise<void> {
  await db.run(
    `INSERT INTO devices (id, workspace_id, name, kind, token_hash, token_prefix, attached_via, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
    [row.id, row.workspaceId, row.name, row.kind, row.tokenHash, row.tokenPrefix, row.attachedVia, row.createdAt],
  );
}

/**
 * The device a token belongs to, with its workspace's routing id and whether the device or one
 * of its children declares a result schema: a result report reads the function it answers only
 * then (docs/devices/state.md), so a device without result schemas pays no read for them.
 */
export function findDeviceByTokenHash(db: Queryable, tokenHash: string): Promise<(DeviceRow & { routingId: string; declaresResults: number }) | undefined> {
  return db.get<DeviceRow & { routingId: string; declaresResults: number }>(
    `SELECT ${COLUMNS}, w.routing_id AS routingId,
            EXISTS (SELECT 1 FROM capabilities c WHERE c.result IS NOT NULL
                      AND c.device_id IN (SELECT x.id FROM devices x WHERE x.id = d.id OR x.parent_id = d.id)) AS declaresResults
     FROM ${FROM} JOIN workspaces w ON w.id = d.workspace_id WHERE d.token_hash = ?`,
    [tokenHash],
  );
}

/** A device of the workspace, unless it was left out of its gateway's latest manifest. */
export function getDevice(db: Queryable, workspaceId: string, id: string): Promise<DeviceRow | undefined> {
  return db.get<DeviceRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE d.workspace_id = ? AND d.id = ? AND d.detached_at IS NULL`, [workspaceId, id]);
}

/** Attachment order; a gateway's children in the order its manifest first listed them. */
export function listDevices(db: Queryable, workspaceId: string): Promise<DeviceRow[]> {
  return db.all<DeviceRow>(`SELECT ${COLUMNS} FROM ${FROM} WHERE d.workspace_id = ? AND d.detached_at IS NULL ORDER BY d.created_at, d.rowid`, [workspaceId]);
}

/**
 * A page of the workspace's devices in attachment order (src/store/paging.ts), keyed by
 * `(created_at, rowid)`, the order `devices_by_workspace` already holds; `onlyIds` narrows it
 * to the devices an agent may see.
 */
export async function listDevicesPage(db: Queryable, workspaceId: string, page: PageQuery, onlyIds: readonly string[] | null): Promise<RowsPage<DeviceRow>> {
  const rows = await db.all<DeviceRow & { position: number }>(
    `SELECT ${COLUMNS}, d.rowid AS position FROM ${FROM} WHERE d.workspace_id = ? AND d.detached_at IS NULL
       ${onlyIds ? 'AND d.id IN (SELECT value FROM json_each(?))' : ''} ${page.after ? 'AND (d.created_at, d.rowid) > (?, ?)' : ''}
     ORDER BY d.created_at, d.rowid LIMIT ?`,
    [workspaceId, ...(onlyIds ? [JSON.stringify(onlyIds)] : []), ...(page.after ?? []), page.limit + 1],
  );
  return cutPage(
    rows,
    page.limit,
    (row) => [row.createdAt, row.position],
    ({ position: _position, ...row }) => row,
  );
}

/** The capabilities of some devices, each device's in manifest order. */
export function listCapabilitiesOf(db: Queryable, workspaceId: string, deviceIds: readonly string[]): Promise<CapabilityRow[]> {
  return db.all<CapabilityRow>(
    `SELECT device_id AS deviceId, name, kind, description, arguments, result FROM capabilities
     WHERE workspace_id = ? AND device_id IN (SELECT value FROM json_each(?)) ORDER BY device_id, position`,
    [workspaceId, JSON.stringify(deviceIds)],
  );
}

export function listCapabilities(db: Queryable, workspaceId: string): Promise<CapabilityRow[]> {
  return db.all<CapabilityRow>(
    `SELECT device_id AS deviceId, name, kind, description, arguments, result FROM capabilities
     WHERE workspace_id = ? ORDER BY device_id, position`,
    [workspaceId],
  );
}

export function listDeviceCapabilities(db: Queryable, workspaceId: string, deviceId: string): Promise<CapabilityRow[]> {
  return db.all<CapabilityRow>(
    `SELECT device_id AS deviceId, name, kind, description, arguments, result FROM capabilities
     WHERE workspace_id = ? AND device_id = ? ORDER BY position`,
    [workspaceId, deviceId],
  );
}

/** A gateway's children that count against capacity now: in its manifest and not revoked. */
export function listChildKeys(db: Queryable, gatewayId: string): Promise<{ id: string; childKey: string }[]> {
  return db.all<{ id: string; childKey: string }>(
    'SELECT id, child_key AS childKey FROM devices WHERE parent_id = ? AND detached_at IS NULL AND revoked_at IS NULL',
    [gatewayId],
  );
}

/** Revokes a device and, for a gateway, its children: their commands have no other way in. */
export async function revokeDevice(db: Queryable, workspaceId: string, id: string, now: number): Promise<number> {
  const result = await db.run('UPDATE devices SET revoked_at = ? WHERE workspace_id = ? AND (id = ? OR parent_id = ?) AND revoked_at IS NULL', [
    now,
    workspaceId,
    id,
    id,
  ]);
  return result.changes;
}

/** The owner names a device: the name is kept over any a manifest publishes later (migration 0032). */
export async function renameDevice(db: Queryable, workspaceId: string, id: string, name: string): Promise<boolean> {
  const result = await db.run('UPDATE devices SET name = ?, named_by_owner = 1 WHERE workspace_id = ? AND id = ?', [name, workspaceId, id]);
  return result.changes > 0;
}

/** How stale last_seen_at may get before a device's call writes it again. */
export const SEEN_WRITE_INTERVAL_MS = 5000;

/**
 * Records that a device called in; written at most every few seconds per device. The same
 * UPDATE marks it reported online: when it was not, migration 0018's trigger journals
 * `device.online` in this statement (docs/reference/events.md "Owner events"), so the hot path costs no extra write.
 */
export async function touchDevice(db: Queryable, id: string, now: number): Promise<void> {
  await db.run('UPDATE devices SET last_seen_at = ?, reported_online = 1 WHERE id = ? AND (last_seen_at IS NULL OR last_seen_at < ?)', [
    now,
    id,
    now - SEEN_WRITE_INTERVAL_MS,
  ]);
}

/**
 * Marks devices quiet since `quietSince` as reported offline, at most `limit` per statement;
 * migration 0018's trigger journals `device.offline` for each, once: the guard on
 * `reported_online` lets only one instance's sweep change a given device. Revoked devices
 * are left alone (`device.revoked` said it). Returns the workspaces that got an event.
 */
export async function markQuietDevicesOffline(db: Queryable, quietSince: number, limit: number): Promise<string[]> {
  const rows = await db.all<{ workspaceId: string }>(
    `UPDATE devices SET reported_online = 0
      WHERE id IN (SELECT id FROM devices WHERE reported_online = 1 AND last_seen_at < ? AND revoked_at IS NULL LIMIT ?)
        AND reported_online = 1
     RETURNING workspace_id AS workspaceId`,
    [quietSince, limit],
  );
  return rows.map((row) => row.workspaceId);
}

async function replaceCapabilities(db: Queryable, workspaceId: string, deviceId: string, capabilities: CapabilityInput[]) {
  await db.run('DELETE FROM capabilities WHERE device_id = ?', [deviceId]);
  for (const [position, capability] of capabilities.entries()) {
    await db.run(
      `INSERT INTO capabilities (device_id, workspace_id, name, kind, description, arguments, position, schema_fingerprint, result)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      [
        deviceId,
        workspaceId,
        capability.name,
        capability.kind,
        capability.description ?? null,
        JSON.stringify(capability.arguments),
        position,
        capability.schemaFingerprint,
        capability.result === undefined ? null : JSON.stringify(capability.result),
      ],
    );
  }
}

export interface PublishedFunction {
  deviceId: string;
  name: string;
  kind: 'read' | 'control';
  schemaFingerprint: string | null;
}

/** What grants are matched against, for a device and every child it has had: compared before and after a republish. */
export function familyFunctions(db: Queryable, workspaceId: string, deviceId: string): Promise<PublishedFunction[]> {
  return db.all<PublishedFunction>(
    `SELECT c.device_id AS deviceId, c.name, c.kind, c.schema_fingerprint AS schemaFingerprint FROM capabilities c
     WHERE c.workspace_id = ? AND c.device_id IN (SELECT id FROM devices WHERE workspace_id = ? AND (id = ? OR parent_id = ?))`,
    [workspaceId, workspaceId, deviceId, deviceId],
  );
}

/**
 * Replaces a device's manifest. A gateway's children keep a stable id per `key`: a key seen
 * before gets its old record back, a new key gets a new record, and a key left out is
 * detached (hidden, kept for history). Run inside a transaction.
 */
export async function replaceManifest(
  db: Queryable,
  device: { workspaceId: string; id: string },
  capabilities: CapabilityInput[],
  children: ChildInput[],
  now: number,
): Promise<void> {
  await replaceCapabilities(db, device.workspaceId, device.id, capabilities);
  const existing = await db.all<{ id: string; childKey: string }>('SELECT id, child_key AS childKey FROM devices WHERE parent_id = ?', [device.id]);
  const byKey = new Map(existing.map((row) => [row.childKey, row.id]));
  for (const child of children) {
    let childId = byKey.get(child.key);
    if (childId) {
      // A name the owner gave the child (renameDevice) wins over the one its gateway publishes.
      await db.run('UPDATE devices SET name = CASE named_by_owner WHEN 1 THEN name ELSE ? END, kind = ?, detached_at = NULL WHERE id = ?', [
        child.name,
        child.kind,
        childId,
      ]);
      byKey.delete(child.key);
    } else {
      childId = randomUUID();
      await db.run(
        `INSERT INTO devices (id, workspace_id, parent_id, child_key, name, kind, attached_via, created_at)
         SELECT ?, workspace_id, id, ?, ?, ?, attached_via, ? FROM devices WHERE id = ?`,
        [childId, child.key, child.name, child.kind, now, device.id],
      );
    }
    await replaceCapabilities(db, device.workspaceId, childId, child.capabilities);
  }
  for (const goneId of byKey.values()) {
    await db.run('UPDATE devices SET detached_at = ? WHERE id = ? AND detached_at IS NULL', [now, goneId]);
  }
  // A last-known value goes with its function: one the manifest no longer publishes as a read
  // function, on the device or any of its children, is deleted.
  await db.run(
    `DELETE FROM device_state WHERE workspace_id = ? AND device_id IN (SELECT id FROM devices WHERE id = ? OR parent_id = ?)
       AND NOT EXISTS (SELECT 1 FROM capabilities c WHERE c.device_id = device_state.device_id AND c.name = device_state.capability AND c.kind = 'read')`,
    [device.workspaceId, device.id, device.id],
  );
}

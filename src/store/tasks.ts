import type { DeviceKind } from './devices.js';
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

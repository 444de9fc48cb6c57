import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { issueToken } from './tokens.js';
import { cancelQueuedForTarget, cancelWithdrawn, recallWithdrawn } from '../store/action-withdrawals.js';
import { claimAttachSlot, getConnection } from '../store/connections.js';
import {
  getDevice,
  insertDevice,
  listCapabilities,
  listCapabilitiesOf,
  listDevices,
  listDevicesPage,
  revokeDevice,
  SEEN_WRITE_INTERVAL_MS,
  touchDevice,
  type CapabilityRow,
  type DeviceRow,
} from '../store/devices.js';
import type { Queryable } from '../store/driver.js';
import { getWorkspace } from '../store/workspaces.js';
import { publishActions } from './action-publishing.js';
import { assertDeviceCapacity } from './capacity.js';
import type { OperationContext, CredentialOf } from './context.js';
import { DomainError, fail } from './errors.js';
import { listCallableFunctions } from './functions.js';
import { defineOperation, definePagedOperation } from './operation.js';
import { ROW_ORDER_KEY } from './paging.js';
import { announceJournal } from './event-hub.js';
import { attachedDevice, device, uuid } from './schemas.js';

export const ONLINE_WINDOW_MS = 60_000;

export type DeviceRecord = z.input<typeof device>;

export function toDeviceRecord(row: DeviceRow, capabilities: CapabilityRow[], now: number): DeviceRecord {
  return {
    id: row.id,
    name: row.name,
    kind: row.kind,
    parentId: row.parentId,
    key: row.childKey,
    online: row.revokedAt === null && row.lastSeenAt !== null && now - row.lastSeenAt < ONLINE_WINDOW_MS,
    lastSeenAt: row.lastSeenAt,
    revoked: row.revokedAt !== null,
    createdAt: row.createdAt,
    capabilities: capabilities.map((c) => ({
      name: c.name,
      kind: c.kind,
      ...(c.description !== null ? { description: c.description } : {}),
      arguments: JSON.parse(c.arguments) as Record<string, unknown>,
      ...(c.result !== null ? { result: JSON.parse(c.result) as Record<string, unknown> } : {}),
    })),
  };
}

/** Every device of the workspace with its capabilities, in attachment order. */
export async function workspaceDevices(db: Queryable, workspaceId: string, now: number): Promise<DeviceRecord[]> {
  const [rows, capabilities] = await Promise.all([listDevices(db, workspaceId), listCapabilities(db, workspaceId)]);
  const byDevice = new Map<string, CapabilityRow[]>();
  for (const c of capabilities) {
    const list = byDevice.get(c.deviceId) ?? [];
    list.push(c);
    byDevice.set(c.deviceId, list);
  }
  return rows.map((row) => toDeviceRecord(row, byDevice.get(row.id) ?? [], now));
}

export const deviceName = z.string().min(1).max(64);

/** Creates an attached device with its own credential; shared by SDK attach and board enrollment. */
export async function createAttachedDevice(
  tx: Queryable,
  fields: { workspaceId: string; name: string; kind: 'device' | 'gateway'; attachedVia: string; now: number },
) {
  const issued = issueToken('device');
  const id = randomUUID();
  await insertDevice(tx, {
    id,
    workspaceId: fields.workspaceId,
    name: fields.name,
    kind: fields.kind,
    tokenHash: issued.hash,
    tokenPrefix: issued.displayPrefix,
    attachedVia: fields.attachedVia,
    createdAt: fields.now,
  });
  const workspace = (await getWorkspace(tx, fields.workspaceId))!;
  const row = (await getDevice(tx, fields.workspaceId, id))!;
  return { device: toDeviceRecord(row, [], fields.now), token: issued.token, workspace: workspace.routingId };
}

export const attachDevice = defineOperation({
  name: 'devices.attach',
  title: 'Attach a device',
  description:
    "Attach a device with a setup token. Returns the device's own credential (shown once) and the workspace routing id. Attaching grants no function access.",
  credentials: ['setup'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [{ method: 'POST', path: '/v1/sdk/devices', status: 201 }],
  input: z.strictObject({
    name: deviceName.optional().describe("The device's name; left out, the setup token's name (the one the owner chose when making it)."),
    kind: z.enum(['device', 'gateway']).default('device'),
  }),
  output: attachedDevice,
  run: ({ ctx, credential, input }) =>
    ctx.db.transaction(async (tx) => {
      const now = ctx.clock.now();
      if (!(await claimAttachSlot(tx, credential.connectionId, now))) {
        // The credential was valid when the request began; a concurrent attach took the last slot.
        throw new DomainError('device_limit_reached', 'This setup token has attached as many devices as its deviceLimit allows.');
      }
      await assertDeviceCapacity(tx, ctx.settings.capacity, credential.workspaceId, 1);
      const name = input.name ?? (await getConnection(tx, credential.workspaceId, 'device-setup', credential.connectionId))!.name;
      return createAttachedDevice(tx, { workspaceId: credential.workspaceId, name, kind: input.kind, attachedVia: credential.connectionId, now });
    }),
});

export const listWorkspaceDevices = definePagedOperation({
  name: 'devices.list',
  title: 'List devices',
  description:
    'List devices. An owner sees every device of the workspace, revoked ones included; an agent sees only devices it may call a function on now, with capabilities filtered to those functions.',
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest', 'mcp'],
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/devices' }],
  mcp: { name: 'list_devices', listKey: 'devices' },
  input: z.strictObject({}),
  output: z.array(device),
  paged: { key: ROW_ORDER_KEY },
  async run({ ctx, credential, page }) {
    const now = ctx.clock.now();
    // An agent's page is cut from the devices it may call a function on, so a page is never
    // short because devices it may not see were filtered out after the read.
    let callable: Map<string, Set<string>> | null = null;
    if (credential.kind === 'agent') {
      callable = new Map();
      for (const fn of await listCallableFunctions(ctx.db, credential, now)) {
        callable.set(fn.deviceId, (callable.get(fn.deviceId) ?? new Set()).add(fn.capability));
      }
    }
    const { rows, next } = await listDevicesPage(ctx.db, credential.workspaceId, page, callable ? [...callable.keys()] : null);
    const byDevice = new Map<string, CapabilityRow[]>();
    for (const c of await listCapabilitiesOf(
      ctx.db,
      credential.workspaceId,
      rows.map((row) => row.id),
    )) {
      if (callable && !callable.get(c.deviceId)!.has(c.name)) continue;
      byDevice.set(c.deviceId, [...(byDevice.get(c.deviceId) ?? []), c]);
    }
    return { items: rows.map((row) => toDeviceRecord(row, byDevice.get(row.id) ?? [], now)), next };
  },
});

export const revokeWorkspaceDevice = defineOperation({
  name: 'devices.revoke',
  title: 'Revoke a device',
  description: "Revoke a device (and a gateway's children): its credential answers 401 from the next request on.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [{ method: 'POST', path: '/v1/devices/{deviceId}/revoke' }],
  input: z.strictObject({ deviceId: uuid }),
  output: device,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const cancelled = await ctx.db.transaction(async (tx) => {
      if (!(await getDevice(tx, credential.workspaceId, input.deviceId))) throw fail.notFound('Device');
      await revokeDevice(tx, credential.workspaceId, input.deviceId, now);
      // Nothing can deliver its commands any more: cancel them rather than let them expire,
      // and ask it to stop the ones it holds (docs/reference/rules.md "Actions").
      return [
        ...(await cancelQueuedForTarget(tx, credential.workspaceId, input.deviceId, now)),
        // Actions waiting for approval too (docs/reference/rules.md "Approvals"): with the reason `device_revoked`.
        ...(await cancelWithdrawn(tx, { workspaceId: credential.workspaceId, deviceId: input.deviceId }, now)),
        ...(await recallWithdrawn(tx, { workspaceId: credential.workspaceId, deviceId: input.deviceId }, now)),
      ];
    });
    publishActions(ctx, cancelled);
    ctx.events.publish({ type: 'device-revoked', workspaceId: credential.workspaceId, deviceId: input.deviceId });
    const all = await workspaceDevices(ctx.db, credential.workspaceId, now);
    return all.find((d) => d.id === input.deviceId)!;
  },
});

/**
 * Marks the calling device as seen. The credential was read moments ago while
 * authenticating, so when that read shows a fresh last_seen_at the write is skipped: a
 * polling device then costs no write at all (a profile of the round-trip benchmark put it at
 * ~6 % of a round trip).
 */
export async function noteDeviceSeen(ctx: OperationContext, credential: CredentialOf<'device'>): Promise<void> {
  const now = ctx.clock.now();
  if (credential.lastSeenAt !== null && now - credential.lastSeenAt < SEEN_WRITE_INTERVAL_MS) return;
  await touchDevice(ctx.db, credential.deviceId, now);
  announceIfBack(ctx, credential.workspaceId, credential.lastSeenAt, now);
}

/**
 * A device last seen longer ago than the online window has just been journalled
 * `device.online` (touchDevice): the owner's open streams are told to read the journal now.
 * Judged from the last_seen_at read before the write, so it costs no query; were it wrong,
 * a stream would only read the journal once more, or at its next safety poll.
 */
export function announceIfBack(ctx: OperationContext, workspaceId: string, lastSeenAt: number | null, now: number): void {
  if (lastSeenAt === null || now - lastSeenAt >= ONLINE_WINDOW_MS) announceJournal(ctx, workspaceId);
}

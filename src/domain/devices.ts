import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { issueToken } from './tokens.js';
import {
  cancelQueuedForFunction,
  cancelQueuedForTarget,
  cancelQueuedOnDetachedChildren,
  recallForFunction,
  cancelWithdrawn,
  recallWithdrawn,
} from '../store/action-withdrawals.js';
import type { ActionRow } from '../store/actions.js';
import { claimAttachSlot, getConnection } from '../store/connections.js';
import {
  familyFunctions,
  getDevice,
  insertDevice,
  listCapabilities,
  listCapabilitiesOf,
  listChildKeys,
  listDevices,
  listDevicesPage,
  replaceManifest,
  revokeDevice,
  SEEN_WRITE_INTERVAL_MS,
  touchDevice,
  type CapabilityInput,
  type CapabilityRow,
  type DeviceRow,
  type PublishedFunction,
} from '../store/devices.js';
import type { Queryable } from '../store/driver.js';
import { getWorkspace } from '../store/workspaces.js';
import { publishActions } from './action-publishing.js';
import { assertDeviceCapacity } from './capacity.js';
import type { OperationContext, CredentialOf } from './context.js';
import { DomainError, fail, type ErrorIssue } from './errors.js';
import { listCallableFunctions } from './functions.js';
import { defineOperation, definePagedOperation } from './operation.js';
import { ROW_ORDER_KEY } from './paging.js';
import { schemaFingerprint } from './schema-fingerprints.js';
import { announceJournal } from './event-hub.js';
import { attachedDevice, capability, device, uuid } from './schemas.js';

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

const childKey = z.string().regex(/^[A-Za-z0-9_.:-]{1,64}$/, 'must be 1 to 64 of A-Z a-z 0-9 _ . : -');

function uniqueNames(list: { name: string }[], path: (string | number)[], issues: ErrorIssue[]) {
  const seen = new Set<string>();
  list.forEach((item, index) => {
    if (seen.has(item.name)) issues.push({ path: [...path, index, 'name'].join('.'), message: `duplicate capability name "${item.name}"` });
    seen.add(item.name);
  });
}

function schemaIssues(
  ctx: OperationContext,
  list: { arguments: Record<string, unknown>; result?: Record<string, unknown> | undefined }[],
  path: (string | number)[],
  issues: ErrorIssue[],
) {
  list.forEach((item, index) => {
    // A result schema follows the rules and budgets of an argument schema (docs/devices/state.md).
    for (const field of ['arguments', 'result'] as const) {
      const schema = item[field];
      if (schema === undefined) continue;
      for (const issue of ctx.schemas.schemaIssues(schema)) {
        issues.push({ path: [...path, index, field, ...(issue.path ? [issue.path] : [])].join('.'), message: issue.message });
      }
    }
  });
}

/** The body limit of a manifest: the one request that may be larger than 16 KiB. */
export const MANIFEST_MAX_BODY_BYTES = 64 * 1024;

/**
 * Functions in one manifest, the gateway's and its children's together. Each schema is compiled
 * when it is published, on the event loop; this many fit the validator cache
 * (VALIDATOR_CACHE_SIZE), so republishing the same manifest compiles nothing again.
 */
export const MANIFEST_MAX_FUNCTIONS = 256;

const manifestInput = z.strictObject({
  deviceId: uuid,
  capabilities: z.array(capability.strict()).max(64),
  children: z
    .array(
      z.strictObject({
        key: childKey,
        name: deviceName,
        kind: z.enum(['device', 'service']),
        capabilities: z.array(capability.strict()).max(64),
      }),
    )
    .max(64)
    .optional(),
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
function announceIfBack(ctx: OperationContext, workspaceId: string, lastSeenAt: number | null, now: number): void {
  if (lastSeenAt === null || now - lastSeenAt >= ONLINE_WINDOW_MS) announceJournal(ctx, workspaceId);
}

function fingerprinted(list: z.infer<typeof capability>[]): CapabilityInput[] {
  return list.map((c) => ({ ...c, schemaFingerprint: schemaFingerprint(c.arguments) }));
}

const functionKey = (fn: PublishedFunction) => `${fn.deviceId}/${fn.name}`;

/** A reading of a device family's functions, by device and name. */
function byDeviceAndName(functions: PublishedFunction[]): Map<string, PublishedFunction> {
  return new Map(functions.map((fn) => [functionKey(fn), fn]));
}

/** Whether `old` is published again as it was: same device and name, same kind and schema. */
function republishedAsIs(old: PublishedFunction, published: Map<string, PublishedFunction>): boolean {
  const fn = published.get(functionKey(old));
  return fn !== undefined && fn.kind === old.kind && fn.schemaFingerprint === old.schemaFingerprint;
}

/** Whether two readings of a device family's functions publish the same names, kinds and schemas. */
function sameFunctions(before: PublishedFunction[], after: PublishedFunction[]): boolean {
  const published = byDeviceAndName(after);
  return before.length === after.length && before.every((old) => republishedAsIs(old, published));
}

/**
 * Withdraws the commands of every function a republish removed or changed (another kind or
 * schema fingerprint): the grants they were requested under no longer apply (docs/reference/rules.md
 * "Access"). Queued ones are cancelled and handed-out ones recalled, with `function_removed`
 * or `function_changed`. Runs in the republish's transaction.
 */
async function withdrawChangedFunctions(tx: Queryable, workspaceId: string, before: PublishedFunction[], after: PublishedFunction[], now: number) {
  const published = byDeviceAndName(after);
  const withdrawn: ActionRow[] = [];
  for (const old of before) {
    if (republishedAsIs(old, published)) continue;
    const reason = published.has(functionKey(old)) ? 'function_changed' : 'function_removed';
    const gone = { workspaceId, deviceId: old.deviceId, capability: old.name };
    withdrawn.push(...(await cancelQueuedForFunction(tx, gone, reason, now)), ...(await recallForFunction(tx, gone, reason, now)));
  }
  return withdrawn;
}

export const publishManifest = defineOperation({
  name: 'devices.publishManifest',
  title: 'Publish a device manifest',
  description: "Publish the device's manifest: its capabilities and, for a gateway, its children. Republishing replaces it; a child keeps its id per key.",
  credentials: ['device'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  ownDevice: 'deviceId',
  // A gateway's manifest describes every device behind it: 64 children with a few functions
  // each do not fit in 16 KiB (docs/decisions/0003-manifest-body-limit.md).
  rest: [{ method: 'POST', path: '/v1/device/{deviceId}/manifest', maxBodyBytes: MANIFEST_MAX_BODY_BYTES }],
  input: manifestInput,
  output: z.object({ device, children: z.array(device) }),
  async run({ ctx, credential, input }) {
    // Counted before any schema is compiled: the count is what bounds that work.
    const functions = (input.children ?? []).reduce((sum, child) => sum + child.capabilities.length, input.capabilities.length);
    if (functions > MANIFEST_MAX_FUNCTIONS) {
      throw fail.invalid('The manifest is not valid.', [
        {
          path: 'children',
          message: `a manifest holds at most ${MANIFEST_MAX_FUNCTIONS} functions in all, its own and its children's; this one has ${functions}`,
        },
      ]);
    }
    const issues: ErrorIssue[] = [];
    uniqueNames(input.capabilities, ['capabilities'], issues);
    schemaIssues(ctx, input.capabilities, ['capabilities'], issues);
    const children = input.children ?? [];
    const keys = new Set<string>();
    children.forEach((child, index) => {
      if (keys.has(child.key)) issues.push({ path: `children.${index}.key`, message: `duplicate key "${child.key}"` });
      keys.add(child.key);
      uniqueNames(child.capabilities, ['children', index, 'capabilities'], issues);
      schemaIssues(ctx, child.capabilities, ['children', index, 'capabilities'], issues);
    });
    const self = await getDevice(ctx.db, credential.workspaceId, credential.deviceId);
    if (!self) throw fail.notFound('Device');
    if (children.length > 0 && self.kind !== 'gateway') {
      issues.push({ path: 'children', message: 'only a device attached with kind "gateway" has children' });
    }
    if (issues.length > 0) throw fail.invalid('The manifest is not valid.', issues);

    const now = ctx.clock.now();
    await touchDevice(ctx.db, self.id, now);
    announceIfBack(ctx, credential.workspaceId, self.lastSeenAt, now);
    let functionsChanged = false;
    const cancelled = await ctx.db.transaction(async (tx) => {
      const active = new Set((await listChildKeys(tx, self.id)).map((c) => c.childKey));
      const added = children.filter((c) => !active.has(c.key)).length;
      const removed = [...active].filter((key) => !keys.has(key)).length;
      await assertDeviceCapacity(tx, ctx.settings.capacity, credential.workspaceId, added - removed);
      const before = await familyFunctions(tx, credential.workspaceId, self.id);
      await replaceManifest(
        tx,
        { workspaceId: credential.workspaceId, id: self.id },
        fingerprinted(input.capabilities),
        children.map((child) => ({ ...child, capabilities: fingerprinted(child.capabilities) })),
        now,
      );
      const after = await familyFunctions(tx, credential.workspaceId, self.id);
      functionsChanged = !sameFunctions(before, after);
      // A child left out of the manifest is no longer run by the gateway: its queued commands
      // go, and the ones the gateway already fetched for it are recalled (docs/reference/rules.md "Actions").
      const detached = await cancelQueuedOnDetachedChildren(tx, credential.workspaceId, self.id, now);
      const changed = await withdrawChangedFunctions(tx, credential.workspaceId, before, after, now);
      const scope = { workspaceId: credential.workspaceId, deviceId: self.id };
      // Actions waiting for approval on a detached child end too (docs/reference/rules.md "Approvals"), as `device_detached`.
      return [...detached, ...changed, ...(await cancelWithdrawn(tx, scope, now)), ...(await recallWithdrawn(tx, scope, now))];
    });
    publishActions(ctx, cancelled);
    // Agents listening for tool-list changes are told now rather than at their next recheck
    // (src/mcp/subscriptions/subscription.ts); a device republishing the same functions, as
    // each start does, announces nothing.
    if (functionsChanged) announceJournal(ctx, credential.workspaceId);
    const all = await workspaceDevices(ctx.db, credential.workspaceId, now);
    return {
      device: all.find((d) => d.id === self.id)!,
      children: all.filter((d) => d.parentId === self.id),
    };
  },
});

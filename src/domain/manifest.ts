import { z } from 'zod';
import { cancelQueuedForFunction, cancelQueuedOnDetachedChildren, recallForFunction, cancelWithdrawn, recallWithdrawn } from '../store/action-withdrawals.js';
import type { ActionRow } from '../store/actions.js';
import { familyFunctions, getDevice, listChildKeys, replaceManifest, touchDevice, type CapabilityInput, type PublishedFunction } from '../store/devices.js';
import type { Queryable } from '../store/driver.js';
import { publishActions } from './action-publishing.js';
import { assertDeviceCapacity } from './capacity.js';
import type { OperationContext } from './context.js';
import { fail, type ErrorIssue } from './errors.js';
import { defineOperation } from './operation.js';
import { schemaFingerprint } from './schema-fingerprints.js';
import { announceJournal } from './event-hub.js';
import { capability, device, uuid } from './schemas.js';
import { announceIfBack, deviceName, workspaceDevices } from './devices.js';

/**
 * A device's manifest: what it may publish (limits, child keys, argument schemas) and the
 * publish itself, which replaces its functions and children and withdraws the commands of
 * those it removed or changed. Device records and attaching are in devices.ts.
 */

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

import { z } from 'zod';
import { assertWithinCap } from './capacity.js';
import { grantBudgetUse } from '../store/action-requests.js';
import { getDevice, listDeviceCapabilities } from '../store/devices.js';
import { getGrant, listGrants, putGrant, revokeGrantById, revokeGrants, updateGrant, type GrantRow } from '../store/grants.js';
import { cancelForConditions, pendingForFunction } from '../store/action-decisions.js';
import type { ActionRow } from '../store/actions.js';
import type { Queryable } from '../store/driver.js';
import { publishActions } from './action-publishing.js';
import { withdrawRevoked } from './action-withdrawals.js';
import { announceJournal } from './event-hub.js';
import { appendWorkspaceEvent } from '../store/event-journal.js';
import { fail, type ErrorIssue } from './errors.js';
import {
  conditionIssues,
  conditionsCancelReason,
  grantConditions,
  grantConditionsInput,
  normalizeConditions,
  parseStoredConditions,
  storedConditions,
  windowEndAt,
  type GrantConditions,
} from './grant-conditions.js';
import { defineOperation, definePagedOperation } from './operation.js';
import { NEWEST_FIRST_KEY } from './paging.js';
import { approvalMode, capabilityName, principal, timestamp, uuid } from './schemas.js';

const MAX_TTL_SECONDS = 31_536_000;
export const grantTtl = z.number().int().min(60).max(MAX_TTL_SECONDS).nullable();
const functionKind = z.enum(['read', 'control']);

export const grant = z.object({
  id: uuid,
  principal: z.string(),
  deviceId: uuid,
  capability: z.string(),
  expiresAt: timestamp.nullable(),
  expired: z.boolean().describe('Past its expiry: it no longer allows anything.'),
  gatewayId: uuid.nullable().describe('Set when the grant was written by a gateway grant.'),
  createdAt: timestamp,
  approval: approvalMode,
  functionKind: functionKind.nullable().describe('The kind of the function when it was granted.'),
  schemaFingerprint: z
    .string()
    .nullable()
    .describe("sha256 of the function's argument schema when it was granted (canonical JSON, annotations such as `description` left out)."),
  stale: z
    .object({
      reason: z.enum(['kind_changed', 'schema_changed', 'function_removed']),
      grantedKind: functionKind.nullable(),
      currentKind: functionKind.nullable().describe('Null when the device no longer publishes the function.'),
      currentSchemaFingerprint: z.string().nullable(),
    })
    .nullable()
    .describe(
      'Set when the device republished the function with another kind or argument schema, or removed it: the grant no longer allows anything until the owner grants the function again. Null while the grant matches the function.',
    ),
  conditions: grantConditions,
  budgetUse: z
    .object({
      used: z.number().int().describe('Actions counted in the budget window now.'),
      retryAt: timestamp.describe('When one more is allowed: now while there is room, else when the oldest counted action leaves the window.'),
    })
    .optional()
    .describe('In a listing, for a grant with a budget: how much of it is used now (docs/owners/grants.md "Conditions").'),
});

type Stale = z.infer<typeof grant>['stale'];

/** How a grant differs from its function as published now (docs/reference/rules.md "Access"); null when it still applies. */
function staleness(row: GrantRow): Stale {
  const base = { grantedKind: row.functionKind, currentKind: row.currentKind, currentSchemaFingerprint: row.currentFingerprint };
  if (row.currentKind === null) return { reason: 'function_removed', ...base };
  if (row.functionKind !== row.currentKind) return { reason: 'kind_changed', ...base };
  if (row.schemaFingerprint === null || row.schemaFingerprint !== row.currentFingerprint) return { reason: 'schema_changed', ...base };
  return null;
}

function toGrant(row: GrantRow, now: number): z.infer<typeof grant> {
  return {
    id: row.id,
    principal: row.principal,
    deviceId: row.deviceId,
    capability: row.capability,
    expiresAt: row.expiresAt,
    expired: row.expiresAt !== null && row.expiresAt <= now,
    gatewayId: row.gatewayId,
    createdAt: row.createdAt,
    approval: row.approval,
    functionKind: row.functionKind,
    schemaFingerprint: row.schemaFingerprint,
    stale: staleness(row),
    conditions: parseStoredConditions(row.conditions),
  };
}

export const createGrants = defineOperation({
  name: 'grants.create',
  title: 'Grant device functions',
  description:
    "Grant a principal device functions. An existing grant for the same function is replaced (its expiry renewed). Grants are per principal, so they survive rotating the principal's tokens.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [{ method: 'POST', path: '/v1/grants', status: 201 }],
  input: z.strictObject({
    principal,
    deviceId: uuid,
    capabilities: z.array(capabilityName).min(1).max(64),
    ttlSeconds: grantTtl.default(null).describe('Lifetime in seconds (60 to 31536000); null or absent for no expiry.'),
    approval: approvalMode.default('none'),
    conditions: grantConditionsInput.optional(),
  }),
  output: z.array(grant),
  run: ({ ctx, credential, input }) =>
    ctx.db
      .transaction(async (tx) => {
        const now = ctx.clock.now();
        const device = await getDevice(tx, credential.workspaceId, input.deviceId);
        if (!device) throw fail.notFound('Device');
        if (device.revokedAt !== null) throw fail.invalid('The device is revoked.', [{ path: 'deviceId', message: 'device is revoked' }]);
        const published = new Map((await listDeviceCapabilities(tx, credential.workspaceId, device.id)).map((c) => [c.name, c]));
        const issues: ErrorIssue[] = [];
        input.capabilities.forEach((name, index) => {
          if (!published.has(name)) issues.push({ path: `capabilities.${index}`, message: `the device has no function "${name}"` });
        });
        if (issues.length > 0) throw fail.invalid('Unknown device function.', issues);
        const conditions = normalizeConditions(input.conditions);
        const named = [...new Set(input.capabilities)].map((name) => ({ name, argumentSchema: published.get(name)!.arguments }));
        assertConditions(conditions, named);
        const expiresAt = input.ttlSeconds === null ? null : now + input.ttlSeconds * 1000;
        const ids: string[] = [];
        for (const capability of new Set(input.capabilities)) {
          ids.push(
            await putGrant(tx, {
              workspaceId: credential.workspaceId,
              principal: input.principal,
              deviceId: device.id,
              capability,
              gatewayId: null,
              expiresAt,
              approval: input.approval,
              createdBy: credential.subject,
              now,
              conditions: storedConditions(conditions),
            }),
          );
        }
        await assertWithinCap(tx, ctx.settings.capacity, 'grants', credential.workspaceId, now);
        const rows = await Promise.all(ids.map((id) => getGrant(tx, credential.workspaceId, id)));
        return rows.map((row) => toGrant(row!, now));
      })
      .then((grants) => {
        announceJournal(ctx, credential.workspaceId);
        return grants;
      }),
});

export const listWorkspaceGrants = definePagedOperation({
  name: 'grants.list',
  title: 'List grants',
  description:
    'List unrevoked grants, newest first, optionally for one principal or device. Expired grants show `expired: true`; grants whose function the device has since changed or removed show `stale` with what changed.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/grants' }],
  input: z.strictObject({ principal: principal.optional(), deviceId: uuid.optional() }),
  output: z.array(grant),
  paged: { key: NEWEST_FIRST_KEY },
  async run({ ctx, credential, input, page }) {
    const now = ctx.clock.now();
    const { rows, next } = await listGrants(ctx.db, credential.workspaceId, input, page);
    const items = await Promise.all(
      rows.map(async (row) => {
        const record = toGrant(row, now);
        const budget = record.conditions?.budget;
        if (!budget) return record;
        const scope = { workspaceId: credential.workspaceId, principal: row.principal, deviceId: row.deviceId, capability: row.capability };
        return { ...record, budgetUse: await grantBudgetUse(ctx.db, scope, { max: budget.max, perMs: budget.perSeconds * 1000 }, now) };
      }),
    );
    return { items, next };
  },
});

/**
 * After a grant's conditions changed: its waiting and queued actions that they no longer allow
 * are cancelled with the reason (`conditions_changed` for arguments, `outside_schedule`). A
 * queued one was given the end of its window under the old schedule: when the new schedule
 * ends that window at another time, it is cancelled too (`conditions_changed`), and the agent
 * asks again under the schedule as it is now. Returns the cancelled ones.
 */
async function applyChangedConditions(tx: Queryable, workspaceId: string, after: GrantRow, now: number): Promise<ActionRow[]> {
  const conditions = parseStoredConditions(after.conditions);
  const scope = { workspaceId, principal: after.principal, deviceId: after.deviceId, capability: after.capability };
  const cancelled: ActionRow[] = [];
  for (const pending of await pendingForFunction(tx, scope, now)) {
    let reason = conditionsCancelReason(conditions, JSON.parse(pending.arguments) as Record<string, unknown>, now);
    // A waiting action outside the schedule may still be approved inside a later window.
    if (reason === 'outside_schedule' && pending.status !== 'queued') reason = undefined;
    if (!reason && pending.status === 'queued' && pending.allowedUntil !== (conditions?.schedule ? windowEndAt(conditions.schedule, now) : null)) {
      reason = 'conditions_changed';
    }
    if (!reason) continue;
    const row = await cancelForConditions(tx, workspaceId, pending.id, reason, now);
    if (row) cancelled.push(row);
  }
  return cancelled;
}

/** Conditions that do not fit the functions they are set on: 400 `validation_failed`, issues at `conditions.…`. */
export function assertConditions(
  conditions: GrantConditions | null,
  functions: { name: string; argumentSchema: string }[],
  options: { gateway?: boolean } = {},
) {
  const issues = conditionIssues(conditions, functions, options);
  if (issues.length > 0) throw fail.invalid('The conditions do not fit the granted functions.', issues);
}

/** A grant as the journal's triggers record it (migrations 0016, 0033). */
function journalGrant(row: GrantRow) {
  const { id, principal, deviceId, capability, approval, gatewayId, expiresAt, revokedAt, createdAt } = row;
  return { id, principal, deviceId, capability, approval, gatewayId, expiresAt, revokedAt, createdAt, conditions: parseStoredConditions(row.conditions) };
}

export const updateWorkspaceGrant = defineOperation({
  name: 'grants.update',
  title: 'Change a grant',
  description:
    "Change a live grant's approval mode, expiry or conditions in place, without granting again: the grant keeps its id and the function as it was granted (kind and argument schema). A stale or an expired grant cannot be changed (409 `conflict`): grant the function again to accept it as the device publishes it now, or to allow it again. Commands already queued under the grant keep the approval they were given; conditions are checked again when a waiting command would be approved or a queued one handed out, and a budget keeps its count.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/grants/{grantId}/update' }],
  input: z
    .strictObject({
      grantId: uuid,
      approval: approvalMode.optional(),
      ttlSeconds: grantTtl.optional().describe('A new lifetime in seconds from now (60 to 31536000); null for no expiry; absent keeps the expiry.'),
      conditions: grantConditionsInput.optional().describe('New conditions, replacing the old ones whole; null clears them; absent keeps them.'),
    })
    .refine((input) => input.approval !== undefined || input.ttlSeconds !== undefined || input.conditions !== undefined, {
      message: 'give approval, ttlSeconds, conditions or several',
      path: ['approval'],
    }),
  output: grant,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    let withdrawn: ActionRow[] = [];
    const updated = await ctx.db.transaction(async (tx) => {
      const found = await getGrant(tx, credential.workspaceId, input.grantId);
      if (!found || found.revokedAt !== null) throw fail.notFound('Grant');
      // docs/owners/grants.md "Stale grants: a grant means what the owner saw". Renewing a stale one here would
      // look like accepting the function as it is now without the owner seeing it.
      if (staleness(found) !== null) throw fail.conflict('The device changed this function since it was granted: grant it again to accept it as it is now.');
      // An expired grant has ended like a revoked one; bringing it back is a new decision, made by granting again.
      if (found.expiresAt !== null && found.expiresAt <= now) throw fail.conflict('This grant has expired: grant the function again to allow it.');
      const expiresAt = input.ttlSeconds === undefined ? undefined : input.ttlSeconds === null ? null : now + input.ttlSeconds * 1000;
      let conditions: string | null | undefined;
      if (input.conditions !== undefined) {
        const normalized = normalizeConditions(input.conditions);
        const published = (await listDeviceCapabilities(tx, credential.workspaceId, found.deviceId)).find((c) => c.name === found.capability);
        assertConditions(normalized, published ? [{ name: found.capability, argumentSchema: published.arguments }] : [], { gateway: found.gatewayId !== null });
        conditions = storedConditions(normalized);
      }
      if ((await updateGrant(tx, credential.workspaceId, found.id, { approval: input.approval, expiresAt, conditions }, now)) !== 1)
        throw fail.conflict('This grant has expired: grant the function again to allow it.');
      const after = (await getGrant(tx, credential.workspaceId, found.id))!;
      if (input.conditions !== undefined) withdrawn = await applyChangedConditions(tx, credential.workspaceId, after, now);
      // The journal triggers see inserts and revocations only: a change in place is recorded here, in its transaction.
      await appendWorkspaceEvent(tx, {
        workspaceId: credential.workspaceId,
        type: 'grant.updated',
        subjectId: after.id,
        data: {
          ...journalGrant(after),
          previous: { approval: found.approval, expiresAt: found.expiresAt, conditions: parseStoredConditions(found.conditions) },
        },
        createdAt: now,
      });
      return after;
    });
    publishActions(ctx, withdrawn);
    announceJournal(ctx, credential.workspaceId);
    return toGrant(updated, now);
  },
});

export const revokeWorkspaceGrants = defineOperation({
  name: 'grants.revoke',
  title: 'Revoke grants',
  description:
    'Revoke one grant by id, or every grant of a principal on a device (optionally one capability). Takes effect on the next request, also for MCP tools listed earlier.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [{ method: 'POST', path: '/v1/grants/revoke' }],
  input: z.union([z.strictObject({ grantId: uuid }), z.strictObject({ principal, deviceId: uuid, capability: capabilityName.optional() })]),
  output: z.object({ revoked: z.number().int().describe('How many grants this call revoked.') }),
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const { revoked, withdrawn } = await ctx.db.transaction(async (tx) => {
      let scope: { principal: string; deviceId: string };
      let revoked: number;
      if ('grantId' in input) {
        const found = await getGrant(tx, credential.workspaceId, input.grantId);
        if (!found) throw fail.notFound('Grant');
        scope = found;
        revoked = await revokeGrantById(tx, credential.workspaceId, input.grantId, now);
      } else {
        if (!(await getDevice(tx, credential.workspaceId, input.deviceId))) throw fail.notFound('Device');
        scope = input;
        revoked = await revokeGrants(
          tx,
          credential.workspaceId,
          { principal: input.principal, deviceIds: [input.deviceId], capability: input.capability },
          now,
        );
      }
      // Stop means stop (docs/reference/rules.md "Actions"): the commands the revoked grants allowed.
      const withdrawn = await withdrawRevoked(tx, { workspaceId: credential.workspaceId, principal: scope.principal, deviceId: scope.deviceId }, now);
      return { revoked, withdrawn };
    });
    publishActions(ctx, withdrawn);
    if (revoked > 0) announceJournal(ctx, credential.workspaceId);
    return { revoked };
  },
});

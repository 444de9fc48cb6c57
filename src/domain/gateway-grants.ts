import { z } from 'zod';
import { assertWithinCap } from './capacity.js';
import { cancelQueuedOnServices } from '../store/action-withdrawals.js';
import { getDevice, listDeviceCapabilities, listDevices } from '../store/devices.js';
import { putGrant, revokeGatewayFamilyGrants, type ApprovalMode } from '../store/grants.js';
import { publishActions } from './action-publishing.js';
import { withdrawRevoked } from './action-withdrawals.js';
import { announceJournal } from './event-hub.js';
import type { OperationContext } from './context.js';
import { fail } from './errors.js';
import { grantConditionsInput, normalizeConditions, storedConditions } from './grant-conditions.js';
import { defineOperation } from './operation.js';
import { approvalMode, principal, uuid } from './schemas.js';
import { assertConditions, grantTtl } from './grants.js';

/**
 * Gateway grants: one call that replaces a principal's grants on a gateway and its children
 * and services (docs/owners/grants.md). Per-device grants are in grants.ts.
 */

async function replaceGatewayGrants(
  ctx: OperationContext,
  owner: { workspaceId: string; subject: string },
  input: {
    deviceId: string;
    principal: string;
    mode: 'read' | 'control';
    includeServices: boolean;
    ttlSeconds: number | null;
    approval: ApprovalMode;
    conditions?: z.output<typeof grantConditionsInput> | undefined;
  },
) {
  const conditions = normalizeConditions(input.conditions);
  assertConditions(conditions, [], { gateway: true });
  const cancelled = await ctx.db.transaction(async (tx) => {
    const now = ctx.clock.now();
    const gateway = await getDevice(tx, owner.workspaceId, input.deviceId);
    if (!gateway) throw fail.notFound('Device');
    if (gateway.kind !== 'gateway') throw fail.invalid('The device is not a gateway.', [{ path: 'deviceId', message: 'not a gateway' }]);
    if (gateway.revokedAt !== null) throw fail.invalid('The gateway is revoked.', [{ path: 'deviceId', message: 'device is revoked' }]);

    // Rule 2: the gateway and its linked devices, as they are now (rule 4: later ones stay ungranted).
    const family = (await listDevices(tx, owner.workspaceId)).filter((d) => d.id === gateway.id || d.parentId === gateway.id);
    const covered = family.filter((d) => d.revokedAt === null && (d.kind !== 'service' || input.includeServices)); // rule 3

    // Rule 5: replace this principal's grants on the gateway and all its children (detached
    // ones too), and cancel its queued commands on the service devices it no longer covers.
    await revokeGatewayFamilyGrants(tx, owner.workspaceId, input.principal, gateway.id, now);
    const cancelledRows = input.includeServices ? [] : await cancelQueuedOnServices(tx, owner.workspaceId, input.principal, gateway.id, now);

    const expiresAt = input.ttlSeconds === null ? null : now + input.ttlSeconds * 1000;
    let devices = 0;
    for (const device of covered) {
      const functions = (await listDeviceCapabilities(tx, owner.workspaceId, device.id)).filter(
        (c) => input.mode === 'control' || c.kind === 'read', // rule 1
      );
      for (const fn of functions) {
        await putGrant(tx, {
          workspaceId: owner.workspaceId,
          principal: input.principal,
          deviceId: device.id,
          capability: fn.name,
          gatewayId: gateway.id,
          expiresAt,
          approval: input.approval,
          createdBy: owner.subject,
          now,
          conditions: storedConditions(conditions),
        });
      }
      if (functions.length > 0) devices += 1;
    }
    await assertWithinCap(tx, ctx.settings.capacity, 'grants', owner.workspaceId, now);
    // What the replacement no longer grants (e.g. control → read) stops now (docs/reference/rules.md "Actions").
    const withdrawn = await withdrawRevoked(tx, { workspaceId: owner.workspaceId, principal: input.principal, deviceId: gateway.id }, now);
    return { devices, cancelledRows: [...cancelledRows, ...withdrawn] };
  });
  // After the commit, so waiters and wake sockets never see a change that rolled back.
  publishActions(ctx, cancelled.cancelledRows);
  announceJournal(ctx, owner.workspaceId);
  return { ok: true, devices: cancelled.devices };
}

export const grantGateway = defineOperation({
  name: 'gatewayGrants.replace',
  title: 'Grant a gateway and its devices',
  description:
    "Grant a principal a gateway and its linked devices in one call, replacing that principal's earlier grants on them. `read` grants read functions, `control` all functions; service devices only with includeServices (omitted ones lose their grants and this principal's queued commands). Devices linked later stay ungranted; other gateways are untouched.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [{ method: 'POST', path: '/v1/devices/{deviceId}/gateway-grants' }],
  input: z.strictObject({
    deviceId: uuid,
    principal,
    mode: z.enum(['read', 'control']),
    includeServices: z.boolean().default(false),
    ttlSeconds: grantTtl.default(3600).describe('Lifetime in seconds (60 to 31536000, default 3600); null for no expiry.'),
    approval: approvalMode.default('none').describe('The approval mode of every grant it writes (docs/reference/rules.md "Approvals").'),
    conditions: grantConditionsInput
      .optional()
      .describe(
        'A schedule and a budget for every grant it writes, each function counted on its own; argument bounds are refused here (docs/owners/grants.md "Conditions").',
      ),
  }),
  output: z.object({ ok: z.boolean(), devices: z.number().int().describe('Devices that received at least one grant.') }),
  run: ({ ctx, credential, input }) => replaceGatewayGrants(ctx, credential, input),
});

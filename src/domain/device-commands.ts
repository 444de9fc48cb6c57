import { z } from 'zod';
import { expireDue } from '../store/action-expiry.js';
import { cancelRefused, claimNext, completeAction, findTargetedAction, hasQueued, reportLate } from '../store/action-hand-out.js';
import { action, toActionRecord } from './action-records.js';
import { publishActions } from './action-publishing.js';
import type { OperationContext, CredentialOf } from './context.js';
import { fail } from './errors.js';
import { functionOfAction } from '../store/device-state.js';
import { RESULT_MAX_BYTES } from '../store/usage.js';
import { canonical } from './idempotency.js';
import { noteDeviceSeen } from './devices.js';
import { defineOperation } from './operation.js';
import { timestamp, uuid } from './schemas.js';

/** DeviceNext: what a device is handed (docs/reference/rules.md "Actions"). */
export const deviceNext = z.object({
  id: uuid,
  deviceId: uuid.describe('Which device runs it: the gateway itself or one of its children.'),
  capability: z.string(),
  args: z.record(z.string(), z.unknown()),
  status: z.string(),
  createdAt: timestamp,
  expiresAt: timestamp,
  dispatchedAt: timestamp,
});

function checkDevice(ctx: OperationContext, credential: CredentialOf<'device'>, workspace?: string): Promise<void> {
  if (workspace !== undefined && workspace !== credential.routingId) {
    throw fail.forbidden('x-service-workspace does not name this device’s workspace.');
  }
  return noteDeviceSeen(ctx, credential);
}

export const fetchNextCommand = defineOperation({
  name: 'device.next',
  title: 'Fetch the next command',
  description:
    'Fetch the oldest queued, unexpired command for this device or, for a gateway, its children. Each command is handed out once and becomes `received`; `null` when there is none.',
  credentials: ['device'],
  access: 'none',
  // Claims a command: state changes, so not read-only, though it moves nothing itself.
  hints: { readOnly: false, destructive: false },
  ownDevice: 'deviceId',
  rest: [{ method: 'POST', path: '/v1/device/{deviceId}/next', headers: { 'x-service-workspace': 'workspace' } }],
  input: z.strictObject({
    deviceId: uuid,
    workspace: z
      .string({ error: 'the x-service-workspace header is required' })
      .regex(/^[a-f0-9]{64}$/, 'must be 64 lowercase hex characters')
      .describe('The x-service-workspace header.'),
  }),
  output: deviceNext.nullable(),
  async run({ ctx, credential, input }) {
    await checkDevice(ctx, credential, input.workspace);
    // The kill switch is for physical safety: commands queued before it was thrown are held
    // (and expire at their deadline) rather than handed to devices while it is off. The
    // owner's pause switch holds them the same way for one workspace: the claim's guard and
    // `hasQueued` read it in their own statements, so a paused `next` hands out and cancels
    // nothing without a read of its own (docs/contributors/performance-history.md "One stream for many batches").
    if (!ctx.settings.deviceControlsEnabled) return null;
    const now = ctx.clock.now();
    // Authorization at hand-out (docs/reference/rules.md "Actions"): the claim takes the oldest command
    // that may still run; the older ones it skipped are cancelled, each with its reason.
    // The cancel costs a statement only when something was skipped: the hot path stays one
    // UPDATE per command handed out (and one read more for an empty queue).
    const claimed = await claimNext(ctx.db, credential.deviceId, now);
    if (claimed ? claimed.skippedOlder : await hasQueued(ctx.db, credential.deviceId, now)) {
      publishActions(ctx, await cancelRefused(ctx.db, credential.deviceId, claimed?.row.createdAt ?? null, now));
    }
    if (!claimed) return null;
    const { row } = claimed;
    publishActions(ctx, [row]);
    return {
      id: row.id,
      deviceId: row.deviceId,
      capability: row.capability,
      args: JSON.parse(row.arguments) as Record<string, unknown>,
      status: row.status,
      createdAt: row.createdAt,
      expiresAt: row.expiresAt,
      dispatchedAt: row.dispatchedAt!,
    };
  },
});

const reportError = z.strictObject({ code: z.string().min(1).max(64), message: z.string().max(1024) });

export const reportResult = defineOperation({
  name: 'device.result',
  title: "Report a command's result",
  description:
    'Report the result of a command this device fetched: received → succeeded (ok) or failed. After the deadline the report is still stored on the `expired` action (`reportedLateAt`). Repeating the same report returns the stored action; a different report for a finished action is 409.',
  credentials: ['device'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: true },
  ownDevice: 'deviceId',
  rest: [{ method: 'POST', path: '/v1/device/{deviceId}/result' }],
  input: z
    .strictObject({
      deviceId: uuid,
      actionId: uuid,
      ok: z.boolean(),
      result: z.unknown().optional(),
      error: reportError.optional(),
    })
    .refine((body) => body.ok || body.error !== undefined, { path: ['error'], message: 'a failed result needs error { code, message }' })
    .refine((body) => !body.ok || body.error === undefined, { path: ['error'], message: 'a successful result has no error' }),
  output: action,
  async run({ ctx, credential, input }) {
    await checkDevice(ctx, credential);
    const now = ctx.clock.now();
    const result = input.ok && input.result !== undefined ? JSON.stringify(input.result) : null;
    // What the action reserved when it was created (docs/operators/budgets.md): a longer result could take the workspace past its budget.
    if (result !== null && Buffer.byteLength(result) > RESULT_MAX_BYTES) {
      throw fail.invalid(`The result takes ${Buffer.byteLength(result)} bytes stored; at most ${RESULT_MAX_BYTES}.`, [
        { path: 'result', message: `at most ${RESULT_MAX_BYTES} bytes as stored JSON (numbers are written out in full)` },
      ]);
    }
    // A declared result schema is checked before anything moves: a result that does not match
    // it is refused and the action stays as it was (docs/devices/state.md).
    const fn = input.ok ? await functionOfAction(ctx.db, credential.deviceId, input.actionId) : undefined;
    if (input.ok && fn) {
      if (fn.result !== null) {
        const issues = ctx.schemas.argumentIssues(fn.result, input.result ?? null, 'result');
        if (issues.length > 0) throw fail.invalid("The result does not match the function's result schema.", issues);
      }
    }
    const report = {
      id: input.actionId,
      targetId: credential.deviceId,
      ok: input.ok,
      result,
      errorCode: input.error?.code ?? null,
      errorMessage: input.error?.message ?? null,
    };
    let row = await completeAction(ctx.db, report, now);
    if (!row) {
      publishActions(ctx, await expireDue(ctx.db, now, { workspaceId: credential.workspaceId, id: input.actionId }));
      // Past the deadline, what the device did is still stored, never dropped (docs/reference/rules.md "Actions").
      row = await reportLate(ctx.db, report, now);
    }
    if (row) {
      publishActions(ctx, [row]);
      // A read's successful result is its function's last-known value (migration 0034): its
      // state resource's subscribers read it again.
      if (fn?.kind === 'read' && row.status === 'succeeded' && row.result !== null)
        ctx.events.publish({ type: 'device-state', workspaceId: row.workspaceId, deviceId: row.deviceId });
    } else {
      row = await findTargetedAction(ctx.db, credential.deviceId, input.actionId);
      // An action awaiting approval does not exist for the device yet (docs/reference/rules.md "Approvals").
      if (!row || row.status === 'awaiting_approval') throw fail.notFound('Action');
      const reported = row.status === 'expired' && row.reportedLateAt !== null ? (row.errorCode === null ? 'succeeded' : 'failed') : row.status;
      const same =
        reported === (input.ok ? 'succeeded' : 'failed') &&
        canonical(row.result === null ? null : JSON.parse(row.result)) === canonical(input.ok ? (input.result ?? null) : null) &&
        row.errorCode === report.errorCode &&
        row.errorMessage === report.errorMessage;
      if (!same) throw fail.conflict(`The action is ${row.status}; this report conflicts with it.`);
    }
    return toActionRecord(row);
  },
});

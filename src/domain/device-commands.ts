import { z } from 'zod';
import { expireDue } from '../store/action-expiry.js';
import { cancelRefused, claimNext, completeAction, findTargetedAction, hasQueued, reportLate } from '../store/action-hand-out.js';
import type { ActionRow } from '../store/actions.js';
import { action, toActionRecord } from './action-records.js';
import { publishActions } from './action-publishing.js';
import type { OperationContext, CredentialOf } from './context.js';
import { fail } from './errors.js';
import { functionOfAction } from '../store/device-state.js';
import { RESULT_MAX_BYTES } from '../store/usage.js';
import { canonical } from './idempotency.js';
import { noteDeviceSeen } from './devices.js';
import { isDeviceRevoked } from './device-wake-socket.js';
import { deviceWorkListeners, onDeviceWork } from './event-hub.js';
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

/** The longest a long-poll `next` holds (docs/devices/wire-protocol.md "Sleeping and battery devices"). */
export const MAX_WAIT_SECONDS = 30;
/** The long polls one device may hold at once on an instance; past them `next` answers without waiting. */
export const MAX_HELD_POLLS = 4;

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
  rest: [{ method: 'POST', path: '/v1/device/{deviceId}/next', headers: { 'x-service-workspace': 'workspace' }, query: ['waitSeconds'] }],
  holds: 'waitSeconds',
  input: z.strictObject({
    deviceId: uuid,
    workspace: z
      .string({ error: 'the x-service-workspace header is required' })
      .regex(/^[a-f0-9]{64}$/, 'must be 64 lowercase hex characters')
      .describe('The x-service-workspace header.'),
    waitSeconds: z
      .string()
      .regex(/^(?:[0-9]|[12][0-9]|30)$/, `must be an integer from 0 to ${MAX_WAIT_SECONDS}`)
      .transform(Number)
      .optional()
      .describe(
        `A long poll: when nothing is queued, hold the answer up to this many seconds (an integer, 0 to ${MAX_WAIT_SECONDS}; 0 unless given) until a command is queued for this device or its children, then answer as without it (\`null\` when none came). Ends at once when the service shuts down (\`null\`) or the device is revoked (401).`,
      ),
  }),
  output: deviceNext.nullable(),
  async run({ ctx, credential, input, caller }) {
    await checkDevice(ctx, credential, input.workspace);
    const waitMs = (input.waitSeconds ?? 0) * 1000;
    // A plain `next` is the hot path: no listener, no timer, one claim. A device already holding
    // MAX_HELD_POLLS here is answered at once too: its rate limit bounds how often it asks, and
    // nothing else would bound how many waits (each a listener and a timer) it keeps open.
    const hold = waitMs > 0 && deviceWorkListeners(ctx.events, credential.deviceId) < MAX_HELD_POLLS;
    return hold ? holdForCommand(ctx, credential, waitMs, caller) : handOut(ctx, credential);
  },
});

/**
 * The long-poll `next`: listen first, then claim, so a command queued between the two is
 * either claimed or wakes the wait. A wake is a hint (another poller may take the command,
 * and one from another instance may be forged), so each one is followed by a claim, until
 * the deadline. The caller going away ends the wait without a claim, so nothing is marked
 * received that nobody will read; shutdown ends it with `null` (the device polls again,
 * perhaps on another instance); a revocation ends it with 401 once the database says so.
 */
async function holdForCommand(ctx: OperationContext, credential: CredentialOf<'device'>, waitMs: number, caller: AbortSignal | undefined) {
  let looked = true;
  let revocation = false;
  let wake: (() => void) | undefined;
  const poke = () => {
    looked = false;
    wake?.();
  };
  const stop = onDeviceWork(ctx.events, credential.deviceId, (reason) => {
    if (reason === 'revoked') revocation = true;
    poke();
  });
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    poke();
  }, waitMs);
  const ends = [caller, ctx.streams.closing].filter((signal) => signal !== undefined);
  for (const signal of ends) signal.addEventListener('abort', poke, { once: true });
  try {
    for (;;) {
      if (caller?.aborted || ctx.streams.closing.aborted) return null;
      if (revocation) {
        revocation = false;
        if (await isDeviceRevoked(ctx.db, credential.workspaceId, credential.deviceId)) throw fail.unauthorized();
      }
      looked = true;
      const found = await handOut(ctx, credential);
      if (found || timedOut) return found;
      if (looked) await new Promise<void>((resolve) => (wake = resolve));
      wake = undefined;
    }
  } finally {
    stop();
    clearTimeout(timer);
    for (const signal of ends) signal.removeEventListener('abort', poke);
  }
}

/** Hands out the oldest command the device may run now, or `null`. */
async function handOut(ctx: OperationContext, credential: CredentialOf<'device'>) {
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
}

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
    // Read only when the device declares one: a plain result stays one statement.
    const fn = input.ok && credential.declaresResults ? await functionOfAction(ctx.db, credential.deviceId, input.actionId) : undefined;
    if (fn?.result) {
      const issues = ctx.schemas.argumentIssues(fn.result, input.result ?? null, 'result');
      if (issues.length > 0) throw fail.invalid("The result does not match the function's result schema.", issues);
    }
    const report = {
      id: input.actionId,
      targetId: credential.deviceId,
      ok: input.ok,
      result,
      errorCode: input.error?.code ?? null,
      errorMessage: input.error?.message ?? null,
    };
    const completed = await completeAction(ctx.db, report, now);
    let row: ActionRow | undefined = completed?.row;
    if (!row) {
      publishActions(ctx, await expireDue(ctx.db, now, { workspaceId: credential.workspaceId, id: input.actionId }));
      // Past the deadline, what the device did is still stored, never dropped (docs/reference/rules.md "Actions").
      row = await reportLate(ctx.db, report, now);
    }
    if (row) {
      publishActions(ctx, [row]);
      // A read's successful result is its function's last-known value (migration 0034): its
      // state resource's subscribers read it again.
      if (completed?.isRead && completed.row.status === 'succeeded' && completed.row.result !== null)
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

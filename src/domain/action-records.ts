import { z } from 'zod';
import type { ActionRow } from '../store/actions.js';
import { ACTION_STATUSES, CANCEL_REASONS, EXPIRED_REASONS, TRANSITIONS, type CancelReason, type ExpiredReason } from './action-states.js';
import { approvalMode, timestamp, uuid } from './schemas.js';

export const actionStatus = z.enum(ACTION_STATUSES).describe(
  Object.values(TRANSITIONS)
    .map((move) => `${move.from.join(' | ')} → ${move.to.join(' | ')}`)
    .join('; ') + '.',
);

export const cancelReason = z.enum(Object.keys(CANCEL_REASONS) as [CancelReason, ...CancelReason[]]).describe(
  'Why it was cancelled or recalled: ' +
    Object.entries(CANCEL_REASONS)
      .map(([reason, meaning]) => `\`${reason}\` ${meaning}`)
      .join('; ') +
    '.',
);

export const expiredReason = z.enum(Object.keys(EXPIRED_REASONS) as [ExpiredReason, ...ExpiredReason[]]).describe(
  'Why it expired: ' +
    Object.entries(EXPIRED_REASONS)
      .map(([reason, meaning]) => `\`${reason}\` ${meaning}`)
      .join('; ') +
    '.',
);

/** The human yes or no an action needed (docs/reference/rules.md "Approvals"), as the Action and the history export show it. */
export const approvalRecord = z
  .object({
    mode: approvalMode,
    expiresAt: timestamp.nullable().describe("The end of the approval window (`approvalTtlSeconds`); null when the agent's user confirmed the call."),
    decision: z.enum(['approved', 'rejected']).nullable().describe('Null while it waits, and when the window ended or it was cancelled first.'),
    decidedBy: z
      .string()
      .nullable()
      .describe("Who decided: the owner's subject, or for a `user` call confirmed in the MCP client, the principal whose user said yes."),
    decidedAt: timestamp.nullable(),
    reason: z.string().nullable().describe('The reason given with the decision.'),
    confirmedBy: z
      .enum(['owner', 'client'])
      .nullable()
      .describe(
        "Who gave the yes: `owner` (in the console or over REST, as an owner credential the service verified), or `client` for a `user` call: the agent's MCP client reported that its user confirmed, which the service cannot verify. Null until a yes.",
      ),
  })
  .describe('Present when the function needed a yes before the device was asked.');

export const action = z.object({
  id: uuid,
  deviceId: uuid,
  capability: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  status: actionStatus,
  principal: z.string().describe('The agent principal that requested it.'),
  createdAt: timestamp,
  expiresAt: timestamp.describe('Deadline: without a result by then the action becomes `expired`.'),
  notBefore: timestamp
    .nullable()
    .describe('When a scheduled action becomes due (it is `scheduled` until then, and checked again then); null for one queued at once.'),
  dispatchedAt: timestamp.nullable().describe('When a device fetched it.'),
  completedAt: timestamp.nullable(),
  result: z.unknown().nullable().describe('What the device reported on success.'),
  error: z.object({ code: z.string(), message: z.string() }).nullable().describe('What the device reported on failure.'),
  broadcastId: uuid.nullable(),
  cancelReason: cancelReason.nullable().describe('Set when the action was cancelled, or when a handed-out one was recalled (`cancelRequestedAt`).'),
  cancelRequestedAt: timestamp
    .nullable()
    .describe('When the device was asked to stop a command it had already fetched; what it reports afterwards is still stored.'),
  reportedLateAt: timestamp
    .nullable()
    .describe('When a result arrived after the deadline: the action stays `expired`, and `result` or `error` shows what the device reported it did.'),
  expiredReason: expiredReason.nullable().describe('Set when the action expired.'),
  approval: approvalRecord.nullable(),
});

export type ActionRecord = z.infer<typeof action>;

export function toActionRecord(row: ActionRow): ActionRecord {
  return {
    id: row.id,
    deviceId: row.deviceId,
    capability: row.capability,
    arguments: JSON.parse(row.arguments) as Record<string, unknown>,
    status: row.status,
    principal: row.principal,
    createdAt: row.createdAt,
    expiresAt: row.expiresAt,
    // Journal snapshots written before migration 0039 lack it.
    notBefore: row.notBefore ?? null,
    dispatchedAt: row.dispatchedAt,
    completedAt: row.completedAt,
    result: row.result === null ? null : (JSON.parse(row.result) as unknown),
    error: row.errorCode === null ? null : { code: row.errorCode, message: row.errorMessage ?? '' },
    broadcastId: row.broadcastId,
    cancelReason: row.cancelReason,
    cancelRequestedAt: row.cancelRequestedAt,
    reportedLateAt: row.reportedLateAt,
    // Journal snapshots written before migration 0017 lack the approval columns: `?? …`.
    expiredReason: row.expiredReason ?? null,
    approval: toApprovalRecord(row),
  };
}

function toApprovalRecord(row: ActionRow): z.infer<typeof approvalRecord> | null {
  const mode = row.approval ?? 'none';
  if (mode === 'none') return null;
  const decidedAt = row.decidedAt ?? null;
  const approved = decidedAt !== null && row.status !== 'rejected';
  // A call the client confirmed never waited: it has no approval window (plannedAction).
  const byClient = mode === 'user' && (row.approvalExpiresAt ?? null) === null;
  return {
    mode,
    expiresAt: row.approvalExpiresAt ?? null,
    decision: decidedAt === null ? null : approved ? 'approved' : 'rejected',
    decidedBy: row.decidedBy ?? null,
    decidedAt,
    reason: row.decisionReason ?? null,
    confirmedBy: approved ? (byClient ? 'client' : 'owner') : null,
  };
}

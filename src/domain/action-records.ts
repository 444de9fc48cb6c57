import { z } from 'zod';
import type { ActionRow } from '../store/actions.js';
import { ACTION_STATUSES, CANCEL_REASONS, TRANSITIONS, type CancelReason } from './action-states.js';
import { timestamp, uuid } from './schemas.js';

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

export const action = z.object({
  id: uuid,
  deviceId: uuid,
  capability: z.string(),
  arguments: z.record(z.string(), z.unknown()),
  status: actionStatus,
  principal: z.string().describe('The agent principal that requested it.'),
  createdAt: timestamp,
  expiresAt: timestamp.describe('Deadline: without a result by then the action becomes `expired`.'),
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
    dispatchedAt: row.dispatchedAt,
    completedAt: row.completedAt,
    result: row.result === null ? null : (JSON.parse(row.result) as unknown),
    error: row.errorCode === null ? null : { code: row.errorCode, message: row.errorMessage ?? '' },
    broadcastId: row.broadcastId,
    cancelReason: row.cancelReason,
    cancelRequestedAt: row.cancelRequestedAt,
    reportedLateAt: row.reportedLateAt,
  };
}

import { z } from 'zod';
import { getAction } from '../store/actions.js';
import { approveAction as approveStored, cancelForConditions, cancelIfRefused, rejectAction as rejectStored } from '../store/action-decisions.js';
import { grantConditionsOf } from '../store/grants.js';
import { conditionsCancelReason, parseStoredConditions, windowEndAt } from './grant-conditions.js';
import { expireDue } from '../store/action-expiry.js';
import { publishActions } from './action-publishing.js';
import { action, toActionRecord, type ActionRecord } from './action-records.js';
import { readAction } from './action-reads.js';
import type { OperationContext, CredentialOf } from './context.js';
import { DomainError } from './errors.js';
import { defineOperation } from './operation.js';
import { uuid } from './schemas.js';

const decisionInput = z.strictObject({
  actionId: uuid,
  reason: z.string().min(1).max(500).optional().describe("Why, in the owner's words: kept in the Action."),
});

/**
 * The owner's decision on a waiting action (docs/reference/rules.md "Approvals"), in one transaction:
 * the guarded move, or, when it matched nothing, why: an approval finds the permission
 * withdrawn (the action is cancelled with that reason), its window over (expired), or the
 * action already decided or ended. Any change is published; a refusal answers 409 with the
 * Action as it is now.
 */
async function decide(
  ctx: OperationContext,
  credential: CredentialOf<'owner'>,
  input: z.output<typeof decisionInput>,
  move: 'approve' | 'reject',
): Promise<ActionRecord> {
  await readAction(ctx, credential, input.actionId);
  const now = ctx.clock.now();
  const decision = { workspaceId: credential.workspaceId, id: input.actionId, decidedBy: credential.subject, reason: input.reason ?? null };
  const outcome = await ctx.db.transaction(async (tx) => {
    let allowedUntil: number | null = null;
    if (move === 'approve') {
      // An approval never lifts a condition (docs/owners/grants.md "Conditions"): arguments and
      // schedule are read again as the grant says them now.
      const waiting = await getAction(tx, credential.workspaceId, input.actionId);
      if (waiting?.status === 'awaiting_approval') {
        const conditions = parseStoredConditions(await grantConditionsOf(tx, credential.workspaceId, waiting.principal, waiting.deviceId, waiting.capability));
        const reason = conditionsCancelReason(conditions, JSON.parse(waiting.arguments) as Record<string, unknown>, now);
        if (reason) {
          const cancelled = await cancelForConditions(tx, credential.workspaceId, waiting.id, reason, now);
          if (cancelled) return { row: cancelled, changed: true, ok: false };
        }
        allowedUntil = conditions?.schedule ? windowEndAt(conditions.schedule, now) : null;
      }
    }
    const decided = move === 'approve' ? await approveStored(tx, { ...decision, allowedUntil }, now) : await rejectStored(tx, decision, now);
    if (decided) return { row: decided, changed: true, ok: true };
    const ended = (await cancelIfRefused(tx, credential.workspaceId, input.actionId, now)) ?? (await expireDue(tx, now, { id: input.actionId }))[0];
    if (ended) return { row: ended, changed: true, ok: false };
    return { row: (await getAction(tx, credential.workspaceId, input.actionId))!, changed: false, ok: false };
  });
  if (outcome.changed) publishActions(ctx, [outcome.row]);
  const record = toActionRecord(outcome.row);
  if (!outcome.ok) {
    const why = record.cancelReason ? ` (${record.cancelReason})` : record.expiredReason ? ` (${record.expiredReason})` : '';
    throw new DomainError('conflict', `The action is ${record.status}${why}, not awaiting approval.`, { action: record });
  }
  return record;
}

export const approveAction = defineOperation({
  name: 'actions.approve',
  title: 'Approve a waiting action',
  description:
    'Approve an action that is awaiting approval: it is queued for its device, and its deadline (`ttlSeconds`) starts now. The permission it was requested under is checked again first: if it no longer holds, the action is cancelled with the reason and the answer is 409 with the Action. An action that is not awaiting approval is 409 too.',
  credentials: ['owner'],
  access: 'none',
  // An approval lets a device act in the physical world.
  hints: { readOnly: false, destructive: true, idempotent: false, openWorld: true },
  rest: [{ method: 'POST', path: '/v1/actions/{actionId}/approve' }],
  input: decisionInput,
  output: action,
  run: ({ ctx, credential, input }) => decide(ctx, credential, input, 'approve'),
});

export const rejectAction = defineOperation({
  name: 'actions.reject',
  title: 'Reject a waiting action',
  description: 'Reject an action that is awaiting approval: it ends `rejected`, with who, when and the reason in the Action. Otherwise 409.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: false },
  rest: [{ method: 'POST', path: '/v1/actions/{actionId}/reject' }],
  input: decisionInput,
  output: action,
  run: ({ ctx, credential, input }) => decide(ctx, credential, input, 'reject'),
});

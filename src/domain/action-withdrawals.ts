import { z } from 'zod';
import { getAction, type ActionRow } from '../store/actions.js';
import { cancelQueued, cancelWithdrawn, recallWithdrawn, requestRecall, type WithdrawalScope } from '../store/action-withdrawals.js';
import type { Queryable } from '../store/driver.js';
import { publishActions } from './action-publishing.js';
import { action, toActionRecord, type ActionRecord } from './action-records.js';
import type { CancelReason } from './action-states.js';
import { readAction } from './action-reads.js';
import { fail } from './errors.js';
import type { OperationContext } from './context.js';
import { defineOperation } from './operation.js';
import { uuid } from './schemas.js';

export const cancelAction = defineOperation({
  name: 'actions.cancel',
  title: 'Cancel a queued action',
  description: 'Cancel an action that is still queued or awaiting approval. Once a device has fetched it, it can no longer be cancelled (409).',
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest', 'mcp'],
  hints: { readOnly: false, destructive: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/actions/{actionId}/cancel' }],
  mcp: { name: 'cancel_action' },
  input: z.strictObject({ actionId: uuid }),
  output: action,
  async run({ ctx, credential, input }) {
    const existing = await readAction(ctx, credential, input.actionId);
    const principal = credential.kind === 'agent' ? credential.principal : null;
    const reason: CancelReason = credential.kind === 'agent' ? 'agent' : 'owner';
    const row = await cancelQueued(ctx.db, credential.workspaceId, existing.id, principal, reason, ctx.clock.now());
    if (!row)
      throw fail.conflict(`The action is ${(await getAction(ctx.db, credential.workspaceId, existing.id))!.status}, neither queued nor awaiting approval.`);
    publishActions(ctx, [row]);
    return toActionRecord(row);
  },
});

/**
 * Withdraws one action whatever stage it is in: a queued one is cancelled, a handed-out one
 * recalled (the device is asked to stop; its report is still stored), a finished one is left
 * as it is. For withdrawals nobody answers for, such as an MCP client going away
 * (docs/reference/rules.md "Actions"). Returns the changed action, if any.
 */
export async function withdrawAction(ctx: OperationContext, workspaceId: string, actionId: string, reason: CancelReason): Promise<ActionRecord | undefined> {
  const now = ctx.clock.now();
  const row = (await cancelQueued(ctx.db, workspaceId, actionId, null, reason, now)) ?? (await requestRecall(ctx.db, workspaceId, actionId, reason, now));
  if (!row) return undefined;
  publishActions(ctx, [row]);
  return toActionRecord(row);
}

/**
 * Inside the transaction of a revocation: cancels the commands in `scope` that may no longer
 * run and recalls the handed-out ones, each with its reason (docs/reference/rules.md "Actions"). The
 * caller publishes the returned rows after the commit, so waiting MCP calls, owners and wake
 * sockets learn it at once and never see a change that rolled back.
 */
export async function withdrawRevoked(tx: Queryable, scope: WithdrawalScope, now: number): Promise<ActionRow[]> {
  return [...(await cancelWithdrawn(tx, scope, now)), ...(await recallWithdrawn(tx, scope, now))];
}

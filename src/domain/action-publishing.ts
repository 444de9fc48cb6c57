import type { ActionRow } from '../store/actions.js';
import { toActionRecord } from './action-records.js';
import type { OperationContext } from './context.js';

/** Tells waiters and the wake channel, after the change has committed. */
export function publishActions(ctx: OperationContext, rows: ActionRow[]): void {
  for (const row of rows) ctx.events.publish({ type: 'action', workspaceId: row.workspaceId, targetId: row.targetId, action: toActionRecord(row) });
}

import type { ActionRow } from '../store/actions.js';
import { toActionRecord } from './action-records.js';
import type { OperationContext } from './context.js';
import type { ActionChange } from './event-hub.js';

/** The committed change of one action, as this instance publishes it. */
export function actionChangeOf(row: ActionRow): ActionChange {
  return { type: 'action', workspaceId: row.workspaceId, targetId: row.targetId, connectionId: row.connectionId, action: toActionRecord(row) };
}

/** Tells waiters and the wake channel, after the change has committed. */
export function publishActions(ctx: OperationContext, rows: ActionRow[]): void {
  for (const row of rows) ctx.events.publish(actionChangeOf(row));
}

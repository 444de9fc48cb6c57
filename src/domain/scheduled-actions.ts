import { cancelForConditions, cancelIfRefused } from '../store/action-decisions.js';
import { expireDue } from '../store/action-expiry.js';
import { dueScheduled, promoteScheduled } from '../store/action-schedule.js';
import type { ActionRow } from '../store/actions.js';
import type { Db } from '../store/driver.js';
import { grantConditionsOf } from '../store/grants.js';
import { actionChangeOf } from './action-publishing.js';
import type { Clock, Logger } from './context.js';
import { logSweepFailure } from './errors.js';
import type { EventHub } from './event-hub.js';
import { conditionsCancelReason, parseStoredConditions, windowEndAt } from './grant-conditions.js';

/**
 * How often an instance looks for scheduled actions that became due: a scheduled action is
 * queued within this much of its `notBefore` (docs/agents/actions.md "Scheduling").
 */
export const SCHEDULE_TICK_MS = 250;

/** Scheduled actions made due per read: a backlog (after a restart) is worked off over several reads. */
const DUE_BATCH = 200;

/**
 * Makes every scheduled action due at `now` queued, or awaiting the owner's approval, after
 * checking again everything it was requested under, as an approval does
 * (docs/agents/actions.md "Scheduling"): its grant's conditions as the grant says them now
 * (`conditions_changed`, `outside_schedule`), then, in the guarded move itself, the permission
 * (`refusal`: grant, connection, device, function). A refusal cancels it with the reason; one
 * whose deadline passed first (the service was down) expires. Each move is one guarded UPDATE,
 * so two instances running this at once move each action once. Returns the changed actions.
 */
export async function makeDueActions(db: Db, now: number): Promise<ActionRow[]> {
  const changed: ActionRow[] = [];
  for (;;) {
    const due = await dueScheduled(db, now, DUE_BATCH);
    for (const scheduled of due) {
      const moved = await makeDue(db, scheduled, now);
      if (moved) changed.push(moved);
    }
    if (due.length < DUE_BATCH) return changed;
  }
}

async function makeDue(db: Db, scheduled: ActionRow, now: number): Promise<ActionRow | undefined> {
  const { workspaceId, id } = scheduled;
  const expired = (await expireDue(db, now, { workspaceId, id }))[0];
  if (expired) return expired;
  const conditions = parseStoredConditions(await grantConditionsOf(db, workspaceId, scheduled.principal, scheduled.deviceId, scheduled.capability));
  const reason = conditionsCancelReason(conditions, JSON.parse(scheduled.arguments) as Record<string, unknown>, now);
  if (reason) return cancelForConditions(db, workspaceId, id, reason, now);
  const waits = scheduled.approval !== 'none' && scheduled.decidedAt === null;
  // Queued now under a schedule: handed out only until its window closes (one that waits gets its limit when approved).
  const allowedUntil = !waits && conditions?.schedule ? windowEndAt(conditions.schedule, now) : null;
  // Not moved: another instance moved it first, or its permission no longer holds (cancelled with the reason).
  return (await promoteScheduled(db, workspaceId, id, allowedUntil, now)) ?? (await cancelIfRefused(db, workspaceId, id, now));
}

/**
 * Every `intervalMs`, one indexed read for the scheduled actions due (however many wait for later),
 * and the moves of those it finds, published so waiters and the device's wake channel hear of them.
 * Returns a function that stops it.
 */
export function startScheduler(deps: { db: Db; events: EventHub; clock: Clock; log: Logger }, intervalMs = SCHEDULE_TICK_MS): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    // Inside a promise, so that even a synchronous throw is caught: a timer callback that throws ends the process.
    Promise.resolve()
      .then(async () => {
        const rows = await makeDueActions(deps.db, deps.clock.now());
        for (const row of rows) deps.events.publish(actionChangeOf(row));
        if (rows.length > 0) deps.log.info({ msg: 'scheduled actions due', moved: rows.length });
      })
      .catch((error: unknown) => logSweepFailure(deps.log, 'scheduled actions failed', error))
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

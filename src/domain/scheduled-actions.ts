import { cancelForConditions, cancelIfRefused } from '../store/action-decisions.js';
import { expireDue } from '../store/action-expiry.js';
import { dueScheduled, nextDueAt, promoteScheduled } from '../store/action-schedule.js';
import type { ActionRow } from '../store/actions.js';
import type { Db } from '../store/driver.js';
import { grantConditionsOf } from '../store/grants.js';
import { actionChangeOf } from './action-publishing.js';
import type { Clock, Logger } from './context.js';
import { logSweepFailure } from './errors.js';
import type { EventHub } from './event-hub.js';
import { conditionsCancelReason, parseStoredConditions, windowEndAt } from './grant-conditions.js';

/**
 * The longest the scheduler's one timer sleeps before it compares the service clock with the
 * earliest due time it knows, in memory: a scheduled action is queued within this much of its
 * `notBefore` (docs/agents/actions.md "Scheduling") even when the clock jumps. No read is made then.
 */
export const SCHEDULE_TICK_MS = 250;

/**
 * How often an instance reads the earliest due time from the database anyway: for actions that
 * another instance scheduled when no shared bus told this one (or the bus lost the message),
 * and for those whose instance died before they were due.
 */
export const SCHEDULE_RESCAN_MS = 5_000;

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
 * The scheduler of one instance (docs/agents/actions.md "Scheduling"). It keeps the earliest
 * `notBefore` it knows in memory, learnt from the actions scheduled on this instance, from the
 * hints of the shared bus for those scheduled on another, and from one indexed read of the
 * earliest due time every `rescanMs`. One timer compares it with the clock at most `tickMs`
 * apart; the due actions are read and moved only once that time comes, so waiting actions cost
 * no read per action, and an idle instance one read per `rescanMs` however many wait. The moves
 * are published so waiters and the device's wake channel hear of them. Returns a function that stops it.
 */
export function startScheduler(
  deps: { db: Db; events: EventHub; clock: Clock; log: Logger },
  options: { tickMs?: number; rescanMs?: number } = {},
): () => void {
  const tickMs = options.tickMs ?? SCHEDULE_TICK_MS;
  const rescanMs = options.rescanMs ?? SCHEDULE_RESCAN_MS;
  /** The earliest due time known; undefined when none is known to wait. */
  let nextAt: number | undefined;
  /** Due times heard while a read was in flight: the read may have missed them. */
  let heardDuringRead: number | undefined;
  let reading = false;
  let stopped = false;
  let lastReadAt = -Infinity;
  let timer: NodeJS.Timeout | undefined;
  const earlier = (a: number | undefined, b: number | undefined) => (a === undefined ? b : b === undefined ? a : Math.min(a, b));

  const arm = () => {
    if (stopped || reading) return;
    clearTimeout(timer);
    const untilDue = nextAt === undefined ? tickMs : nextAt - deps.clock.now();
    timer = setTimeout(tick, Math.max(0, Math.min(tickMs, untilDue)));
    timer.unref();
  };

  const tick = () => {
    const now = deps.clock.now();
    const due = nextAt !== undefined && nextAt <= now;
    if (!due && performance.now() - lastReadAt < rescanMs) return arm();
    reading = true;
    heardDuringRead = undefined;
    lastReadAt = performance.now();
    // Inside a promise, so that even a synchronous throw is caught: a timer callback that throws ends the process.
    Promise.resolve()
      .then(async () => {
        if (due) {
          const rows = await makeDueActions(deps.db, now);
          for (const row of rows) deps.events.publish(actionChangeOf(row));
          if (rows.length > 0) deps.log.info({ msg: 'scheduled actions due', moved: rows.length });
        }
        nextAt = earlier(await nextDueAt(deps.db), heardDuringRead);
      })
      // What was known stays known: a failed read is tried again at the next tick.
      .catch((error: unknown) => logSweepFailure(deps.log, 'scheduled actions failed', error))
      .finally(() => {
        reading = false;
        arm();
      });
  };

  const unsubscribe = deps.events.subscribe((event) => {
    const at = event.type === 'action' && event.action.status === 'scheduled' ? event.action.notBefore : event.type === 'action-hint' ? event.dueAt : undefined;
    if (at === undefined || at === null) return;
    if (reading) heardDuringRead = earlier(heardDuringRead, at);
    const before = nextAt;
    nextAt = earlier(nextAt, at);
    if (nextAt !== before) arm();
  });

  // The first tick reads what waits already (scheduled before a restart, or on another instance).
  timer = setTimeout(tick, 0);
  timer.unref();
  return () => {
    stopped = true;
    unsubscribe();
    clearTimeout(timer);
  };
}

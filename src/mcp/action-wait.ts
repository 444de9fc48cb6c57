import { ACTION_STATES, ACTION_STATUSES, type ActionStatus } from '../domain/action-states.js';
import type { ActionRecord } from '../domain/action-records.js';
import { CHANGED_ELSEWHERE, watchAction, type ComingActionWatch } from '../domain/event-hub.js';
import { invoke } from '../domain/invoke.js';
import { operations } from '../domain/registry.js';
import type { McpSession } from './session.js';

// ---------------------------------------------------------------------------------------
// The wait for an action: a device tool call answers once its action settles or the wait
// bound passes, telling the client each state change as progress on the way.
// ---------------------------------------------------------------------------------------

export const DEFAULT_WAIT_MS = 10_000;
export const MAX_WAIT_MS = 60_000;
/** Request `_meta` key that sets how long a device tool call waits for the result, in seconds (0..60). */
export const WAIT_META_KEY = 'dfc/waitSeconds';

/** Progress is the action's stage counted from 1, out of as many as there are (awaiting_approval 1/4 → queued 2/4 → received 3/4 → done 4/4). */
export const PROGRESS_TOTAL = Math.max(...ACTION_STATUSES.map((status) => ACTION_STATES[status].stage)) + 1;

/** The progress message of each status: what the call is waiting for, in words. */
export const PROGRESS_MESSAGES: Partial<Record<ActionStatus, string>> = { awaiting_approval: "waiting for the owner's approval" };

/** The longest a device call of a client that declared MCP Tasks waits before it answers a task. */
export const TASK_WAIT_MS = 1_000;

/**
 * How long a device call waits for its action to finish: `dfc/waitSeconds`, or 10 s. A call
 * that may answer with a task waits at most TASK_WAIT_MS, then answers the task
 * (docs/agents/tasks.md): `dfc/waitSeconds` can shorten that wait, never lengthen it.
 */
export function waitBound(meta: Record<string, unknown> | undefined, task = false): number {
  const value = meta?.[WAIT_META_KEY];
  const asked = typeof value !== 'number' || !Number.isFinite(value) || value < 0 ? DEFAULT_WAIT_MS : Math.min(value * 1000, MAX_WAIT_MS);
  return task ? Math.min(asked, TASK_WAIT_MS) : asked;
}

/**
 * Waits for the action to settle, up to `waitMs`, telling the client each state change as
 * progress (awaiting_approval 1/4 → queued 2/4 → received 3/4 → done 4/4) when it asked for
 * progress; an action approved during the wait is then waited for as any queued one. The
 * changes published here (each a full Action, in commit order) are the state. `coming` is a watch
 * begun before the call created `first`: it holds every change since, so `first` is the state
 * to start from. Otherwise (an idempotent replay answers an Action created earlier) it watches
 * the action's changes first and then reads its state once, so a change that lands between
 * the insert and the watch is in the read and none after it is missed. Aborting `signal`
 * (the client went away or cancelled) ends the wait; the caller then withdraws the action.
 */
export async function awaitSettled(
  session: McpSession,
  first: ActionRecord,
  waitMs: number,
  signal: AbortSignal,
  progress: (action: ActionRecord) => Promise<void>,
  coming: ComingActionWatch | undefined,
): Promise<ActionRecord> {
  const { ctx } = session;
  const deadline = Date.now() + waitMs;
  const read = () => invoke(operations.getActionState, ctx, { actionId: first.id });
  await progress(first);
  if (ACTION_STATES[first.status].terminal) return first;
  // No wait (a task-mode call with `dfc/waitSeconds` 0): watched from before the insert,
  // `first` is the state as of now, so neither a deadline timer nor a watch of its changes is set up.
  if (coming && waitMs <= 0) return first;
  const changes = coming ? coming.of(first.id) : watchAction(ctx.events, first.id);
  // One deadline and one abort listener for the whole wait, however many changes it sees.
  const timer = setTimeout(() => changes.end(), Math.max(0, deadline - Date.now()));
  const onAbort = () => changes.end();
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    let current = first;
    if (!coming) {
      current = await read();
      await progress(current);
    }
    while (!ACTION_STATES[current.status].terminal && !signal.aborted) {
      if (deadline - Date.now() <= 0) break;
      const change = await changes.next();
      if (!change) {
        // Timed out or aborted: one last read so the answer is the state as of now.
        if (!signal.aborted) current = await read();
        break;
      }
      // Another instance's change is a hint off the shared bus, forgeable by whoever can
      // publish there: the answer is the action as stored (docs/operators/scale-out-security.md).
      const seen = change === CHANGED_ELSEWHERE ? await read() : change;
      // A change published before the read can be older than what the read saw.
      if (ACTION_STATES[seen.status].stage < ACTION_STATES[current.status].stage) continue;
      current = seen;
      await progress(current);
    }
    return current;
  } finally {
    clearTimeout(timer);
    signal.removeEventListener('abort', onAbort);
    changes.close();
  }
}

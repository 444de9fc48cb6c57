import { ACTION_STATES } from '../../domain/action-states.js';
import { agentStandingOf, ownsAction, readOwnAction, readOwnActions } from '../../domain/agent-tasks.js';
import type { OperationContext, CredentialOf } from '../../domain/context.js';
import { CHANGED_ELSEWHERE, onActionChange, onJournal, type ActionChange } from '../../domain/event-hub.js';
import { workspacePaused } from '../../domain/device-controls.js';
import { callableFunctionsValidUntil, listCallableFunctions } from '../../domain/functions.js';
import { deviceToolNames } from '../device-tool-names.js';
import type { ActionRecord } from '../../domain/action-records.js';
import type { EventSink } from '../../http/event-sink.js';
import { toHttpError } from '../../http/errors.js';
import { taskOf } from '../tasks/task-methods.js';
import type { TaskClock } from '../tasks/task-view.js';
import { stateWatcher } from './state-watch.js';

/** What a subscription asked for: the tool-list notification, and task ids (distinct), of which it follows the caller's own. */
export interface Asked {
  toolsListChanged: boolean;
  taskIds: string[];
  /** `resourceSubscriptions`: the `device://{deviceId}/state` resources to be told of (state-watch.ts). */
  resourceUris: string[];
}

export interface SubscriptionOptions {
  ctx: OperationContext;
  credential: CredentialOf<'agent'>;
  asked: Asked;
  /** The most tasks it follows; ids past the first `maxTasks` of the caller's own are left out. */
  maxTasks: number;
  /**
   * The most bytes of task notifications it tells (MCP_LISTEN_MAX_ANSWER_KIB): a finished task
   * whose notification does not fit is left out of the acknowledgement, and a stream that would
   * pass it later ends with `closing` (the client listens again).
   */
  maxAnswerBytes: number;
  clock: TaskClock;
  /** The listen request's JSON-RPC id, which an error that ends the subscription answers. */
  listenId: string | number;
  /** `_meta` every notification of the subscription carries: its id. */
  stamp: Record<string, unknown>;
  /** The listen request's result, written when the server ends the subscription. */
  closing: unknown;
  /** Where its frames go; its client going away ends the subscription. */
  sink: EventSink;
  /** How long the stream lasts at most; it then ends with `closing`, and the client listens again. */
  lifetimeMs: number;
  /** Frees the stream's place (slots.ts) once its connection has let go of it, however it ends. */
  release: () => void;
}

/** An SSE comment now and then, so proxies keep the stream open. */
const KEEPALIVE_MS = 15_000;
/**
 * How often the caller's standing (its connection revoked or expired), its workspace's
 * functions version and its unfinished tasks are read again without any event: a revoked
 * connection ends its subscriptions within this, and an event lost on the bus (or a read after
 * it that failed) delays a notification, a task's final state included, by no more.
 */
export const RECHECK_MS = 2_000;

/** setTimeout's longest delay; a later expiry is caught by the recheck. */
const MAX_TIMER_MS = 2 ** 31 - 1;

type Notify = (method: string, params: Record<string, unknown>) => Promise<void>;
/**
 * Tells the subscription's notification whose params (its `_meta` included) are already JSON
 * text, and resolves once the client has taken it: a client that does not read holds one
 * notification, never a backlog of them (docs/operators/security.md "Slow and silent clients").
 */
type NotifyText = (method: string, paramsText: string) => Promise<void>;

/** The caller's tasks on its stream: each change told once, in order, up to the final state. */
function taskFollower(o: SubscriptionOptions, notify: Notify, notifyText: NotifyText, exhausted: () => void) {
  const { ctx, credential } = o;
  // Only ids `adopt` read as the caller's own: the event hub carries every workspace's changes.
  const watched = new Set<string>();
  // Until `adopt` has read them, a change to any id asked for waits its turn behind that read
  // (`serially`), and is told only if the read found the task the caller's.
  const asked = new Set(o.asked.taskIds);
  let adopting = true;
  const lastSent = new Map<string, string>();
  const stages = new Map<string, number>();
  let left = o.maxAnswerBytes;
  // Serialised once: what is compared with the last one told, and counted, is what is sent.
  const textOf = async (action: ActionRecord) => JSON.stringify({ ...(await taskOf(ctx, credential, action, o.clock)), _meta: o.stamp });
  const send = async (action: ActionRecord, text: string): Promise<void> => {
    const { id } = action;
    const told = lastSent.get(id) === text;
    // A final state is told once and never compared again: its text (the result, twice) is not kept.
    if (ACTION_STATES[action.status].terminal) {
      watched.delete(id);
      lastSent.delete(id);
      stages.delete(id);
    } else lastSent.set(id, text);
    if (told) return;
    const bytes = Buffer.byteLength(text);
    if (bytes > left) return exhausted();
    left -= bytes;
    await notifyText('notifications/tasks', text);
  };
  /** Tells a followed task's state, unless it was told already or is older than what was. */
  const tell = async (action: ActionRecord, known?: string): Promise<void> => {
    if (!watched.has(action.id)) return;
    // A change published before a read can be older than what the read saw.
    const stage = ACTION_STATES[action.status].stage;
    if (stage < (stages.get(action.id) ?? -1)) return;
    stages.set(action.id, stage);
    await send(action, known ?? (await textOf(action)));
  };
  return {
    watches: (id: string) => watched.has(id) || (adopting && asked.has(id)),
    /** The tasks still followed, for the recheck to read again. */
    watchedIds: () => [...watched],
    /**
     * Reads the tasks asked for once, acknowledges the subscription and tells their state: the
     * caller's own (up to `maxTasks`) are followed, any other id is dropped, as an unknown one
     * is, all in one read. A read that fails throws before anything is followed or acknowledged.
     */
    async adopt(resources: string[] = []): Promise<void> {
      const own: ActionRecord[] = [];
      const finished = new Map<string, string>();
      let reserved = 0;
      for (const action of await readOwnActions(ctx, credential, o.asked.taskIds, o.maxTasks)) {
        // A finished task is told with its result: one that does not fit what is left of the
        // answer's bytes is not followed (tasks/get reads it), so no listen answer passes them.
        if (ACTION_STATES[action.status].terminal) {
          const text = await textOf(action);
          const bytes = Buffer.byteLength(text);
          if (reserved + bytes > o.maxAnswerBytes) continue;
          reserved += bytes;
          finished.set(action.id, text);
        }
        own.push(action);
      }
      for (const action of own) watched.add(action.id);
      adopting = false;
      const { toolsListChanged } = o.asked;
      await notify('notifications/subscriptions/acknowledged', {
        notifications: {
          ...(toolsListChanged ? { toolsListChanged } : {}),
          ...(o.asked.resourceUris.length > 0 ? { resourceSubscriptions: resources } : {}),
          taskIds: own.map((action) => action.id),
        },
      });
      for (const action of own) await tell(action, finished.get(action.id));
    },
    /** Every task it followed has reached its final state (or is gone): nothing more to tell of them. */
    allFinished: () => watched.size === 0,
    /**
     * Tells the task's state, read afresh, or as this instance committed it (`change`): that
     * one only when it is the caller's own, by the rule a read applies (agent-tasks.ts `ownsAction`).
     */
    async refresh(id: string, change?: ActionChange): Promise<void> {
      if (!watched.has(id)) return;
      if (change) {
        if (ownsAction(credential, { ...change, principal: change.action.principal })) await tell(change.action);
        return;
      }
      const action = (await readOwnAction(ctx, credential, id))?.action;
      if (!action) return void watched.delete(id);
      await tell(action);
    },
  };
}

/**
 * The caller's standing and tool list: `recheck` is false once its connection may no longer
 * act, and tells `tools/list_changed` when the names it may call changed since it was last told.
 */
function toolWatcher(o: SubscriptionOptions, notify: Notify) {
  const { ctx, credential } = o;
  const tools = { version: credential.functionsVersion, validUntil: Number.POSITIVE_INFINITY, names: '' };
  const toolNames = async (now: number) => {
    // Paused, the caller's listing shows no device tool (tools.ts), so neither does this.
    if (!ctx.settings.deviceControlsEnabled || (await workspacePaused(ctx, credential.workspaceId))) return '';
    const names = deviceToolNames(await listCallableFunctions(ctx.db, credential, now)).map((t) => t.name);
    tools.validUntil = await callableFunctionsValidUntil(ctx.db, credential, now);
    return names.join('\n');
  };
  return {
    async start(): Promise<void> {
      if (o.asked.toolsListChanged) tools.names = await toolNames(ctx.clock.now());
    },
    async recheck(): Promise<boolean> {
      const standing = await agentStandingOf(ctx, credential);
      if (!standing.live) return false;
      const now = ctx.clock.now();
      if (!o.asked.toolsListChanged || (standing.functionsVersion === tools.version && now < tools.validUntil)) return true;
      tools.version = standing.functionsVersion;
      const names = await toolNames(now);
      if (names !== tools.names) {
        tools.names = names;
        await notify('notifications/tools/list_changed', {});
      }
      return true;
    },
  };
}

/** The stream's timers, unreferenced: its keepalive, its recheck, its end of life, and its OAuth token's expiry. */
export function streamTimers(
  o: Pick<SubscriptionOptions, 'ctx' | 'credential' | 'lifetimeMs'>,
  on: { keepalive: () => void; recheck: () => void; end: () => void },
): NodeJS.Timeout[] {
  const timers = [setInterval(on.keepalive, KEEPALIVE_MS), setInterval(on.recheck, RECHECK_MS), setTimeout(on.end, Math.min(o.lifetimeMs, MAX_TIMER_MS))];
  // An OAuth token ends its streams when it expires, not at the next recheck after.
  const expiresAt = o.credential.oauth?.expiresAt;
  if (expiresAt !== undefined) timers.push(setTimeout(on.recheck, Math.min(Math.max(0, expiresAt - o.ctx.clock.now()), MAX_TIMER_MS)));
  for (const timer of timers) timer.unref();
  return timers;
}

/**
 * The answer to a listen request whose tasks (or tool list) could not be read: nothing is followed unread, so
 * it fails with the service's envelope (503 `unavailable` when the database was), and the
 * client listens again.
 */
function failedStart(o: SubscriptionOptions, error: unknown) {
  const { ctx } = o;
  const mapped = toHttpError(error, ctx.requestId);
  const line = { msg: 'mcp subscription could not start', requestId: ctx.requestId };
  // A database that failed is news for the operator (warn); anything else is a bug (error, with its stack).
  if (mapped.internal) ctx.log.error({ ...line, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
  else ctx.log.warn({ ...line, error: mapped.dependencyFailure ?? String(error) });
  return { jsonrpc: '2.0', id: o.listenId, error: { code: -32603, message: mapped.body.error.message, data: mapped.body } };
}

/** `job` queued on `serially` when it is not waiting there already: calls while it waits are one run. */
function once(serially: (job: () => Promise<void>) => void, job: () => Promise<void>): () => void {
  let queued = false;
  return () => {
    if (queued) return;
    queued = true;
    serially(async () => {
      queued = false;
      await job();
    });
  };
}

/**
 * One agent's subscription stream. Events only say when to look: a change of one of its
 * tasks (this instance's or a hint from another), a grant or device change in its workspace
 * (the journal announcement), or the recheck timer. What it is told is read from the database
 * (docs/operators/scale-out-security.md "The rule: the bus carries hints, never facts"), or is the change this instance itself
 * committed: the task as tasks/get answers it, and its tool list, compared by name with the
 * last one it was told of.
 */
export function openSubscription(o: SubscriptionOptions): void {
  const { ctx, credential, sink } = o;
  let closed = false;
  let work: Promise<void> = Promise.resolve();
  const timers: NodeJS.Timeout[] = [];
  let unsubscribe = () => {};
  const notifyText: NotifyText = async (method, paramsText) => {
    if (!sink.write(`event: message\ndata: {"jsonrpc":"2.0","method":${JSON.stringify(method)},"params":${paramsText}}\n\n`)) await sink.drained();
  };
  const notify: Notify = (method, params) => notifyText(method, JSON.stringify({ ...params, _meta: o.stamp }));
  const serially = (job: () => Promise<void>) => {
    work = work
      .then(() => (closed ? undefined : job()))
      .catch((error: unknown) => ctx.log.warn({ msg: 'mcp subscription check failed', error: String(error) }));
  };
  /** Ends the stream, with its last message if it has one (the listen request's answer). */
  const teardown = (last?: unknown) => {
    if (closed) return;
    if (last !== undefined) sink.write(`event: message\ndata: ${JSON.stringify(last)}\n\n`);
    closed = true;
    unsubscribe();
    states.close();
    for (const timer of timers) clearTimeout(timer);
    sink.end();
  };
  // A stream whose tasks would tell more than its bytes ends as at the end of its life: the
  // client listens again, and a finished task too large for an answer is left out then.
  const tasks = taskFollower(o, notify, notifyText, () => teardown(o.closing));
  const tools = toolWatcher(o, notify);
  const states = stateWatcher(ctx, credential, o.asked.resourceUris, serially, notify);
  // The timer's recheck also reads the unfinished tasks again, in case a change's event (or
  // the read it prompted) was lost: at most `maxTasks` reads, none once they have all finished.
  const recheck = async (withTasks: boolean) => {
    if (!(await tools.recheck())) return teardown(o.closing);
    // A revoked or expired grant ends the state resources it let the caller read.
    if (states.size() > 0) {
      await states.recheck();
      endIfDone();
    }
    if (!withTasks) return;
    for (const id of tasks.watchedIds()) await tasks.refresh(id);
    endIfDone();
  };
  // A stream that follows only tasks has nothing more to tell once they have all finished: it
  // ends with the listen request's result, as the client's own request would, so the client
  // reads a complete answer and keeps its connection instead of dropping it mid-stream.
  const endIfDone = () => {
    if (!o.asked.toolsListChanged && tasks.allFinished() && states.size() === 0) teardown(o.closing);
  };
  // Journal announcements that come while a tool-list read waits its turn are one read: a
  // burst of them (a device republishing in a loop) costs each stream one read, not one each.
  // Timer rechecks likewise: while a client does not read, the queue waits on it, and one
  // recheck waits with it, not one per tick.
  const recheckTools = once(serially, () => recheck(false));
  const recheckAll = once(serially, () => recheck(true));
  const follow = (id: string, change?: ActionChange) =>
    serially(async () => {
      await tasks.refresh(id, change);
      endIfDone();
    });
  // Found by action id and by workspace (event-hub.ts), not by a visit of every stream per event.
  const follows = () => {
    // This instance's own change is the committed state; another's hint is read afresh.
    const stops = o.asked.taskIds.map((id) =>
      onActionChange(ctx.events, id, (change) => {
        if (tasks.watches(id)) follow(id, change === CHANGED_ELSEWHERE ? undefined : change);
      }),
    );
    stops.push(onJournal(ctx.events, credential.workspaceId, recheckTools));
    return () => {
      for (const stop of stops) stop();
    };
  };

  // Its place is free once its bytes are gone (taken by the kernel) or its connection closed
  // (WRITE_TIMEOUT_SECONDS cuts one whose client does not read), not when its last frame is queued.
  sink.onClosed(o.release);
  sink.onGone(() => teardown());
  if (closed) return;
  unsubscribe = follows();
  serially(async () => {
    // Each task read once, after the events are watched: no change falls between the
    // read and the stream, and the read is both the ownership check and the first state told.
    try {
      await tasks.adopt(await states.adopt());
      await tools.start();
    } catch (error) {
      return teardown(failedStart(o, error));
    }
    // Nothing asked for, or no task of the caller's left unfinished: the answer ends here.
    endIfDone();
  });
  timers.push(
    ...streamTimers(o, {
      keepalive: () => sink.write(': keepalive\n\n'),
      recheck: recheckAll,
      end: () => serially(async () => teardown(o.closing)),
    }),
  );
}

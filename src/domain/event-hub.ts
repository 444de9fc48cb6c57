import type { ActionRecord } from './action-records.js';

/**
 * One state change of an action, published after the transaction that made it commits. It
 * never leaves the instance that committed it: the shared bus carries an `ActionHint` instead.
 */
export interface ActionChange {
  type: 'action';
  workspaceId: string;
  /** The device that fetches the command: the action's device, or its gateway. */
  targetId: string;
  /** The agent connection that requested it (null for actions older than migration 0013): with the principal, whose task it is. */
  connectionId: string | null;
  action: ActionRecord;
}

/** A device was revoked: its open wake sockets must close (docs/reference/rules.md "Credentials", code 4401). */
export interface DeviceRevoked {
  type: 'device-revoked';
  workspaceId: string;
  deviceId: string;
}

/**
 * Another instance says an action changed (its `ActionChange`, as the shared bus carries it):
 * which action, never how. Anyone able to publish on the bus could forge or replay one
 * (docs/operators/scale-out-security.md), so whoever acts on it reads the action from the database.
 */
export interface ActionHint {
  type: 'action-hint';
  workspaceId: string;
  targetId: string;
  actionId: string;
  /**
   * The change may call for a frame on the target's wake sockets (`needsSignal`): only then
   * does the instance holding them read the action. Forged true, it costs a read; forged
   * false, it changes nothing.
   */
  signal: boolean;
  /**
   * For an action scheduled there, its `notBefore`: this instance's scheduler looks for due
   * actions then (src/domain/scheduled-actions.ts). Forged, it costs one indexed read.
   */
  dueAt?: number;
}

/** Whether the target's wake sockets are told of this state: a wake for a queued command, a cancel for a recalled one. */
export function needsSignal(action: ActionRecord): boolean {
  return action.status === 'queued' || (action.status === 'received' && action.cancelRequestedAt !== null);
}

/** Another instance says a device was revoked: its revocation is read from the database before a socket closes. */
export interface RevocationHint {
  type: 'revocation-hint';
  workspaceId: string;
  deviceId: string;
}

/**
 * Work a surface keeps in memory on whichever instance runs it (a tool call waiting for its
 * result) is asked to stop, from a request that may land on another instance. `key` names
 * the work in the surface's own terms; the domain only carries it.
 */
export interface WorkCancelled {
  type: 'work-cancelled';
  key: string;
}

/** Whether an event was published by this instance or reached it from another over the shared bus. */
export type EventOrigin = 'this-instance' | 'another-instance';

export type EventListener = (event: ServiceEvent, origin: EventOrigin) => void;

/**
 * Something was written to the workspace's event journal that no other service event
 * announces (a grant given or revoked, a device going online or offline): the owner's open
 * event streams read the journal now instead of at their next safety poll (docs/reference/events.md "Owner events").
 */
export interface JournalWritten {
  type: 'journal';
  workspaceId: string;
  /**
   * Only `device.state_changed` events were journalled: nothing a caller may call or read
   * changed, so the MCP streams' access rechecks (`onJournal`) leave it out.
   */
  stateOnly?: true;
}

/**
 * Plain data. The shared bus (src/bus/redis-event-hub.ts) carries an action change or a revocation as
 * its hint, the other two as they are: only an instance's own events carry state.
 */
/**
 * A last-known value of the device changed (docs/devices/state.md): MCP sessions subscribed to
 * `device://{deviceId}/state` are told to read it again. Only ids: whoever acts on it reads the
 * state from the database, under the reader's grants.
 */
export interface DeviceStateChanged {
  type: 'device-state';
  workspaceId: string;
  deviceId: string;
}

/**
 * A 2025-era MCP session's resource subscriptions changed (`resources/subscribe` or
 * `resources/unsubscribe`, on whichever instance): its GET stream, wherever it is open, reads
 * them again (src/mcp/subscriptions/session-stream.ts). Only ids: a forged one costs a read.
 */
export interface SessionResourcesChanged {
  type: 'session-resources';
  workspaceId: string;
  /** The nonce of the session's id (src/mcp/client-sessions.ts). */
  session: string;
}

export type ServiceEvent =
  ActionChange | DeviceRevoked | ActionHint | RevocationHint | WorkCancelled | JournalWritten | DeviceStateChanged | SessionResourcesChanged;

/** After a commit that journalled grant or device events: open owner streams read them now. */
export function announceJournal(ctx: { events: EventHub }, workspaceId: string): void {
  ctx.events.publish({ type: 'journal', workspaceId });
}

/**
 * After a commit that journalled only `device.state_changed` events: owner streams read them
 * now, and MCP streams, which look at the journal for grant and device changes, do not.
 */
export function announceStateJournal(ctx: { events: EventHub }, workspaceId: string): void {
  ctx.events.publish({ type: 'journal', workspaceId, stateOnly: true });
}

/**
 * Where service events go: MCP tool calls wait on them, the wake channel turns `queued`
 * into wake frames. In one process this is the in-memory hub below; with `REDIS_URL` the
 * shared bus (src/bus/) puts Redis pub/sub behind the same interface, delivering every
 * instance's events on every instance (docs/operators/scale-out.md "What instances share").
 */
export interface EventHub {
  /** Delivers to this instance's listeners at once (and, on a shared bus, to the other instances). */
  publish(event: ServiceEvent): void;
  subscribe(listener: EventListener): () => void;
}

export function createEventHub(): EventHub {
  const listeners = new Set<EventListener>();
  return {
    publish(change) {
      for (const listener of listeners) listener(change, 'this-instance');
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

/**
 * What a watch hands its waiter: the Action as this instance committed it, or word that
 * another instance changed it. The second is a hint off the shared bus, which anyone able to
 * publish there could forge or replay: the waiter reads the action from the database.
 */
export const CHANGED_ELSEWHERE = 'changed-elsewhere';
export type WatchedChange = ActionRecord | typeof CHANGED_ELSEWHERE;

export interface ActionWatch {
  /** The next change of the action (oldest first), or undefined once the wait was ended (`end`) and none is left. */
  next(): Promise<WatchedChange | undefined>;
  /**
   * Ends the wait: a waiting `next` answers undefined, and so does every later one once the
   * changes kept are taken. The waiter sets its own deadline and cancellation around the
   * whole watch, one timer and one listener rather than one of each per change.
   */
  end(): void;
  close(): void;
}

type ChangeListener = (change: WatchedChange) => void;

/**
 * The watches of one hub, found by action id (or, before the action exists, by who requested
 * it): one hub listener hands each change to the watches it concerns, so a change costs a map
 * lookup however many calls are waiting, not one listener call per waiting call.
 */
interface Watches {
  /** Watches and followers of one action: this instance's own change as its event, another's as CHANGED_ELSEWHERE. */
  byAction: Map<string, Set<ActionChangeListener>>;
  byRequester: Map<string, Set<(action: ActionRecord) => void>>;
  /** Watches of coming actions by workspace, told which actions other instances changed there (their hints name no requester). */
  hintsByWorkspace: Map<string, Set<(actionId: string) => void>>;
  /** Followers of one workspace's journal announcements (`onJournal`). */
  journalsByWorkspace: Map<string, Set<() => void>>;
  /** Held polls of one device (`onDeviceWork`), by the id of the device that fetches. */
  byTarget: Map<string, Set<(reason: DeviceWork) => void>>;
  /** Followers of one device's last-known values (`onDeviceState`), by workspace and device. */
  statesByDevice: Map<string, Set<() => void>>;
  /** GET streams of 2025-era MCP sessions (`onSessionResources`), by workspace and session. */
  bySession: Map<string, Set<() => void>>;
}

/** This instance's own change of an action (the committed state), or word that another instance changed it. */
export type ActionChangeListener = (change: ActionChange | typeof CHANGED_ELSEWHERE) => void;

const hubWatches = new WeakMap<EventHub, Watches>();

const requesterKey = (workspaceId: string, principal: string) => `${workspaceId}\n${principal}`;

/**
 * Adds `listener` to the set kept under `key`, and answers its removal, which drops the set
 * once empty: the listener registries by key here and in the wake channel.
 */
export function addKeyedListener<L>(index: Map<string, Set<L>>, key: string, listener: L): () => void {
  let set = index.get(key);
  if (!set) index.set(key, (set = new Set()));
  set.add(listener);
  return () => {
    set.delete(listener);
    if (set.size === 0 && index.get(key) === set) index.delete(key);
  };
}

function watchesOf(hub: EventHub): Watches {
  let watches = hubWatches.get(hub);
  if (!watches) {
    const made: Watches = {
      byAction: new Map(),
      byRequester: new Map(),
      hintsByWorkspace: new Map(),
      journalsByWorkspace: new Map(),
      byTarget: new Map(),
      statesByDevice: new Map(),
      bySession: new Map(),
    };
    // Lives as long as the hub, like the hub's other long-lived listeners.
    hub.subscribe((event) => {
      if (event.type === 'action') {
        const { action } = event;
        for (const listener of made.byAction.get(action.id) ?? []) listener(event);
        for (const listener of made.byRequester.get(requesterKey(event.workspaceId, action.principal)) ?? []) listener(action);
        if (action.status === 'queued') for (const listener of made.byTarget.get(event.targetId) ?? []) listener('queued');
      } else if (event.type === 'action-hint') {
        for (const listener of made.byAction.get(event.actionId) ?? []) listener(CHANGED_ELSEWHERE);
        for (const listener of made.hintsByWorkspace.get(event.workspaceId) ?? []) listener(event.actionId);
        if (event.signal) for (const listener of made.byTarget.get(event.targetId) ?? []) listener('queued');
      } else if (event.type === 'journal') {
        if (!event.stateOnly) for (const listener of made.journalsByWorkspace.get(event.workspaceId) ?? []) listener();
      } else if (event.type === 'device-revoked' || event.type === 'revocation-hint') {
        for (const listener of made.byTarget.get(event.deviceId) ?? []) listener('revoked');
      } else if (event.type === 'device-state') {
        for (const listener of made.statesByDevice.get(requesterKey(event.workspaceId, event.deviceId)) ?? []) listener();
      } else if (event.type === 'session-resources') {
        for (const listener of made.bySession.get(requesterKey(event.workspaceId, event.session)) ?? []) listener();
      }
    });
    hubWatches.set(hub, (watches = made));
  }
  return watches;
}

/**
 * Calls `listener` with each change of the action published from now until the returned stop
 * (the `ActionChange` this instance committed, or CHANGED_ELSEWHERE for another instance's
 * hint): a long-lived follower, such as an MCP subscription stream, found by action id, so an
 * event costs a map lookup however many streams follow other actions.
 */
export function onActionChange(hub: EventHub, actionId: string, listener: ActionChangeListener): () => void {
  return addKeyedListener(watchesOf(hub).byAction, actionId, listener);
}

/** A watch's listener on the action's changes: the committed record, or CHANGED_ELSEWHERE. */
function watchedChanges(byAction: Watches['byAction'], actionId: string): (listener: ChangeListener) => () => void {
  return (listener) => addKeyedListener(byAction, actionId, (change) => listener(change === CHANGED_ELSEWHERE ? change : change.action));
}

/**
 * Calls `listener` on each journal announcement of the workspace (`JournalWritten`) that may
 * tell of a grant, device or function change, until the returned stop, found by workspace:
 * those of `device.state_changed` alone (`stateOnly`), as many as values change, are left out.
 */
export function onJournal(hub: EventHub, workspaceId: string, listener: () => void): () => void {
  return addKeyedListener(watchesOf(hub).journalsByWorkspace, workspaceId, listener);
}

/**
 * Why a held poll looks again: a command may have been queued for the device (`queued`), or
 * the device may have been revoked (`revoked`). Either is a hint, from this instance or, over
 * the shared bus, from another that anyone able to publish there could forge: the poll reads
 * the queue or the revocation from the database, so a forged hint costs one read.
 */
export type DeviceWork = 'queued' | 'revoked';

/**
 * Calls `listener` whenever a command may have been queued for `targetId` (the device that
 * fetches: the device itself, or a child's gateway) or it may have been revoked, until the
 * returned stop: the long-poll `next` (docs/devices/wire-protocol.md), found by device.
 */
export function onDeviceWork(hub: EventHub, targetId: string, listener: (reason: DeviceWork) => void): () => void {
  return addKeyedListener(watchesOf(hub).byTarget, targetId, listener);
}

/** How many held polls listen for `targetId` now (`onDeviceWork`). */
export function deviceWorkListeners(hub: EventHub, targetId: string): number {
  return watchesOf(hub).byTarget.get(targetId)?.size ?? 0;
}

/** Calls `listener` each time a last-known value of the device changes (`DeviceStateChanged`, from any instance) until the returned stop. */
export function onDeviceState(hub: EventHub, workspaceId: string, deviceId: string, listener: () => void): () => void {
  return addKeyedListener(watchesOf(hub).statesByDevice, requesterKey(workspaceId, deviceId), listener);
}

/** Calls `listener` each time the 2025-era session's resource subscriptions change (`SessionResourcesChanged`, from any instance) until the returned stop. */
export function onSessionResources(hub: EventHub, workspaceId: string, session: string, listener: () => void): () => void {
  return addKeyedListener(watchesOf(hub).bySession, requesterKey(workspaceId, session), listener);
}

/** A watch over the changes `listen` hands it, starting with `pending`. */
function changeWatch(listen: (listener: ChangeListener) => () => void, pending: WatchedChange[]): ActionWatch {
  let waiter: ((change: WatchedChange | undefined) => void) | undefined;
  let ended = false;
  const answer = (change: WatchedChange | undefined) => {
    const waiting = waiter;
    waiter = undefined;
    waiting?.(change);
  };
  const unsubscribe = listen((change) => {
    if (waiter) answer(change);
    // Hints in a row ask for the same read: one is kept, so a flood of them costs one read at a time.
    else if (change !== CHANGED_ELSEWHERE || pending.at(-1) !== CHANGED_ELSEWHERE) pending.push(change);
  });
  return {
    next() {
      const queued = pending.shift();
      if (queued) return Promise.resolve(queued);
      if (ended) return Promise.resolve(undefined);
      return new Promise((resolve) => (waiter = resolve));
    },
    end() {
      ended = true;
      answer(undefined);
    },
    close: unsubscribe,
  };
}

/**
 * Watches one action's published changes from now until `close`, keeping those nobody has
 * asked for yet. Watch first, then read the state: a change that commits between the two is
 * both in the read and among the changes, never lost.
 */
export function watchAction(hub: EventHub, actionId: string): ActionWatch {
  return changeWatch(watchedChanges(watchesOf(hub).byAction, actionId), []);
}

/** A watch started before its action exists: `of` names the action once it does. */
export interface ComingActionWatch {
  /** The watch of `actionId`, holding every change of it published since this watch began. */
  of(actionId: string): ActionWatch;
  close(): void;
}

/** More hinted ids than this while one action is being created, and the watch reads the action once instead of remembering them. */
const MAX_HINTS_KEPT = 64;

/**
 * Watches the changes of an action `principal` is about to request, from before it exists:
 * every change of it is published after this, so the watch sees them all, and the caller needs
 * no read to learn what happened between the insert and the watch. Until `of` names the
 * action, the principal's changes are kept; `of` keeps that action's and drops the rest. A
 * change another instance announced in the meantime names only its action: if it names this
 * one, the watch starts with a hint (the waiter reads the action).
 */
export function watchComingAction(hub: EventHub, workspaceId: string, principal: string): ComingActionWatch {
  const { byAction, byRequester, hintsByWorkspace } = watchesOf(hub);
  const seen: ActionRecord[] = [];
  const hinted = new Set<string>();
  let tooManyHints = false;
  const stopOwn = addKeyedListener(byRequester, requesterKey(workspaceId, principal), (action) => seen.push(action));
  const stopHints = addKeyedListener(hintsByWorkspace, workspaceId, (actionId) => {
    if (hinted.size < MAX_HINTS_KEPT) hinted.add(actionId);
    else tooManyHints = true;
  });
  const stop = () => {
    stopOwn();
    stopHints();
  };
  return {
    of(actionId) {
      stop();
      const pending: WatchedChange[] = seen.filter((action) => action.id === actionId);
      if (tooManyHints || hinted.has(actionId)) pending.push(CHANGED_ELSEWHERE);
      return changeWatch(watchedChanges(byAction, actionId), pending);
    },
    close: stop,
  };
}

import type { ActionRecord } from './action-records.js';

/** One state change of an action, published after the transaction that made it commits. */
export interface ActionChange {
  type: 'action';
  workspaceId: string;
  /** The device that fetches the command: the action's device, or its gateway. */
  targetId: string;
  action: ActionRecord;
}

/** A device was revoked: its open wake sockets must close (docs/rules.md "Credentials", code 4401). */
export interface DeviceRevoked {
  type: 'device-revoked';
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
 * event streams read the journal now instead of at their next safety poll (README "Owner events").
 */
export interface JournalWritten {
  type: 'journal';
  workspaceId: string;
}

/** Plain JSON data, so a shared bus carries any of them without knowing their types. */
export type ServiceEvent = ActionChange | DeviceRevoked | WorkCancelled | JournalWritten;

/** After a commit that journalled grant or device events: open owner streams read them now. */
export function announceJournal(ctx: { events: EventHub }, workspaceId: string): void {
  ctx.events.publish({ type: 'journal', workspaceId });
}

/**
 * Where service events go: MCP tool calls wait on them, the wake channel turns `queued`
 * into wake frames. In one process this is the in-memory hub below; with `REDIS_URL` the
 * shared bus (src/bus/) puts Redis pub/sub behind the same interface, delivering every
 * instance's events on every instance (README "What instances share").
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

export interface ActionWatch {
  /** The next published change of the action (oldest first), or undefined once the wait was ended (`end`) and none is left. */
  next(): Promise<ActionRecord | undefined>;
  /**
   * Ends the wait: a waiting `next` answers undefined, and so does every later one once the
   * changes kept are taken. The waiter sets its own deadline and cancellation around the
   * whole watch, one timer and one listener rather than one of each per change.
   */
  end(): void;
  close(): void;
}

type ChangeListener = (action: ActionRecord) => void;

/**
 * The watches of one hub, found by action id (or, before the action exists, by who requested
 * it): one hub listener hands each change to the watches it concerns, so a change costs a map
 * lookup however many calls are waiting, not one listener call per waiting call.
 */
interface Watches {
  byAction: Map<string, Set<ChangeListener>>;
  byRequester: Map<string, Set<ChangeListener>>;
}

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
    const made: Watches = { byAction: new Map(), byRequester: new Map() };
    // Lives as long as the hub, like the hub's other long-lived listeners.
    hub.subscribe((event) => {
      if (event.type !== 'action') return;
      for (const listener of made.byAction.get(event.action.id) ?? []) listener(event.action);
      for (const listener of made.byRequester.get(requesterKey(event.workspaceId, event.action.principal)) ?? []) listener(event.action);
    });
    hubWatches.set(hub, (watches = made));
  }
  return watches;
}

/** A watch over the changes `listen` hands it, starting with `pending`. */
function changeWatch(listen: (listener: ChangeListener) => () => void, pending: ActionRecord[]): ActionWatch {
  let waiter: ((action: ActionRecord | undefined) => void) | undefined;
  let ended = false;
  const answer = (action: ActionRecord | undefined) => {
    const waiting = waiter;
    waiter = undefined;
    waiting?.(action);
  };
  const unsubscribe = listen((action) => {
    if (waiter) answer(action);
    else pending.push(action);
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
  const { byAction } = watchesOf(hub);
  return changeWatch((listener) => addKeyedListener(byAction, actionId, listener), []);
}

/** A watch started before its action exists: `of` names the action once it does. */
export interface ComingActionWatch {
  /** The watch of `actionId`, holding every change of it published since this watch began. */
  of(actionId: string): ActionWatch;
  close(): void;
}

/**
 * Watches the changes of an action `principal` is about to request, from before it exists:
 * every change of it is published after this, so the watch sees them all, and the caller needs
 * no read to learn what happened between the insert and the watch. Until `of` names the
 * action, the principal's changes are kept; `of` keeps that action's and drops the rest.
 */
export function watchComingAction(hub: EventHub, workspaceId: string, principal: string): ComingActionWatch {
  const { byAction, byRequester } = watchesOf(hub);
  const seen: ActionRecord[] = [];
  const stop = addKeyedListener(byRequester, requesterKey(workspaceId, principal), (action) => seen.push(action));
  return {
    of(actionId) {
      stop();
      return changeWatch(
        (listener) => addKeyedListener(byAction, actionId, listener),
        seen.filter((action) => action.id === actionId),
      );
    },
    close: stop,
  };
}

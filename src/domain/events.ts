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
 * Something was written to the workspace's event journal that no other service event
 * announces (a grant given or revoked, a device going online or offline): the owner's open
 * event streams read the journal now instead of at their next safety poll (README "Owner events").
 */
export interface JournalWritten {
  type: 'journal';
  workspaceId: string;
}

export type ServiceEvent = ActionChange | DeviceRevoked | JournalWritten;

/** After a commit that journalled grant or device events: open owner streams read them now. */
export function announceJournal(ctx: { events: EventHub }, workspaceId: string): void {
  ctx.events.publish({ type: 'journal', workspaceId });
}

/**
 * Where service events go: MCP tool calls wait on them, the wake channel turns `queued`
 * into wake frames. In one process this is the in-memory hub below; several instances
 * behind a load balancer would put a shared bus (e.g. libSQL-polled outbox, Redis pub/sub)
 * behind the same interface.
 */
export interface EventHub {
  publish(event: ServiceEvent): void;
  subscribe(listener: (event: ServiceEvent) => void): () => void;
}

export function createEventHub(): EventHub {
  const listeners = new Set<(event: ServiceEvent) => void>();
  return {
    publish(change) {
      for (const listener of listeners) listener(change);
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
  };
}

export interface ActionWatch {
  /**
   * The next published change of the action (oldest first), or undefined when the timeout
   * passes or the signal aborts first.
   */
  next(options: { timeoutMs: number; signal?: AbortSignal }): Promise<ActionRecord | undefined>;
  close(): void;
}

/**
 * Watches one action's published changes from now until `close`, keeping those nobody has
 * asked for yet. Watch first, then read the state: a change that commits between the two is
 * both in the read and among the changes, never lost.
 */
export function watchAction(hub: EventHub, actionId: string): ActionWatch {
  const pending: ActionRecord[] = [];
  let waiter: ((action: ActionRecord | undefined) => void) | undefined;
  const unsubscribe = hub.subscribe((event) => {
    if (event.type !== 'action' || event.action.id !== actionId) return;
    if (waiter) waiter(event.action);
    else pending.push(event.action);
  });
  return {
    next({ timeoutMs, signal }) {
      const queued = pending.shift();
      if (queued) return Promise.resolve(queued);
      if (signal?.aborted) return Promise.resolve(undefined);
      return new Promise((resolve) => {
        const finish = (value: ActionRecord | undefined) => {
          clearTimeout(timer);
          signal?.removeEventListener('abort', onAbort);
          waiter = undefined;
          resolve(value);
        };
        const onAbort = () => finish(undefined);
        const timer = setTimeout(() => finish(undefined), timeoutMs);
        signal?.addEventListener('abort', onAbort, { once: true });
        waiter = finish;
      });
    },
    close: () => {
      unsubscribe();
    },
  };
}

import type { ActionRecord } from './action-records.js';

/** One state change of an action, published after the transaction that made it commits. */
export interface ActionChange {
  type: 'action';
  workspaceId: string;
  /** The device that fetches the command: the action's device, or its gateway. */
  targetId: string;
  action: ActionRecord;
}

/** A device was revoked: its open wake sockets must close (decisions §2, code 4401). */
export interface DeviceRevoked {
  type: 'device-revoked';
  workspaceId: string;
  deviceId: string;
}

export type ServiceEvent = ActionChange | DeviceRevoked;

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

/**
 * Resolves with the action's next published change, or undefined when the signal aborts
 * or the timeout passes first. Subscribe before re-reading state to close the gap between
 * a read and the wait.
 */
export function waitForActionChange(
  hub: EventHub,
  actionId: string,
  options: { timeoutMs: number; signal?: AbortSignal },
): Promise<ActionRecord | undefined> {
  return new Promise((resolve) => {
    if (options.signal?.aborted) return resolve(undefined);
    const finish = (value: ActionRecord | undefined) => {
      clearTimeout(timer);
      unsubscribe();
      options.signal?.removeEventListener('abort', onAbort);
      resolve(value);
    };
    const onAbort = () => finish(undefined);
    const unsubscribe = hub.subscribe((event) => {
      if (event.type === 'action' && event.action.id === actionId) finish(event.action);
    });
    const timer = setTimeout(() => finish(undefined), options.timeoutMs);
    options.signal?.addEventListener('abort', onAbort, { once: true });
  });
}

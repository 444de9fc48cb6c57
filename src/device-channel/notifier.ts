import { addKeyedListener, type EventHub } from '../domain/events.js';

/** The wake frame, exactly as sent on the socket (README "Wake channel"). */
export interface WakeFrame {
  type: 'wake';
  /** The device that runs the command: the socket's device, or one of its gateway's children. */
  deviceId: string;
  actionId: string;
}

/**
 * The cancel frame (README "Wake channel"): stop a command already fetched; its permission
 * was withdrawn. Whatever the device reports for it is still stored.
 */
export interface CancelFrame {
  type: 'cancel';
  deviceId: string;
  actionId: string;
  /** The action's `cancelReason`. */
  reason: string;
}

/** What a device's open sockets are told, addressed by the id of the device holding the socket. */
export type DeviceSignal =
  | { type: 'wake'; frame: WakeFrame; /** When the action was queued, for the wake latency metric. */ queuedAt: number }
  | { type: 'cancel'; frame: CancelFrame }
  | { type: 'revoked' };

/**
 * Delivers signals to the sockets a device holds on this instance, whichever instance
 * raised them. In one process, `createLocalNotifier` below. Several instances behind a load
 * balancer put a shared bus behind the same interface (README "Wake channel": each instance
 * publishes its committed changes to a channel per device and subscribes for the devices
 * whose sockets it holds). A wake is only a hint: a lost one delays a command until the
 * device's next poll, it never loses it, because the queue lives in the database.
 */
export interface DeviceNotifier {
  /** Calls `listener` for every signal addressed to `deviceId` until the returned function is called. */
  listen(deviceId: string, listener: (signal: DeviceSignal) => void): () => void;
  close(): void;
}

/**
 * The in-process notifier: turns the service's own events into device signals. A `queued`
 * action wakes the device that fetches it (`targetId`: the device, or a child's gateway);
 * a recall (a `received` action that gained `cancelRequestedAt`) tells the same device to
 * stop it; a revocation reaches the revoked device's sockets. Listeners are indexed by device, so a
 * wake costs one map lookup however many sockets are open.
 */
export function createLocalNotifier(events: EventHub): DeviceNotifier {
  const listeners = new Map<string, Set<(signal: DeviceSignal) => void>>();
  const deliver = (deviceId: string, signal: DeviceSignal) => {
    for (const listener of listeners.get(deviceId) ?? []) listener(signal);
  };
  const unsubscribe = events.subscribe((event) => {
    if (event.type === 'action' && event.action.status === 'queued') {
      deliver(event.targetId, {
        type: 'wake',
        frame: { type: 'wake', deviceId: event.action.deviceId, actionId: event.action.id },
        // An approved action was queued when it was approved (docs/rules.md "Approvals"), not when asked for.
        queuedAt: event.action.approval?.decidedAt ?? event.action.createdAt,
      });
    } else if (event.type === 'action' && event.action.status === 'received' && event.action.cancelRequestedAt !== null) {
      const { deviceId, id, cancelReason } = event.action;
      deliver(event.targetId, { type: 'cancel', frame: { type: 'cancel', deviceId, actionId: id, reason: cancelReason ?? '' } });
    } else if (event.type === 'device-revoked') {
      deliver(event.deviceId, { type: 'revoked' });
    }
  });
  return {
    listen: (deviceId, listener) => addKeyedListener(listeners, deviceId, listener),
    close() {
      unsubscribe();
      listeners.clear();
    },
  };
}

import type { ActionRecord } from '../domain/action-records.js';
import { isDeviceRevoked, storedActionFor } from '../domain/device-wake-socket.js';
import { addKeyedListener, type EventHub } from '../domain/event-hub.js';
import type { Db } from '../store/driver.js';

/** The wake frame, exactly as sent on the socket (docs/devices/wire-protocol.md "Wake channel"). */
export interface WakeFrame {
  type: 'wake';
  /** The device that runs the command: the socket's device, or one of its gateway's children. */
  deviceId: string;
  actionId: string;
}

/**
 * The cancel frame (docs/devices/wire-protocol.md "Wake channel"): stop a command already fetched; its permission
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
 * raised them: `createLocalNotifier` below, fed by the event hub, which several instances
 * share through Redis (docs/operators/scale-out.md "What instances share"). A wake is only a hint: a lost one
 * delays a command until the device's next poll, it never loses it, because the queue lives
 * in the database.
 */
export interface DeviceNotifier {
  /** Calls `listener` for every signal addressed to `deviceId` until the returned function is called. */
  listen(deviceId: string, listener: (signal: DeviceSignal) => void): () => void;
  close(): void;
}

export interface NotifierDeps {
  db: Db;
  /** A read started by another instance's message failed (the database is down): the signal is dropped. */
  onError: (error: unknown) => void;
}

/**
 * At most this many database reads started by other instances' messages are in flight; past
 * it, a message is dropped rather than queue reads behind a flood of them. A dropped
 * wake waits for the device's next poll; a dropped revocation still fails the device's next
 * request with 401 (docs/operators/scale-out-security.md).
 */
export const MAX_HINT_READS = 32;

/**
 * The notifier: turns the service's events into device signals. A `queued` action wakes the
 * device that fetches it (`targetId`: the device, or a child's gateway); a recall (a
 * `received` action that gained `cancelRequestedAt`) tells the same device to stop it; a
 * revocation reaches the revoked device's sockets. Listeners are indexed by device, so a wake
 * costs one map lookup however many sockets are open.
 *
 * This instance's own events carry what it committed. Another instance's arrive over the
 * shared bus as ids, which anyone able to publish there could forge or replay
 * (docs/operators/scale-out-security.md): for a change that may call for a frame (the hint's `signal`)
 * or a revocation, the instance holding the device's sockets, and only it, reads the action
 * or the device's revocation from the database and signals what is stored, so a forged
 * revocation closes nothing and a replayed recall of a finished command sends nothing.
 */
export function createLocalNotifier(events: EventHub, deps: NotifierDeps): DeviceNotifier {
  const listeners = new Map<string, Set<(signal: DeviceSignal) => void>>();
  const deliver = (deviceId: string, signal: DeviceSignal) => {
    for (const listener of listeners.get(deviceId) ?? []) listener(signal);
  };
  const signalAction = (targetId: string, action: ActionRecord) => {
    if (action.status === 'queued') {
      deliver(targetId, {
        type: 'wake',
        frame: { type: 'wake', deviceId: action.deviceId, actionId: action.id },
        // An approved action was queued when it was approved (docs/reference/rules.md "Approvals"), not when asked for.
        queuedAt: action.approval?.decidedAt ?? action.createdAt,
      });
    } else if (action.status === 'received' && action.cancelRequestedAt !== null) {
      const { deviceId, id, cancelReason } = action;
      deliver(targetId, { type: 'cancel', frame: { type: 'cancel', deviceId, actionId: id, reason: cancelReason ?? '' } });
    }
  };
  // Keyed by everything the read uses, so a forged hint naming a real action with another
  // workspace or device cannot stand in for the real one. The same message arriving while its
  // read runs asks for one more read once it ends (the first may have read before the change it
  // announces), never more.
  const reading = new Map<string, { again: boolean }>();
  const readThen = <T>(key: string, read: () => Promise<T>, act: (found: T) => void) => {
    const running = reading.get(key);
    if (running) {
      running.again = true;
      return;
    }
    if (reading.size >= MAX_HINT_READS) return;
    const state = { again: false };
    reading.set(key, state);
    const run = (): void => {
      read()
        .then(act)
        .catch(deps.onError)
        .finally(() => {
          if (!state.again) return reading.delete(key);
          state.again = false;
          run();
        });
    };
    run();
  };
  const unsubscribe = events.subscribe((event) => {
    if (event.type === 'action') signalAction(event.targetId, event.action);
    else if (event.type === 'device-revoked') deliver(event.deviceId, { type: 'revoked' });
    else if (event.type === 'action-hint' && event.signal && listeners.has(event.targetId)) {
      const { workspaceId, targetId, actionId } = event;
      readThen(
        `action\n${workspaceId}\n${targetId}\n${actionId}`,
        () => storedActionFor(deps.db, workspaceId, actionId, targetId),
        (action) => action && signalAction(targetId, action),
      );
    } else if (event.type === 'revocation-hint' && listeners.has(event.deviceId)) {
      const { workspaceId, deviceId } = event;
      readThen(
        `device\n${workspaceId}\n${deviceId}`,
        () => isDeviceRevoked(deps.db, workspaceId, deviceId),
        (revoked) => revoked && deliver(deviceId, { type: 'revoked' }),
      );
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

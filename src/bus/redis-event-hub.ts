import { randomUUID } from 'node:crypto';
import { needsSignal, type ActionChange, type DeviceRevoked, type EventHub, type EventListener, type ServiceEvent } from '../domain/event-hub.js';
import type { RedisConnection } from './redis.js';

/** What crosses the bus: the hints, and the events that are hints already. */
type WireEvent = Exclude<ServiceEvent, ActionChange | DeviceRevoked>;

const isId = (value: unknown): value is string => typeof value === 'string' && value.length > 0 && value.length <= 128;

/**
 * What may travel on the channel: ids, never state (docs/operators/scale-out-security.md). An action
 * change crosses as the hint naming it and a revocation as the hint naming the device; the
 * instances that hear them read the database before acting. A message is rebuilt from the
 * fields its type names, and whatever is not one of these is dropped, so a publisher on the
 * bus cannot hand an instance an Action or a state.
 */
function readWire(message: string): { from: unknown; event: WireEvent } | undefined {
  const raw: unknown = JSON.parse(message);
  if (typeof raw !== 'object' || raw === null) return undefined;
  const { from, event } = raw as Record<string, unknown>;
  if (typeof event !== 'object' || event === null) return undefined;
  const e = event as Record<string, unknown>;
  switch (e.type) {
    case 'action-hint':
      return isId(e.workspaceId) && isId(e.targetId) && isId(e.actionId) && typeof e.signal === 'boolean'
        ? {
            from,
            event: {
              type: e.type,
              workspaceId: e.workspaceId,
              targetId: e.targetId,
              actionId: e.actionId,
              signal: e.signal,
              ...(typeof e.dueAt === 'number' && Number.isFinite(e.dueAt) ? { dueAt: e.dueAt } : {}),
            },
          }
        : undefined;
    case 'revocation-hint':
      return isId(e.workspaceId) && isId(e.deviceId) ? { from, event: { type: e.type, workspaceId: e.workspaceId, deviceId: e.deviceId } } : undefined;
    case 'journal':
      return isId(e.workspaceId)
        ? { from, event: { type: e.type, workspaceId: e.workspaceId, ...(e.stateOnly === true ? { stateOnly: true as const } : {}) } }
        : undefined;
    case 'device-state':
      return isId(e.workspaceId) && isId(e.deviceId) ? { from, event: { type: e.type, workspaceId: e.workspaceId, deviceId: e.deviceId } } : undefined;
    case 'session-resources':
      return isId(e.workspaceId) && isId(e.session) ? { from, event: { type: e.type, workspaceId: e.workspaceId, session: e.session } } : undefined;
    case 'work-cancelled':
      return isId(e.key) ? { from, event: { type: e.type, key: e.key } } : undefined;
    default:
      return undefined;
  }
}

/** An event as another instance hears it: an own change or revocation becomes its hint; the rest have no state to strip. */
function toWire(event: ServiceEvent): WireEvent {
  switch (event.type) {
    case 'action':
      return {
        type: 'action-hint',
        workspaceId: event.workspaceId,
        targetId: event.targetId,
        actionId: event.action.id,
        signal: needsSignal(event.action),
        ...(event.action.status === 'scheduled' && event.action.notBefore !== null ? { dueAt: event.action.notBefore } : {}),
      };
    case 'device-revoked':
      return { type: 'revocation-hint', workspaceId: event.workspaceId, deviceId: event.deviceId };
    default:
      return event;
  }
}

/**
 * The event hub shared by every instance through Redis pub/sub (docs/operators/scale-out.md "What instances
 * share"). `publish` delivers to this instance's listeners at once, as the in-memory hub
 * does, and sends the event's hint to Redis; hints from the other instances are delivered here
 * as they arrive. An instance skips its own events coming back from Redis, so none is
 * delivered twice. One channel for all: every instance needs the action changes anyway (MCP
 * calls wait on them), and Redis keeps each publisher's messages in order.
 *
 * Redis is not trusted (docs/operators/scale-out-security.md): anyone able to publish on the channel
 * can send any message, or replay one, so a message only says what to read again. The `from`
 * id only spares an instance its own echo; forging it makes an instance ignore a message.
 *
 * While Redis is down an event reaches only this instance (`onLost` counts it): a wake is a
 * hint and the device's safety poll finds the command in the database; an MCP call waiting
 * elsewhere answers the action as stored when its wait ends.
 */
export function createRedisEventHub(redis: RedisConnection, deps: { onLost: () => void; onError: (error: unknown) => void }): EventHub & { close(): void } {
  const self = randomUUID();
  // The one channel every instance of the deployment publishes to and subscribes to.
  const channelName = `${redis.prefix}events`;
  const listeners = new Set<EventListener>();

  const onMessage = (channel: string, message: string) => {
    if (channel !== channelName) return;
    // This runs in the Redis client's event emitter: a throw here would end the process.
    try {
      const wire = readWire(message);
      if (!wire) throw new Error('not an event of this service');
      if (wire.from === self) return;
      for (const listener of listeners) listener(wire.event, 'another-instance');
    } catch (error) {
      deps.onError(error);
    }
  };
  redis.subscriber.on('message', onMessage);
  // Queued until the subscriber first connects; rejected only when the hub is closed first.
  redis.subscriber.subscribe(channelName).catch(() => {});

  return {
    publish(event) {
      for (const listener of listeners) listener(event, 'this-instance');
      if (!redis.canSend()) {
        deps.onLost();
        return;
      }
      redis.commands.publish(channelName, JSON.stringify({ from: self, event: toWire(event) })).catch(() => deps.onLost());
    },
    subscribe(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      redis.subscriber.off('message', onMessage);
      listeners.clear();
    },
  };
}

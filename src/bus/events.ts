import { randomUUID } from 'node:crypto';
import type { EventHub, EventListener, ServiceEvent } from '../domain/events.js';
import type { RedisConnection } from './redis.js';

/** What travels on the channel: the event as plain JSON, and who sent it. */
interface Envelope {
  from: string;
  event: ServiceEvent;
}

/**
 * The event hub shared by every instance through Redis pub/sub (README "What instances
 * share"). `publish` delivers to this instance's listeners at once, as the in-memory hub
 * does, and sends the event to Redis; events from the other instances are delivered here as
 * they arrive. An instance skips its own events coming back from Redis, so none is delivered
 * twice. Events are carried as JSON whatever their type: a new `ServiceEvent` needs no change
 * here. One channel for all: every instance needs the action changes anyway (MCP calls wait
 * on them), and Redis keeps each publisher's messages in order.
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
      const envelope = JSON.parse(message) as Envelope;
      if (envelope.from === self) return;
      for (const listener of listeners) listener(envelope.event, 'another-instance');
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
      const envelope: Envelope = { from: self, event };
      redis.commands.publish(channelName, JSON.stringify(envelope)).catch(() => deps.onLost());
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

import { Redis, type RedisOptions } from 'ioredis';
import type { Logger } from '../domain/context.js';
import type { DependencyCheck } from '../domain/readiness.js';

/**
 * The connections to REDIS_URL (docs/operators/scale-out.md "What instances share"): one for commands (publish,
 * the rate-limit script, the readiness ping) and one in subscriber mode, as Redis requires.
 *
 * Redis is shared state, never the record: when it is down requests keep working from the
 * database, so commands fail at once instead of queueing (`enableOfflineQueue: false`) or
 * after `COMMAND_TIMEOUT_MS` on a connection that hangs, and callers fall back. ioredis
 * reconnects by itself and subscribes again to what it was subscribed to, so an instance
 * comes back without a restart. One warn line when Redis goes down, one info line when it
 * is back, whatever the number of failed reconnects in between.
 */
export interface RedisConnection {
  /**
   * What every key and channel of this deployment starts with (REDIS_KEY_PREFIX): what its
   * Redis ACL user is limited to. Not a boundary between deployments: each has its own Redis
   * (docs/operators/scale-out-security.md).
   */
  prefix: string;
  commands: Redis;
  subscriber: Redis;
  /** Both connections are ready now (`dfc_redis_up`). */
  up(): boolean;
  /** The command connection is ready: a publish or a bucket can go now, whatever the subscriber's state. */
  canSend(): boolean;
  readiness: DependencyCheck;
  close(): void;
}

/** Long enough for a loaded Redis, short enough that a request falling back is not held up much. */
const COMMAND_TIMEOUT_MS = 500;
/** Reconnect attempts back off to one a second, so a returning Redis is found within a second. */
const retryStrategy = (attempt: number) => Math.min(attempt * 100, 1000);

/**
 * A Redis URL for logs: scheme, host, port and database only. ioredis reads the password
 * from the user info (which may itself hold an `@`: the last one ends it) and from the query
 * (`?password=`), so both are cut, parsed as ioredis parses them rather than by pattern.
 */
export const displayRedisUrl = (url: string) => {
  try {
    const { protocol, host, pathname } = new URL(url);
    return `${protocol}//${host}${pathname}`;
  } catch {
    return 'REDIS_URL';
  }
};

export function connectRedis(url: string, deps: { log: Logger; prefix: string; onChange?: (up: boolean) => void }): RedisConnection {
  const { log } = deps;
  const shared: RedisOptions = { retryStrategy, connectTimeout: 2000, lazyConnect: false };
  const commands = new Redis(url, { ...shared, enableOfflineQueue: false, commandTimeout: COMMAND_TIMEOUT_MS, maxRetriesPerRequest: 0 });
  // The subscriber queues its SUBSCRIBE until the first connection, however long Redis takes
  // to appear; ioredis then repeats it after every reconnect (autoResubscribe).
  const subscriber = new Redis(url, { ...shared, enableOfflineQueue: true, maxRetriesPerRequest: null, autoResubscribe: true });

  const where = displayRedisUrl(url);
  let state: boolean | undefined;
  let lastError = '';
  let closing = false;
  const update = (event: 'ready' | 'close' | 'error') => {
    if (closing) return;
    const now = commands.status === 'ready' && subscriber.status === 'ready';
    // One connection ready and the other still connecting at start is not "down".
    if (now === state || (state === undefined && !now && event === 'ready')) return;
    // The first answer is logged too: a start with Redis down says so once, at warn.
    if (now) log.info({ msg: state === undefined ? 'redis connected' : 'redis is back: events and rate limits are shared again', redis: where });
    else
      log.warn({
        msg: 'redis is down: events reach only this instance (devices fall back to polling), rate limits are per instance',
        redis: where,
        error: lastError,
      });
    state = now;
    deps.onChange?.(now);
  };
  for (const connection of [commands, subscriber]) {
    connection.on('ready', () => update('ready'));
    connection.on('close', () => update('close'));
    // Without a listener ioredis prints every failed reconnect to stderr; the state change is logged once instead.
    connection.on('error', (error: Error) => {
      lastError = error.message;
      update('error');
    });
  }

  return {
    prefix: deps.prefix,
    commands,
    subscriber,
    up: () => commands.status === 'ready' && subscriber.status === 'ready',
    canSend: () => commands.status === 'ready',
    readiness: {
      name: 'redis',
      async check() {
        if (commands.status !== 'ready') throw new Error(`Redis at ${where} is not connected (${commands.status})`);
        // Bounded by the command timeout: a Redis that accepts connections but does not answer is not ready.
        await commands.ping().catch((error: unknown) => {
          throw new Error(`Redis at ${where} does not answer: ${error instanceof Error ? error.message : String(error)}`);
        });
      },
    },
    close() {
      closing = true;
      // disconnect, not QUIT: QUIT would wait in the subscriber's queue while Redis is down.
      commands.disconnect();
      subscriber.disconnect();
    },
  };
}

import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { createApp } from './app.js';
import { createAuthenticator } from './auth/authenticate.js';
import { createOwnerVerifier, KeySetStartError, type IdentityProviderHealth } from './auth/owner.js';
import { withRateLimits } from './auth/rate-limited.js';
import { createMemoryRateLimiter, type RateLimiter } from './domain/rate-limits.js';
import { developmentSignInRefusal, StartupError, type Config } from './config.js';
import { oneLine } from './domain/errors.js';
import { createLocalNotifier, type DeviceNotifier, type NotifierDeps } from './device-channel/notifier.js';
import { attachDeviceChannel } from './device-channel/socket-server.js';
import type { Clock, Logger } from './domain/context.js';
import { createEventHub, type EventHub } from './domain/event-hub.js';
import { startStateEventSweep } from './domain/device-state.js';
import { startExpirySweep } from './domain/expiry.js';
import { startHousekeeping } from './domain/housekeeping.js';
import { startScheduler } from './domain/scheduled-actions.js';
import { databaseCheck, type DependencyCheck } from './domain/readiness.js';
import { createLiveStreams } from './domain/owner-event-stream.js';
import { startWebhookDelivery } from './domain/webhook-delivery.js';
import type { WebhookTransport } from './domain/webhook-transport.js';
import { createWebhookTransport } from './http/webhook-transport.js';
import { backfillSchemaFingerprints } from './domain/schema-fingerprints.js';
import { createLogger } from './logger.js';
import { createMetrics, type Metrics } from './metrics.js';
import type { Db } from './store/driver.js';
import { openDb } from './store/open.js';
import { answerClientErrors } from './http/client-errors.js';
import { enforceWriteDeadline } from './http/write-deadline.js';
import { createRedisEventHub } from './bus/redis-event-hub.js';
import { createRedisRateLimiter } from './bus/rate-limits.js';
import { connectRedis, type RedisConnection } from './bus/redis.js';

export interface RunningService {
  url: string;
  port: number;
  db: Db;
  events: EventHub;
  /**
   * What `GET /readyz` asks (docs/operators/probes.md "Probes"): the database, and Redis when REDIS_URL is set.
   * A check rejects, within its own bound, while its dependency does not answer.
   */
  readiness: DependencyCheck[];
  /**
   * Logs a promise rejection nothing handled, with its stack, at error level, and counts it
   * (`dfc_unhandled_rejections_total`). `src/main.ts` sends the process's unhandled
   * rejections here instead of exiting (docs/operators/security.md "Hostile input, isolation and faults").
   */
  reportUnhandledRejection(reason: unknown): void;
  /**
   * Logs an uncaught exception, with its stack, at error level, just before the process ends
   * (Node's default, which `src/main.ts` keeps): the crash is in the JSON log an operator
   * searches, not only in stderr's raw stack. The logger flushes on exit.
   */
  reportUncaughtException(error: unknown): void;
  /** Whether owner sessions can be verified now: for a readiness probe (docs/operators/identity-provider.md "Identity provider health"). */
  identityProvider(): IdentityProviderHealth;
  close(): Promise<void>;
}

export interface ServiceOptions {
  log?: Logger;
  clock?: Clock;
  /** The wake channel's notifier; in-memory unless several instances share one (docs/devices/wire-protocol.md "Wake channel"). */
  notifier?: (events: EventHub, deps: NotifierDeps) => DeviceNotifier;
  /** Shared limiter state for several instances; in-memory by default. */
  rateLimiter?: RateLimiter;
  /** How long close() lets requests in progress finish before it cuts them off (10 s). */
  shutdownGraceMs?: number;
}

/** Opens the database, builds the app and listens: what `npm start` and the tests run. */
export async function startService(config: Config, options: ServiceOptions = {}): Promise<RunningService> {
  // Before anything is opened: nothing to let go of (docs/operators/identity-provider.md).
  const refusal = developmentSignInRefusal(config);
  if (refusal) throw refusal;
  const log = options.log ?? createLogger(config.logLevel);
  const clock = options.clock ?? { now: () => Date.now() };
  const db = await openDatabase(config, log);
  // Before anything answers: grants are matched against fingerprints migration 0014 cannot compute in SQL.
  await backfillSchemaFingerprints(db);
  // With REDIS_URL every instance shares events and rate limits through Redis (docs/operators/scale-out.md "What
  // instances share"); without it nothing is attempted and the service runs in one process.
  const redis: RedisConnection | undefined = config.redisUrl ? connectRedis(config.redisUrl, { log, prefix: config.redisKeyPrefix }) : undefined;
  const sharedEvents = redis
    ? createRedisEventHub(redis, {
        onLost: () => metrics.countRedisFallback('event'),
        onError: (error) => log.error({ msg: 'event from redis not delivered', error: oneLine(error) }),
      })
    : undefined;
  const events = sharedEvents ?? createEventHub();
  const metrics = createMetrics({ db, events, storageLimits: config.capacity.storage });
  if (redis) metrics.watchRedis(redis.up);
  const closeShared = () => {
    sharedEvents?.close();
    redis?.close();
  };
  // A start that fails after this point lets go of what it opened.
  const giveUp = async () => {
    closeShared();
    await db.close();
  };
  const owners = await ownerVerifier(config, log, metrics, giveUp);
  // One limiter for the authenticator and the OAuth endpoints: a failure anywhere counts everywhere (docs/reference/rules.md "Errors and limits").
  // While Redis is down, each instance's own buckets answer (docs/operators/scale-out.md "What instances share").
  const limiter = options.rateLimiter ?? sharedRateLimiter(redis, metrics);
  const authenticator = withRateLimits(createAuthenticator({ db, owners, now: clock.now, oauthResource: `${config.publicBaseUrl}/mcp` }), {
    limiter,
    settings: config.rateLimits,
    now: clock.now,
  });
  metrics.watchIdentityProvider(() => owners.health().ok);
  // What GET /readyz asks (docs/operators/probes.md "Probes"): one entry per dependency this instance is configured with.
  const readiness: DependencyCheck[] = [databaseCheck(db), ...(redis ? [redis.readiness] : [])];
  const streams = createLiveStreams();
  // Webhook URLs go through the SSRF guard of OAuth metadata fetching, and its test-only switch (docs/owners/webhooks.md "Webhooks").
  const webhooks = createWebhookTransport({ allowLoopback: config.oauthCimdAllowLoopback, allowPrivate: config.webhookAllowPrivateHosts });
  const app = createApp({ config, db, authenticator, limiter, clock, log, events, metrics, dependencies: readiness, streams, webhooks });

  const server = await listen(app.fetch, config).catch(async (error: unknown) => {
    await giveUp();
    throw error;
  });
  const { stopSweep, stopHousekeeping, stopWebhooks } = startBackgroundWork(config, { db, events, clock, log, webhooks, metrics });
  const notifier = (options.notifier ?? createLocalNotifier)(events, {
    db,
    onError: (error) => log.warn({ msg: 'event from redis not acted on', error: oneLine(error) }),
  });
  // The wake WebSocket shares the API's port: 'upgrade' requests never reach Hono.
  const channel = attachDeviceChannel(server as Server, {
    db,
    clock,
    log,
    notifier,
    pingMs: config.wsPingMs,
    onWakeSent: (latencyMs) => metrics.observeWake(latencyMs / 1000),
  });
  metrics.countSocketsWith(() => channel.openSockets());
  answerClientErrors(server as Server, log);
  // A client that stops reading holds what its answers wrote only this long (docs/operators/security.md).
  enforceWriteDeadline(server as Server, { writeTimeoutMs: config.writeTimeoutMs, log });
  const { port } = server.address() as AddressInfo;

  return {
    url: `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`,
    port,
    db,
    events,
    readiness,
    identityProvider: () => owners.health(),
    reportUnhandledRejection(reason) {
      metrics.countUnhandledRejection();
      log.error({ msg: 'unhandled rejection', error: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason) });
    },
    reportUncaughtException(error) {
      log.error({ msg: 'uncaught exception', error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
    },
    /**
     * Graceful shutdown: stop accepting connections, close idle keep-alive ones,
     * close the wake sockets with 1001, end the owner event streams, let requests in progress finish — for at most
     * `shutdownGraceMs`, then cut what is left — and only then stop the sweep and close the
     * database, which those requests may still be writing to.
     */
    close: () =>
      closeGracefully({ server, streams, channel, notifier, stopSweep, stopHousekeeping, closeShared, stopWebhooks, db }, options.shutdownGraceMs ?? 10_000),
  };
}

/** Stops several loops as one: the sweeps and the scheduler stop together, before the database closes. */
function stopAll(...stops: (() => void)[]): () => void {
  return () => {
    for (const stop of stops) stop();
  };
}

/** The loops that run beside the requests: the expiry and state event sweeps, the scheduler, housekeeping and webhook delivery. */
function startBackgroundWork(config: Config, deps: { db: Db; events: EventHub; clock: Clock; log: Logger; webhooks: WebhookTransport; metrics: Metrics }) {
  const { db, events, clock, log, webhooks, metrics } = deps;
  return {
    stopSweep: stopAll(
      startExpirySweep({ db, events, clock, log }, config.expirySweepMs),
      startStateEventSweep({ db, events, clock, log }),
      startScheduler({ db, events, clock, log }),
    ),
    stopHousekeeping: startHousekeeping({ db, clock, log }, config.housekeepingSweepMs, {
      eventsRetentionMs: config.ownerEvents.retentionMs,
      actionsRetentionMs: config.actionsRetentionMs,
    }),
    stopWebhooks: startWebhookDelivery(
      {
        db,
        clock,
        log,
        transport: webhooks,
        observer: metrics.webhooks,
        consoleUrl: config.publicBaseUrl,
        deliveryBudget: config.capacity.storage.webhook_deliveries,
      },
      config.webhooks,
    ),
  };
}

/** The owner session verifier; a failure is a StartupError naming the variable that fixes it, after `cleanUp`. */
async function ownerVerifier(config: Config, log: Logger, metrics: Metrics, cleanUp: () => Promise<void>) {
  try {
    return await createOwnerVerifier(config, { log, onKeySetFailure: () => metrics.countKeySetFailure() });
  } catch (error) {
    await cleanUp();
    // An external key set names its own variable; the development key is written next to the database.
    throw error instanceof KeySetStartError
      ? new StartupError(error.variable, error.message, { cause: error.cause })
      : new StartupError('DATABASE_URL', `cannot create the development identity key next to the database: ${oneLine(error)}`, { cause: error });
  }
}

/** Redis-backed when there is Redis, with each instance's own buckets while it is down; else in memory. */
function sharedRateLimiter(redis: RedisConnection | undefined, metrics: Metrics): RateLimiter {
  return redis
    ? createRedisRateLimiter(redis, { fallback: createMemoryRateLimiter(), onFallback: () => metrics.countRedisFallback('rate_limit') })
    : createMemoryRateLimiter();
}

/** What a running service stops when it closes. */
interface Stoppable {
  server: ServerType;
  streams: ReturnType<typeof createLiveStreams>;
  channel: ReturnType<typeof attachDeviceChannel>;
  notifier: DeviceNotifier;
  stopSweep: () => void;
  stopHousekeeping: () => Promise<void>;
  closeShared: () => void;
  stopWebhooks: () => Promise<void>;
  db: Db;
}

async function closeGracefully(running: Stoppable, graceMs: number): Promise<void> {
  const { server, streams, channel, notifier, stopSweep, stopHousekeeping, closeShared, stopWebhooks, db } = running;
  const drained = new Promise<void>((resolve) => server.close(() => resolve()));
  // A keep-alive connection goes idle once its response is out, and would otherwise be
  // held open until the keep-alive timeout: close idle ones as they appear.
  const closeIdle = () => {
    if ('closeIdleConnections' in server) server.closeIdleConnections();
  };
  // Owner event streams never end on their own: they end now, and their clients
  // reconnect (to another instance) with Last-Event-ID (docs/reference/events.md "Owner events").
  streams.closeAll();
  closeIdle();
  const idleSweep = setInterval(closeIdle, 50);
  await channel.close();
  notifier.close();
  const cutOff = setTimeout(() => {
    if ('closeAllConnections' in server) server.closeAllConnections();
  }, graceMs);
  await drained;
  clearInterval(idleSweep);
  clearTimeout(cutOff);
  stopSweep();
  await stopHousekeeping();
  closeShared();
  await stopWebhooks();
  await db.close();
}

/** Credentials can ride in a database URL (user:pass@ or ?authToken=): neither is shown. */
export const displayDatabaseUrl = (url: string) => url.replace(/\/\/[^@/]*@/, '//').replace(/\?.*$/, '');

/** A driver's error may quote the URL it was given, credentials and all: they are cut out. */
const withoutCredentials = (text: string, authToken: string | undefined) => {
  const scrubbed = text.replace(/\/\/[^@/\s]*@/g, '//').replace(/([?&]authToken=)[^&\s]*/gi, '$1…');
  return authToken ? scrubbed.split(authToken).join('…') : scrubbed;
};

/** Opens DATABASE_URL; any failure is a StartupError naming it (docs/operators/deploy.md "Deploy"). */
async function openDatabase(config: Config, log: Logger): Promise<Db> {
  try {
    return await openDb(config.databaseUrl, config.databaseAuthToken, {
      onCheckpointerFailure: (reason) => log.warn({ msg: 'background checkpoints stopped; commits checkpoint the log themselves', error: reason }),
    });
  } catch (error) {
    const remote = !config.databaseUrl.startsWith('file:');
    const fix = remote ? 'check DATABASE_URL and DATABASE_AUTH_TOKEN' : 'check that DATABASE_URL names a file in a folder this user can write';
    throw new StartupError(
      'DATABASE_URL',
      `cannot open the database ${displayDatabaseUrl(config.databaseUrl)} (${fix}): ${withoutCredentials(oneLine(error), config.databaseAuthToken)}`,
    );
  }
}

/** What a failed listen means, by the OS's error code, and which variable fixes it. */
function listenFailure(error: NodeJS.ErrnoException, config: Config): StartupError {
  const where = `${config.host}:${config.port}`;
  switch (error.code) {
    case 'EADDRINUSE':
      return new StartupError('PORT', `port ${config.port} is already in use on ${config.host}: set PORT to a free port`, { cause: error });
    case 'EACCES':
      return new StartupError('PORT', `this user may not listen on ${where}: set PORT to 1024 or above`, { cause: error });
    case 'EADDRNOTAVAIL':
      return new StartupError('HOST', `HOST ${config.host} is not an address of this machine: set HOST to one (0.0.0.0 for all)`, { cause: error });
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new StartupError('HOST', `HOST ${config.host} does not resolve to an address: set HOST to an IP address or a resolvable name`, { cause: error });
    default:
      return new StartupError('HOST', `cannot listen on ${where} (check HOST and PORT): ${oneLine(error)}`, { cause: error });
  }
}

function listen(fetch: Parameters<typeof serve>[0]['fetch'], config: Config): Promise<ServerType> {
  return new Promise((resolve, reject) => {
    const server = serve({ fetch, port: config.port, hostname: config.host }, () => {
      server.off('error', onError);
      resolve(server);
    });
    const onError = (error: NodeJS.ErrnoException) => reject(listenFailure(error, config));
    server.once('error', onError);
  });
}

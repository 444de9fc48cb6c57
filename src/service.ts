import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { createApp } from './app.js';
import { createAuthenticator } from './auth/authenticate.js';
import { createOwnerVerifier } from './auth/owner.js';
import { withRateLimits } from './auth/rate-limited.js';
import { createMemoryRateLimiter, type RateLimiter } from './domain/rate-limits.js';
import type { Config } from './config.js';
import { createLocalNotifier, type DeviceNotifier } from './device-channel/notifier.js';
import { attachDeviceChannel } from './device-channel/socket-server.js';
import type { Clock, Logger } from './domain/context.js';
import { createEventHub, type EventHub } from './domain/events.js';
import { startExpirySweep } from './domain/expiry.js';
import { startHousekeeping } from './domain/housekeeping.js';
import { backfillSchemaFingerprints } from './domain/schema-fingerprints.js';
import { createLogger } from './logger.js';
import { createMetrics } from './metrics.js';
import type { Db } from './store/driver.js';
import { openDb } from './store/open.js';
import { answerClientErrors } from './http/client-errors.js';

export interface RunningService {
  url: string;
  port: number;
  db: Db;
  events: EventHub;
  /**
   * Logs a promise rejection nothing handled, with its stack, at error level, and counts it
   * (`dfc_unhandled_rejections_total`). `src/main.ts` sends the process's unhandled
   * rejections here instead of exiting (README "Hostile input, isolation and faults").
   */
  reportUnhandledRejection(reason: unknown): void;
  close(): Promise<void>;
}

export interface ServiceOptions {
  log?: Logger;
  clock?: Clock;
  /** The wake channel's notifier; in-memory unless several instances share one (README "Wake channel"). */
  notifier?: (events: EventHub) => DeviceNotifier;
  /** Shared limiter state for several instances; in-memory by default. */
  rateLimiter?: RateLimiter;
  /** How long close() lets requests in progress finish before it cuts them off (10 s). */
  shutdownGraceMs?: number;
}

/** Opens the database, builds the app and listens: what `npm start` and the tests run. */
export async function startService(config: Config, options: ServiceOptions = {}): Promise<RunningService> {
  const log = options.log ?? createLogger(config.logLevel);
  const clock = options.clock ?? { now: () => Date.now() };
  const db = await openDb(config.databaseUrl, config.databaseAuthToken);
  // Before anything answers: grants are matched against fingerprints migration 0014 cannot compute in SQL.
  await backfillSchemaFingerprints(db);
  const owners = await createOwnerVerifier(config);
  // One limiter for the authenticator and the OAuth endpoints: a failure anywhere counts everywhere (docs/rules.md "Errors and limits").
  const limiter = options.rateLimiter ?? createMemoryRateLimiter();
  const authenticator = withRateLimits(createAuthenticator({ db, owners, now: clock.now, oauthResource: `${config.publicBaseUrl}/mcp` }), {
    limiter,
    settings: config.rateLimits,
    now: clock.now,
  });
  const events = createEventHub();
  const metrics = createMetrics({ db, events });
  const app = createApp({ config, db, authenticator, limiter, clock, log, events, metrics });
  const stopSweep = startExpirySweep({ db, events, clock, log }, config.expirySweepMs);
  const stopHousekeeping = startHousekeeping({ db, clock, log }, config.housekeepingSweepMs);

  const server: ServerType = await new Promise((resolve) => {
    const s = serve({ fetch: app.fetch, port: config.port, hostname: config.host }, () => resolve(s));
  });
  const notifier = (options.notifier ?? createLocalNotifier)(events);
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
  const { port } = server.address() as AddressInfo;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;

  return {
    url: `http://${host}:${port}`,
    port,
    db,
    events,
    reportUnhandledRejection(reason) {
      metrics.countUnhandledRejection();
      log.error({ msg: 'unhandled rejection', error: reason instanceof Error ? (reason.stack ?? reason.message) : String(reason) });
    },
    /**
     * Graceful shutdown (issue 7): stop accepting connections, close idle keep-alive ones,
     * close the wake sockets with 1001, let requests in progress finish — for at most
     * `shutdownGraceMs`, then cut what is left — and only then stop the sweep and close the
     * database, which those requests may still be writing to.
     */
    async close() {
      const drained = new Promise<void>((resolve) => server.close(() => resolve()));
      // A keep-alive connection goes idle once its response is out, and would otherwise be
      // held open until the keep-alive timeout: close idle ones as they appear.
      const closeIdle = () => {
        if ('closeIdleConnections' in server) server.closeIdleConnections();
      };
      closeIdle();
      const idleSweep = setInterval(closeIdle, 50);
      await channel.close();
      notifier.close();
      const cutOff = setTimeout(() => {
        if ('closeAllConnections' in server) server.closeAllConnections();
      }, options.shutdownGraceMs ?? 10_000);
      await drained;
      clearInterval(idleSweep);
      clearTimeout(cutOff);
      stopSweep();
      await stopHousekeeping();
      await db.close();
    },
  };
}

import { Hono } from 'hono';
import { requestId } from 'hono/request-id';
import type { Authenticator } from './auth/authenticate.js';
import type { Config } from './config.js';
import type { Clock, Logger, ServiceSettings } from './domain/context.js';
import { DomainError } from './domain/errors.js';
import type { EventHub } from './domain/events.js';
import type { RateLimiter } from './domain/rate-limits.js';
import { createOAuthApp } from './oauth/app.js';
import { mountRoutes, peerAddress, type RestEnv } from './rest/app.js';
import { mountDocs } from './rest/docs.js';
import { mountMcp } from './mcp/handler.js';
import { mountMetrics, type Metrics } from './metrics.js';
import { toHttpError } from './rest/errors.js';
import { routes } from './rest/routes.js';
import type { Db } from './store/driver.js';

export interface AppDeps {
  config: Config;
  db: Db;
  authenticator: Authenticator;
  /** The authenticator's limiter: the OAuth endpoints draw from the same per-address buckets. */
  limiter: RateLimiter;
  clock: Clock;
  log: Logger;
  events: EventHub;
  metrics: Metrics;
}

export const SERVICE_NAME = 'dfc';
/** The REST contract's version (service-api.md "Versioning"). */
export const API_VERSION = '1.0.0';

/** The whole HTTP surface on one Hono app: /healthz, /v1 (and later /mcp, OAuth, /.well-known). */
export function createApp(deps: AppDeps): Hono<RestEnv> {
  const { config, db, authenticator, limiter, clock, log, events, metrics } = deps;
  const settings: ServiceSettings = {
    serviceName: SERVICE_NAME,
    commit: config.commit,
    authConfigured: config.owner.mode === 'external',
    deviceControlsEnabled: config.deviceControlsEnabled,
    publicBaseUrl: config.publicBaseUrl,
    capacity: config.capacity,
  };
  const app = new Hono<RestEnv>();

  app.use('*', requestId());
  app.use('*', async (c, next) => {
    const started = performance.now();
    c.set('clientAddress', peerAddress(c, config.trustProxyHops));
    c.set('context', (credential) => ({ credential, requestId: c.get('requestId'), db, clock, log, settings, events }));
    await next();
    const seconds = (performance.now() - started) / 1000;
    metrics.observeRequest(c.req.method, c.req.routePath, c.res.status, seconds);
    log.info({
      msg: 'request',
      requestId: c.get('requestId'),
      method: c.req.method,
      route: c.req.routePath,
      status: c.res.status,
      durationMs: Math.round(seconds * 100_000) / 100,
      principalKind: c.get('principalKind') ?? null,
    });
  });

  mountRoutes(app, routes, authenticator);
  app.route('/', createOAuthApp({ config, db, authenticator, limiter, clock, log }));
  mountDocs(app, routes, { version: API_VERSION, serverUrl: config.publicBaseUrl });
  mountMcp(app, { config, authenticator, log, metrics, version: API_VERSION });
  mountMetrics(app, metrics, config.metricsToken);

  app.notFound((c) => {
    const { status, body } = toHttpError(new DomainError('not_found', `No route for ${c.req.method} ${c.req.path}.`), c.get('requestId'));
    return c.json(body, status);
  });
  app.onError((error, c) => {
    const mapped = toHttpError(error, c.get('requestId'));
    if (mapped.internal) {
      log.error({ msg: 'internal error', requestId: c.get('requestId'), route: c.req.routePath, error: error.stack ?? String(error) });
    }
    return c.json(mapped.body, mapped.status, mapped.headers);
  });
  return app;
}

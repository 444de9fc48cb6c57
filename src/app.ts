import { Hono } from 'hono';
import type { LiveStreams, ServiceSettings } from './domain/context.js';
import { createArgumentSchemas } from './domain/argument-schemas.js';
import type { EventHub } from './domain/event-hub.js';
import type { DependencyCheck } from './domain/readiness.js';
import { mountConsole } from './console/app.js';
import type { WebhookTransport } from './domain/webhook-transport.js';
import { createOAuthApp, type OAuthAppDeps } from './oauth/app.js';
import { mountFrontDoor } from './http/front-door.js';
import { observe } from './http/observe.js';
import { requestBaseUrl } from './http/base-url.js';
import type { HttpEnv } from './http/request.js';
import { mountRoutes } from './rest/app.js';
import { allowCrossOrigin } from './rest/cors.js';
import { mountDocs } from './rest/docs.js';
import { mountMcp } from './mcp/handler.js';
import { mountMetrics, type Metrics } from './metrics.js';
import { routes } from './rest/routes.js';

/** What the OAuth sub-app needs (the same limiter as the authenticator), plus events and metrics. */
export interface AppDeps extends OAuthAppDeps {
  events: EventHub;
  metrics: Metrics;
  /** What GET /readyz asks (docs/operators/probes.md "Probes"), built in src/service.ts. */
  dependencies: readonly DependencyCheck[];
  /** The owner event streams, which the service ends on shutdown. */
  streams: LiveStreams;
  webhooks: WebhookTransport;
}

export const SERVICE_NAME = 'dfc';
/** The REST contract's version (docs/reference/rules.md "Versioning"). */
export const API_VERSION = '1.0.0';

/** The whole HTTP surface on one Hono app: /healthz, /v1 (and later /mcp, OAuth, /.well-known). */
export function createApp(deps: AppDeps): Hono<HttpEnv> {
  const { config, db, authenticator, limiter, clock, log, events, metrics, dependencies, streams, webhooks } = deps;
  const settings: ServiceSettings = {
    serviceName: SERVICE_NAME,
    commit: config.commit,
    authConfigured: config.owner.mode === 'external',
    deviceControlsEnabled: config.deviceControlsEnabled,
    publicBaseUrl: config.publicBaseUrl,
    capacity: config.capacity,
    dependencies,
    ownerEvents: config.ownerEvents,
  };
  // One cache of compiled device schemas per service, not per process (docs/reference/rules.md "Running").
  const schemas = createArgumentSchemas();
  const app = new Hono<HttpEnv>();
  observe(app, {
    trustProxyHops: config.trustProxyHops,
    log,
    observeRequest: (method, route, status, seconds) => metrics.observeRequest(method, route, status, seconds),
    context: (credential, surface, requestId) => ({ credential, surface, requestId, db, clock, log, settings, events, schemas, streams, webhooks }),
    resourceMetadataUrl: (c) => `${requestBaseUrl(c, config)}/.well-known/oauth-protected-resource`,
  });

  allowCrossOrigin(app, config.corsAllowedOrigins);
  mountFrontDoor(app);
  mountRoutes(app, routes, authenticator);
  app.route('/', createOAuthApp({ config, db, authenticator, limiter, clock, log }));
  mountConsole(app, { config, db, authenticator, limiter, clock, log });
  mountDocs(app, routes, {
    version: API_VERSION,
    publicBaseUrl: config.publicBaseUrl,
    publicBaseUrlSet: config.publicBaseUrlSet,
    trustProxyHops: config.trustProxyHops,
  });
  mountMcp(app, { config, authenticator, limiter, now: clock.now, log, events, metrics, version: API_VERSION });
  mountMetrics(app, metrics, config.metricsToken);

  return app;
}

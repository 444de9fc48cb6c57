import { timingSafeEqual } from 'node:crypto';
import type { Hono } from 'hono';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import { ACTION_STATUSES } from './domain/action-states.js';
import type { EventHub } from './domain/event-hub.js';
import type { AttemptOutcome, WebhookDeliveryObserver } from './domain/webhook-delivery.js';
import { DomainError } from './domain/errors.js';
import { bearerToken, type HttpEnv } from './http/request.js';
import { countAllQueued } from './store/metrics.js';
import { STORAGE_BUDGETS, topUsage, totalUsage, type StorageLimits } from './store/usage.js';
import type { Db } from './store/driver.js';

export interface Metrics {
  registry: Registry;
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /**
   * A POST /mcp message that passed the gate, by JSON-RPC method and by what answered it:
   * `direct` (a plain device tool call), `cache` (the cached tools/list) or `sdk`.
   */
  observeMcp(method: string, answeredBy: 'direct' | 'cache' | 'sdk'): void;
  /** Queue → wake frame written, in seconds. */
  observeWake(seconds: number): void;
  /** Where the open device socket count comes from (the wake channel). */
  countSocketsWith(count: () => number): void;
  /** A promise rejected with nobody to handle it: a bug the process survived (src/main.ts). */
  countUnhandledRejection(): void;
  /** A failed fetch of OWNER_JWKS_URL's key set. */
  countKeySetFailure(): void;
  /** Where `dfc_identity_provider_up` comes from: whether owner sessions can be verified now. */
  watchIdentityProvider(ok: () => boolean): void;
  /**
   * With REDIS_URL only (docs/operators/scale-out.md "What instances share"): exports `dfc_redis_up` from `up` and
   * `dfc_redis_fallbacks_total`. Without Redis neither series exists, so no alert fires for a
   * dependency the service does not have.
   */
  watchRedis(up: () => boolean): void;
  /** Work done without Redis while it was down: an event not sent to the other instances, a rate limit taken from this instance's buckets. */
  countRedisFallback(what: RedisFallback): void;
  /** Webhook attempts by outcome, and webhooks disabled after failing too long (docs/owners/webhooks.md). */
  webhooks: WebhookDeliveryObserver;
}

export type RedisFallback = 'event' | 'rate_limit';
const REDIS_FALLBACKS: readonly RedisFallback[] = ['event', 'rate_limit'];
const ATTEMPT_OUTCOMES: readonly AttemptOutcome[] = ['delivered', 'pending', 'failed'];

/**
 * Prometheus metrics on a registry of this service's own (not prom-client's global one),
 * so several services in one process — the tests — do not share counters.
 */
/** Workspaces named per storage budget in `dfc_workspace_storage_used`: the series stay bounded however many workspaces there are. */
export const STORAGE_TOP_WORKSPACES = 10;

export function createMetrics(deps: { db: Db; events: EventHub; storageLimits: StorageLimits }): Metrics {
  const registry = new Registry();
  collectDefaultMetrics({ register: registry, prefix: 'dfc_' });
  const observeRequest = httpMetrics(registry);
  countActionChanges(registry, deps.events);
  const mcp = new Counter({
    name: 'dfc_mcp_messages_total',
    help: 'MCP messages that passed the gate, by method and by what answered them (direct, cache or sdk).',
    labelNames: ['method', 'answered_by'],
    registers: [registry],
  });
  const wake = new Histogram({
    name: 'dfc_wake_latency_seconds',
    help: 'Time from an action being queued to its wake frame being written to a device socket.',
    buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
    registers: [registry],
  });
  let socketCount: () => number = () => 0;
  new Gauge({
    name: 'dfc_device_sockets_open',
    help: 'Open device wake WebSockets.',
    registers: [registry],
    collect() {
      this.set(socketCount());
    },
  });
  registerStorageGauges(registry, deps);
  const unhandled = new Counter({
    name: 'dfc_unhandled_rejections_total',
    help: 'Promise rejections nothing handled. Each one is a bug: the process logged it and kept serving.',
    registers: [registry],
  });
  const keySetFailures = new Counter({
    name: 'dfc_owner_jwks_fetch_failures_total',
    help: 'Failed fetches of the owner key set (OWNER_JWKS_URL). While they fail, owner requests that need a fetch answer 503.',
    registers: [registry],
  });
  const webhooks = webhookCounters(registry);
  let identityProviderOk: () => boolean = () => true;
  new Gauge({
    name: 'dfc_identity_provider_up',
    help: '1 while owner sessions can be verified (the last key set fetch, if any, succeeded), else 0.',
    registers: [registry],
    collect() {
      this.set(identityProviderOk() ? 1 : 0);
    },
  });
  let redisFallbacks: Counter<'what'> | undefined;
  return {
    registry,
    observeRequest,
    observeMcp: (method, answeredBy) => mcp.inc({ method, answered_by: answeredBy }),
    observeWake: (seconds) => wake.observe(seconds),
    countSocketsWith(count) {
      socketCount = count;
    },
    countUnhandledRejection: () => unhandled.inc(),
    countKeySetFailure: () => keySetFailures.inc(),
    watchIdentityProvider(ok) {
      identityProviderOk = ok;
    },
    watchRedis(up) {
      redisFallbacks = redisMetrics(registry, up);
    },
    countRedisFallback: (what) => redisFallbacks?.inc({ what }),
    webhooks,
  };
}

function sameSecret(given: string, expected: string): boolean {
  const a = Buffer.from(given);
  const b = Buffer.from(expected);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** GET /metrics, behind METRICS_TOKEN; without a configured token the endpoint is off (503). */
export function mountMetrics(app: Hono<HttpEnv>, metrics: Metrics, token: string | undefined): void {
  app.get('/metrics', async (c) => {
    if (!token) throw new DomainError('not_configured', 'Metrics are off: set METRICS_TOKEN to enable /metrics.');
    const given = bearerToken(c.req.header('authorization'));
    if (!given || !sameSecret(given, token)) throw new DomainError('unauthorized', 'The metrics token is missing or wrong.');
    return c.body(await metrics.registry.metrics(), 200, { 'content-type': metrics.registry.contentType });
  });
}

/** The queue depth and the storage budgets, read from the database at scrape time. */
function registerStorageGauges(registry: Registry, deps: { db: Db; storageLimits: StorageLimits }): void {
  new Gauge({
    name: 'dfc_actions_queued',
    help: 'Actions queued and not yet fetched by a device (queue depth).',
    registers: [registry],
    async collect() {
      this.set(await countAllQueued(deps.db));
    },
  });
  // Storage budgets (docs/operators/budgets.md), read from the usage counters at scrape time: one small
  // query per budget. A series per workspace would grow with the tenants, so only the
  // STORAGE_TOP_WORKSPACES heaviest users of each budget are named; the total covers the rest.
  new Gauge({
    name: 'dfc_workspace_storage_used',
    help: `What a workspace stores against each storage budget, for the ${STORAGE_TOP_WORKSPACES} workspaces using most of it.`,
    labelNames: ['workspace', 'budget'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const budget of STORAGE_BUDGETS) {
        for (const { workspaceId, used } of await topUsage(deps.db, budget, STORAGE_TOP_WORKSPACES)) this.set({ workspace: workspaceId, budget }, used);
      }
    },
  });
  new Gauge({
    name: 'dfc_storage_used',
    help: 'What all workspaces store together, by storage budget.',
    labelNames: ['budget'],
    registers: [registry],
    async collect() {
      const total = await totalUsage(deps.db);
      for (const budget of STORAGE_BUDGETS) this.set({ budget }, total[budget]);
    },
  });
  const limits = new Gauge({
    name: 'dfc_workspace_storage_limit',
    help: 'Each storage budget: what one workspace may store (WORKSPACE_MAX_*).',
    labelNames: ['budget'],
    registers: [registry],
  });
  for (const budget of STORAGE_BUDGETS) limits.set({ budget }, deps.storageLimits[budget]);
}

function webhookCounters(registry: Registry): Metrics['webhooks'] {
  const webhookAttempts = new Counter({
    name: 'dfc_webhook_attempts_total',
    help: 'Webhook delivery attempts this instance made, by outcome: delivered, pending (failed, to be retried) or failed (for good).',
    labelNames: ['outcome'],
    registers: [registry],
  });
  for (const outcome of ATTEMPT_OUTCOMES) webhookAttempts.inc({ outcome }, 0);
  const webhooksDisabled = new Counter({
    name: 'dfc_webhooks_disabled_total',
    help: 'Webhooks this instance disabled because their endpoint kept failing; each waits for its owner to enable it.',
    registers: [registry],
  });
  return {
    attempted: (outcome) => webhookAttempts.inc({ outcome }),
    disabled: () => webhooksDisabled.inc(),
  };
}

/** Registered only on an instance with REDIS_URL: without one there is no Redis to be up or down. */
function redisMetrics(registry: Registry, up: () => boolean): Counter<'what'> {
  new Gauge({
    name: 'dfc_redis_up',
    help: '1 while this instance is connected to Redis (REDIS_URL), else 0: events then reach only this instance and rate limits are per instance.',
    registers: [registry],
    collect() {
      this.set(up() ? 1 : 0);
    },
  });
  const fallbacks = new Counter({
    name: 'dfc_redis_fallbacks_total',
    help: 'Work done without Redis while it was down, by what: an event not sent to the other instances, a rate limit taken from this instance.',
    labelNames: ['what'],
    registers: [registry],
  });
  for (const what of REDIS_FALLBACKS) fallbacks.inc({ what }, 0);
  return fallbacks;
}

/** Action state changes by the status entered. */
function countActionChanges(registry: Registry, events: EventHub): void {
  const actions = new Counter({
    name: 'dfc_actions_total',
    help: 'Action state changes by the status entered.',
    labelNames: ['status'],
    registers: [registry],
  });
  // Every status is exported from the start, at 0: a series that first appears at 1 hides
  // that first change from rate() and increase().
  for (const status of ACTION_STATUSES) actions.inc({ status }, 0);
  // Only this instance's own changes: with a shared bus every instance hears every change,
  // and a sum over instances must count each once.
  events.subscribe((event, origin) => {
    if (event.type === 'action' && origin === 'this-instance') actions.inc({ status: event.action.status });
  });
}

/** HTTP requests by method, route pattern and status, and their durations. */
function httpMetrics(registry: Registry): Metrics['observeRequest'] {
  const requests = new Counter({
    name: 'dfc_http_requests_total',
    help: 'HTTP requests by method, route pattern and status.',
    labelNames: ['method', 'route', 'status'],
    registers: [registry],
  });
  const durations = new Histogram({
    name: 'dfc_http_request_duration_seconds',
    help: 'HTTP request duration by method and route pattern.',
    labelNames: ['method', 'route'],
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 10],
    registers: [registry],
  });
  return (method, route, status, seconds) => {
    requests.inc({ method, route, status: String(status) });
    durations.observe({ method, route }, seconds);
  };
}

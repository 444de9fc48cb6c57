/* eslint-disable max-lines -- the one schema of every setting: each variable, its default and its meaning side by side, the source of docs/operators/configuration.md (npm run docs:generate) */
import { isIP } from 'node:net';
import path from 'node:path';
import { z } from 'zod';
import type { CapacityLimits, OwnerEventSettings } from './domain/context.js';
import type { RateLimitSettings } from './domain/rate-limits.js';
import type { WebhookDeliverySettings } from './domain/webhook-delivery.js';
import type { PrivateHostAllowance } from './domain/webhook-transport.js';
import type { LogLevel } from './domain/context.js';

/**
 * Every setting the service reads, all optional (docs/reference/rules.md "Running"). Parsed once by the entry
 * points (src/main.ts, src/cli/*) from the environment and injected everywhere else.
 */
const booleanString = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1');

const positiveInt = z.coerce.number().int().positive();
const positiveNumber = z.coerce.number().positive();

/** LOG_LEVEL values, most verbose first (docs/operators/logs-and-metrics.md "Logs"). */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const satisfies readonly LogLevel[];

export const configSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8787).describe('TCP port (0 picks a free one).'),
    HOST: z.string().min(1).default('127.0.0.1').describe('Address to listen on (`0.0.0.0` to serve beyond this machine).'),
    DATABASE_URL: z
      .string()
      .regex(/^(file:|libsql:\/\/|wss?:\/\/|https?:\/\/)/, 'must start with file:, libsql://, ws://, wss://, http:// or https://')
      .default('file:./data/service.db')
      .describe(
        '`file:` for the embedded database; `libsql://`, `wss://`, `ws://` (Hrana over a WebSocket: about 4× faster per statement) or `https://`, `http://` (Hrana over HTTP, for a proxy that does not pass WebSocket upgrades) for a libSQL server (see below).',
      ),
    DATABASE_AUTH_TOKEN: z.string().min(1).optional().describe('Token for a remote libSQL server (Turso, sqld with auth).'),
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\/[^\s]+$/, 'must start with redis:// or rediss:// (TLS), e.g. rediss://:password@host:6380')
      .optional()
      .describe(
        'Redis or Valkey shared by several instances: `redis://host:6379`, or `rediss://:password@host:6380` (TLS, a password, optionally `user:password@`) for a managed one. Every instance then shares events (wake frames, recalls, revocations, MCP waits and cancellations) and rate limits through it (see [What instances share](scale-out.md#what-instances-share)). Unset: one process, nothing shared, no connection attempted.',
      ),
    REDIS_KEY_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9:_.-]{1,64}$/, 'must be 1 to 64 letters, digits or : _ . -, e.g. dfc-staging:')
      .default('dfc:')
      .describe(
        "What this deployment's Redis keys and pub/sub channel start with (1 to 64 of `A-Za-z0-9:_.-`), which its Redis ACL user is limited to. Not a boundary between deployments: give each its own Redis ([docs/operators/scale-out-security.md](scale-out-security.md)). Every instance of one deployment needs the same.",
      ),
    PUBLIC_BASE_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe(
        "The service's public address: OAuth metadata and the audience of OAuth access tokens (`${PUBLIC_BASE_URL}/mcp`). When set, also the server `/openapi.json` names; unset, the document names the origin each request reached (see [API reference](../reference/api.md#api-reference)). Unset: the loopback alias a request came to (`127.0.0.1`, `localhost` or `[::1]` on the service's port) in metadata, challenges and console commands, the aliases being one resource (a token obtained at one is valid at the others); any other `Host` gets `http://localhost:${PORT}`, as do messages sent outside a request.",
      ),
    CORS_ALLOWED_ORIGINS: z
      .string()
      .regex(
        /^\s*https?:\/\/[A-Za-z0-9.:[\]-]+\s*(,\s*https?:\/\/[A-Za-z0-9.:[\]-]+\s*)*$/,
        'must be a comma-separated list of origins (http[s]://host[:port])',
      )
      .optional()
      .describe(
        'Browser origins (comma-separated `http[s]://host[:port]`, exact) allowed to call the REST API (`/v1/*`, `/healthz`) and `/openapi.json` cross-origin. Unset: no CORS headers at all. `/docs` needs none (it calls its own origin); `/mcp` and `/oauth/*` never send any.',
      ),
    OWNER_JWKS_URL: z
      .url({ protocol: /^https?$/ })
      .optional()
      .describe('External identity provider: a remote JWKS (`http(s)://`). Set this or `OWNER_JWKS_FILE`, not both.'),
    OWNER_JWKS_FILE: z.string().min(1).optional().describe('External identity provider: a local JWKS document.'),
    OWNER_ISSUER: z
      .string()
      .min(1)
      .optional()
      .describe('Required `iss` of owner sessions; required when a JWKS is set. Unset: `urn:dfc:development-identity-provider` in development.'),
    OWNER_AUDIENCE: z
      .string()
      .min(1)
      .optional()
      .describe('Required `aud` of owner sessions; required when a JWKS is set. Unset: `urn:dfc:owner` in development.'),
    OWNER_WORKSPACE_CLAIM: z.string().min(1).default('sub').describe("The claim that names the owner's workspace (first use creates it)."),
    OWNER_OIDC_CLIENT_ID: z
      .string()
      .min(1)
      .optional()
      .describe(
        "The [owner console](../owners/console.md#owner-console)'s OpenID Connect client at the external identity provider (`OWNER_ISSUER`, found by discovery; needs `OWNER_JWKS_URL` or `OWNER_JWKS_FILE`). Register `${PUBLIC_BASE_URL}/console/oidc/callback` as its redirect URI. Unset: the console offers the paste-a-session sign-in only.",
      ),
    OWNER_OIDC_CLIENT_SECRET: z.string().min(1).optional().describe("That client's secret (`client_secret_basic`); unset: a public client (PKCE only)."),
    NODE_ENV: z
      .string()
      .optional()
      .describe(
        '`production` (the container image sets it): without an external identity provider the service refuses to start unless `DEVELOPMENT_SIGN_IN=code` (see [the development identity provider](identity-provider.md#where-the-development-sign-in-is-allowed)).',
      ),
    DEVELOPMENT_SIGN_IN: z
      .enum(['code'])
      .optional()
      .describe(
        '`code`: the development identity provider\'s console sign-in asks for a one-time code the log prints (a `warn` line, `msg: "development sign-in code"`), single use, a new one printed after each sign-in. Required to start the development provider with `NODE_ENV=production` or a `HOST` that is not loopback; unset, on loopback outside production, the sign-in needs no code. Only without `OWNER_JWKS_*` (see [the development identity provider](identity-provider.md#where-the-development-sign-in-is-allowed)).',
      ),
    DEVICE_CONTROLS_ENABLED: booleanString
      .default(true)
      .describe(
        '`false` (or `0`) is the physical-safety kill switch: every request that would queue an action answers 503 `device_controls_disabled`, and `next` hands devices nothing; reads keep working.',
      ),
    SERVICE_COMMIT: z.string().min(1).optional().describe('Reported as `commit` by `GET /healthz`.'),
    EXPIRY_SWEEP_SECONDS: positiveInt.default(5).describe('How often queued/received actions past their deadline are marked `expired`.'),
    HOUSEKEEPING_SWEEP_SECONDS: positiveInt
      .default(600)
      .describe(
        'How often rows past their purpose are deleted in small batches: OAuth codes (1 h after expiry), expired OAuth tokens (revoked and rotated ones included), expired consent sessions, used or expired wake tickets, idempotency records older than 24 h, OAuth clients nobody approved (a day after registering, or after their metadata document went stale), webhook deliveries 7 days after they finished (and a revoked webhook with them), finished actions after `ACTIONS_RETENTION_DAYS`.',
      ),
    LOG_LEVEL: z
      .enum(LOG_LEVELS)
      .default('info')
      .describe(
        '`debug`, `info`, `warn`, `error` or `silent`: the least severe line written (see [Logs](logs-and-metrics.md#logs)). `debug` also prints the stack of a failed start.',
      ),
    OAUTH_CIMD_ALLOW_LOOPBACK: booleanString
      .default(false)
      .describe(
        'Tests only: lets OAuth client metadata documents (CIMD) be fetched from loopback addresses, and webhooks be registered and sent to loopback addresses (over http too). Never set it in production.',
      ),
    MCP_ALLOWED_HOSTS: z
      .string()
      .regex(/^\s*[A-Za-z0-9.:[\]-]+\s*(,\s*[A-Za-z0-9.:[\]-]+\s*)*$/, 'must be a comma-separated list of host or host:port values')
      .optional()
      .describe(
        "Extra `Host` values (comma-separated host or host:port) that `/mcp` accepts besides `PUBLIC_BASE_URL`'s and loopback (DNS-rebinding defence).",
      ),
    MCP_CONFIRMATIONS_PER_CONNECTION: positiveInt
      .default(10)
      .describe(
        '2025-era user-confirmation prompts one agent connection may have waiting at once on one instance; past it the call is the tool error `capacity_exceeded` and nothing is asked (see [docs/agents/confirmation.md](../agents/confirmation.md)).',
      ),
    MCP_CONFIRMATIONS_PER_WORKSPACE: positiveInt
      .default(100)
      .describe('The same, for all connections of one workspace together: one tenant cannot take every place of an instance.'),
    MCP_CONFIRMATIONS_PER_INSTANCE: positiveInt.default(1000).describe('The same, for all connections together on one instance.'),
    MCP_CONFIRMATION_WAIT_SECONDS: positiveInt
      .max(300)
      .default(300)
      .describe('How long a 2025-era prompt waits for its answer before the call ends unconfirmed and its memory is released (1 to 300).'),
    MCP_LISTEN_PER_CONNECTION: positiveInt
      .default(10)
      .describe(
        'Open MCP `subscriptions/listen` streams one agent connection may hold on one instance; past it the listen request is refused with 429 `capacity_exceeded`, `Retry-After: 5` (see [docs/agents/tasks.md](../agents/tasks.md#limits)).',
      ),
    MCP_LISTEN_PER_WORKSPACE: positiveInt
      .default(100)
      .describe('The same, for all agent connections of one workspace together (429 `capacity_exceeded` beyond).'),
    MCP_LISTEN_PER_INSTANCE: positiveInt
      .default(1000)
      .describe('Open `subscriptions/listen` streams on one instance, all workspaces together (503 `unavailable`, `Retry-After: 5`, beyond).'),
    MCP_LISTEN_MAX_SECONDS: positiveInt
      .default(3600)
      .describe("How long one `subscriptions/listen` stream lasts at most: it then ends with the listen request's result, and the client listens again."),
    MCP_LISTEN_MAX_BUFFERED_KIB: positiveInt
      .default(256)
      .describe(
        'The most bytes (KiB) of one `subscriptions/listen` stream this service holds for a client that does not read them: the stream writes its next notification only once the client has taken the previous ones, and one whose earlier frames still wait past this bound when it writes again (keepalives piling up) is cut, its connection closed (see [Slow and silent clients](security.md#slow-and-silent-clients)).',
      ),
    MCP_LISTEN_MAX_ANSWER_KIB: positiveInt
      .default(1024)
      .describe(
        "The most bytes (KiB) of task notifications one `subscriptions/listen` stream tells. A finished task's notification carries its result: one that does not fit is left out of the acknowledgement (read it with `tasks/get`), and a stream that would pass the bound later ends with the listen request's result, and the client listens again.",
      ),
    WRITE_TIMEOUT_SECONDS: positiveNumber
      .default(30)
      .describe(
        "How long any answer, stream or not, may wait for its client to take bytes already written: a connection whose unsent bytes make no progress for this long is closed, and whatever its answer held (a stream's place among the limits included) is let go (see [Slow and silent clients](security.md#slow-and-silent-clients)). Fractions allowed.",
      ),
    TRUST_PROXY_HOPS: z.coerce
      .number()
      .int()
      .min(0)
      .max(10)
      .default(0)
      .describe(
        "How many reverse proxies in front of the service append to `X-Forwarded-For`. `0`: the per-address limits count the socket's peer and the header is ignored. `N`: they count the address the outermost trusted proxy saw (the entry `N` from the right); entries further left are written by clients and not believed. With `N` ≥ 1, `/openapi.json` also believes `X-Forwarded-Host` and `X-Forwarded-Proto` for the server it names.",
      ),
    METRICS_TOKEN: z
      .string()
      .min(16, 'must be at least 16 characters')
      .optional()
      .describe('Bearer token (16+ characters) for `GET /metrics`; metrics are off without it.'),
    WS_PING_SECONDS: positiveInt.default(15).describe('Ping interval on device wake sockets; a peer silent for two pings is dropped.'),
    EVENTS_RETENTION_HOURS: positiveNumber
      .default(24)
      .describe(
        "The replay window of the owner's event stream: housekeeping deletes older events (in batches, every `HOUSEKEEPING_SWEEP_SECONDS`); a `Last-Event-ID` from before it gets a `reset` event (see [Owner events](../reference/events.md#owner-events)). Fractions allowed.",
      ),
    EVENTS_HEARTBEAT_SECONDS: positiveNumber
      .default(15)
      .describe('A `: heartbeat` comment on an owner event stream after this long without an event. Fractions allowed.'),
    EVENTS_POLL_SECONDS: positiveNumber
      .default(2)
      .describe(
        'An open owner event stream reads the journal at least this often even when no service event announced a change (changes made on another instance without a shared bus). Fractions allowed.',
      ),
    EVENTS_MAX_STREAMS_PER_WORKSPACE: positiveInt
      .default(10)
      .describe('Open owner event streams per workspace on one instance (429 `capacity_exceeded`, `Retry-After: 5`, beyond).'),
    EVENTS_MAX_STREAMS: positiveInt
      .default(1000)
      .describe(
        'Open owner event streams on one instance, all workspaces together (503 `unavailable`, `Retry-After: 5`, beyond; see [docs/reference/event-streams.md](../reference/event-streams.md)).',
      ),
    RATE_LIMIT_AGENT_PER_SECOND: positiveNumber.default(20).describe('Requests per second per agent credential.'),
    RATE_LIMIT_AGENT_BURST: positiveInt.default(40).describe('Burst per agent credential.'),
    RATE_LIMIT_DEVICE_PER_SECOND: positiveNumber.default(10).describe('Requests per second per device credential.'),
    RATE_LIMIT_DEVICE_BURST: positiveInt.default(20).describe('Burst per device credential.'),
    RATE_LIMIT_OWNER_PER_SECOND: positiveNumber
      .default(20)
      .describe('Requests per second per owner (the `sub` in its workspace, whichever session they present: signing in again buys no fresh bucket).'),
    RATE_LIMIT_OWNER_BURST: positiveInt.default(40).describe('Burst per owner.'),
    AUTH_FAILURES_PER_MINUTE: positiveInt
      .default(10)
      .describe(
        'Failed authentications per minute per client address before 429: bearer tokens on `/v1` and `/mcp`, owner sign-ins at `/oauth/sign-in` and `/oauth/session`, and failed client authentication or `invalid_grant` at `/oauth/token` and `/oauth/revoke` all draw from one bucket per address. The limit throttles failures, not people: from an address over its budget a valid bearer credential is still served, and only further failures answer 429 (see [Hostile input](security.md#hostile-input-isolation-and-faults)).',
      ),
    OAUTH_REGISTRATIONS_PER_HOUR: positiveInt
      .default(20)
      .describe('Dynamic client registrations (`POST /oauth/register`) per hour per client address before 429.'),
    WORKSPACE_MAX_DEVICES: positiveInt.default(1000).describe('Devices per workspace (429 `capacity_exceeded` beyond).'),
    WORKSPACE_MAX_QUEUED_ACTIONS: positiveInt
      .default(10_000)
      .describe("Queued actions per workspace, actions awaiting the owner's approval included (an agent cannot flood the inbox)."),
    WORKSPACE_MAX_SCHEDULED_ACTIONS: positiveInt
      .default(1000)
      .describe(
        'Scheduled actions per workspace (`notBefore` in the future, not yet due; 429 `capacity_exceeded`, `Retry-After: 60`). A scheduled action takes no place in the queue until it is due; then it counts against `WORKSPACE_MAX_QUEUED_ACTIONS`. It is a stored action from the start, so the storage budgets count it.',
      ),
    DEVICE_QUEUE_PER_PRINCIPAL: positiveInt
      .default(20)
      .describe(
        "Queued actions one principal may hold on one device (its share of the device's queue). There is no total per device: one principal filling its share never blocks another's request; `WORKSPACE_MAX_QUEUED_ACTIONS` stays the overall bound. Replaces `DEVICE_MAX_QUEUED_ACTIONS` (a total per device, which a few principals could fill for everyone); a service started with the old variable refuses to start and names the new one.",
      ),
    WORKSPACE_MAX_AGENT_CONNECTIONS: positiveInt
      .default(1000)
      .describe(
        "Live (unrevoked, unexpired) agent connections per workspace, a registered OAuth client's connection included (429 `capacity_exceeded`, `Retry-After: 3600`).",
      ),
    WORKSPACE_MAX_SETUP_TOKENS: positiveInt.default(100).describe('Live setup tokens per workspace (`Retry-After: 60`: they expire).'),
    WORKSPACE_MAX_GRANTS: positiveInt.default(100_000).describe('Live grants per workspace; a grant that replaces an earlier one takes no new place.'),
    WORKSPACE_MAX_OAUTH_CLIENTS: positiveInt.default(100).describe('OAuth clients a workspace registered (`POST /v1/oauth-clients`) and has not revoked.'),
    WORKSPACE_MAX_ENROLLMENT_CODES: positiveInt.default(100).describe('Unused, unexpired enrollment codes per workspace (`Retry-After: 60`).'),
    WORKSPACE_MAX_WEBHOOKS: positiveInt.default(20).describe('Live (unrevoked) webhooks per workspace (`Retry-After: 3600`).'),
    WORKSPACE_MAX_STORED_ACTIONS: positiveInt
      .default(200_000)
      .describe('Storage budget `actions`: actions a workspace stores, any status (429 `quota_exceeded`; [docs/operators/budgets.md](budgets.md)).'),
    WORKSPACE_MAX_ACTION_BYTES: positiveInt
      .default(256 * 1024 * 1024)
      .describe('Storage budget `action_bytes`: bytes of stored action arguments, results, error messages and decision reasons.'),
    WORKSPACE_MAX_EVENT_BYTES: positiveInt.default(256 * 1024 * 1024).describe("Storage budget `event_bytes`: bytes of the workspace's event journal."),
    WORKSPACE_MAX_WEBHOOK_DELIVERIES: positiveInt
      .default(1_000_000)
      .describe('Storage budget `webhook_deliveries`: webhook deliveries stored, pending or finished.'),
    ACTIONS_RETENTION_DAYS: positiveNumber
      .default(30)
      .describe('Finished actions are deleted by housekeeping this long after they were requested (fractions allowed); unfinished ones stay.'),
    WEBHOOK_POLL_SECONDS: positiveNumber
      .default(1)
      .describe('How often each instance reads new events into the webhook outbox and claims due deliveries (fractions allowed).'),
    WEBHOOK_TIMEOUT_SECONDS: positiveNumber.default(10).describe("One delivery attempt's deadline, DNS lookup to response status."),
    WEBHOOK_RETRY_SECONDS: z
      .string()
      .regex(/^\s*\d+(\.\d+)?\s*(,\s*\d+(\.\d+)?\s*)*$/, 'must be a comma-separated list of delays in seconds')
      .default('5,30,120,600,3600,10800,21600,21600,21600,21600')
      .describe(
        'The delays before each retry of a failed delivery, comma-separated (each lengthened by up to 20% jitter); a delivery gets one attempt more than there are delays. The default retries for about 28 hours.',
      ),
    WEBHOOK_MAX_IN_FLIGHT: positiveInt.default(16).describe('Delivery attempts one instance makes at once.'),
    WEBHOOK_MAX_IN_FLIGHT_PER_WEBHOOK: positiveInt
      .default(2)
      .describe('Delivery attempts in flight to one webhook, across instances ([fair delivery](../owners/webhooks.md#fair-delivery-between-workspaces)).'),
    WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: positiveInt.default(4).describe('Delivery attempts in flight for one workspace, across instances.'),
    WEBHOOK_DISABLE_AFTER_FAILURES: positiveInt.default(10).describe('A webhook is disabled after this many failed attempts in a row…'),
    WEBHOOK_DISABLE_AFTER_HOURS: z.coerce.number().min(0).default(24).describe('…once the first of them is this old (0: the count alone decides).'),
    WEBHOOK_ALLOW_PRIVATE_HOSTS: z
      .string()
      .superRefine((value, ctx) => {
        const parsed = parsePrivateHosts(value);
        if (typeof parsed === 'string') ctx.addIssue({ code: 'custom', message: parsed });
      })
      .optional()
      .describe(
        'Private hosts webhooks may reach, over `http` or `https`, comma-separated: host names (`ntfy.lan`) and CIDR ranges, IPv4 or IPv6 (`192.168.1.0/24`, `fd00::/8`, `127.0.0.0/8`; a bare address is a range of one). A URL is allowed when its host is a listed name, or when every address it resolves to lies in a listed range; the connection goes to the address checked. Unset, webhooks reach public `https` addresses only. Every owner of the service can then send requests to these hosts: see [Webhooks to a home network](security.md#webhooks-to-a-home-network).',
      ),
  })
  .superRefine((env, ctx) => {
    if (env.OWNER_JWKS_URL && env.OWNER_JWKS_FILE) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_JWKS_FILE'], message: 'set OWNER_JWKS_URL or OWNER_JWKS_FILE, not both' });
    }
    if ((env.OWNER_JWKS_URL || env.OWNER_JWKS_FILE) && (!env.OWNER_ISSUER || !env.OWNER_AUDIENCE)) {
      const missing = env.OWNER_ISSUER ? 'OWNER_AUDIENCE' : 'OWNER_ISSUER';
      ctx.addIssue({ code: 'custom', path: [missing], message: 'is required when an external JWKS is configured' });
    }
    // The console's OpenID Connect sign-in (docs/owners/console.md "Owner console") discovers the provider at
    // OWNER_ISSUER and maps its ID token as owner JWTs are mapped: an external provider only.
    if (env.OWNER_OIDC_CLIENT_SECRET && !env.OWNER_OIDC_CLIENT_ID) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_OIDC_CLIENT_ID'], message: 'is required when OWNER_OIDC_CLIENT_SECRET is set' });
    }
    if (env.OWNER_OIDC_CLIENT_ID && !(env.OWNER_JWKS_URL || env.OWNER_JWKS_FILE)) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_OIDC_CLIENT_ID'], message: 'needs an external identity provider (OWNER_JWKS_URL or OWNER_JWKS_FILE)' });
    }
    if (env.DEVELOPMENT_SIGN_IN && (env.OWNER_JWKS_URL || env.OWNER_JWKS_FILE)) {
      ctx.addIssue({
        code: 'custom',
        path: ['DEVELOPMENT_SIGN_IN'],
        message: 'is for the development identity provider: unset it with OWNER_JWKS_URL or OWNER_JWKS_FILE',
      });
    }
    if (env.OWNER_OIDC_CLIENT_ID && env.OWNER_ISSUER && !/^https?:\/\//.test(env.OWNER_ISSUER)) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_ISSUER'], message: 'must be an http(s) URL for OpenID Connect discovery when OWNER_OIDC_CLIENT_ID is set' });
    }
  });

export interface Config {
  port: number;
  host: string;
  databaseUrl: string;
  databaseAuthToken: string | undefined;
  /** Redis shared by several instances (docs/operators/scale-out.md "What instances share"); none: one process, nothing shared. */
  redisUrl: string | undefined;
  /** What this deployment's Redis keys and channel start with (REDIS_KEY_PREFIX). */
  redisKeyPrefix: string;
  /** Folder for local state of the embedded default (the development identity provider's key). */
  dataDir: string;
  publicBaseUrl: string;
  /** PUBLIC_BASE_URL was set: /openapi.json names it as the server instead of the request's own origin. */
  publicBaseUrlSet: boolean;
  /** Browser origins allowed to call the REST API and /openapi.json cross-origin (CORS); none by default. */
  corsAllowedOrigins: string[];
  owner:
    | {
        mode: 'external';
        jwksUrl?: string;
        jwksFile?: string;
        issuer: string;
        audience: string;
        workspaceClaim: string;
        /** The console's OpenID Connect sign-in (OWNER_OIDC_CLIENT_ID, optional secret); absent: paste-a-session sign-in only. */
        oidc?: { clientId: string; clientSecret?: string };
      }
    | {
        mode: 'development';
        issuer: string;
        audience: string;
        workspaceClaim: string;
        /** The console's development sign-in: `open` on loopback outside production, `code` with DEVELOPMENT_SIGN_IN=code (a one-time code from the log). */
        signIn: 'open' | 'code';
        /** Why others could reach the sign-in (`NODE_ENV=production`, `HOST=0.0.0.0`); undefined on loopback outside production. */
        exposure: string | undefined;
      };
  deviceControlsEnabled: boolean;
  commit: string | undefined;
  expirySweepMs: number;
  /** How often rows past their purpose (codes, tokens, sessions, tickets, idempotency records) are deleted. */
  housekeepingSweepMs: number;
  /** How long finished actions are kept (ACTIONS_RETENTION_DAYS, default 30 days; docs/operators/budgets.md). */
  actionsRetentionMs: number;
  logLevel: LogLevel;
  /** Test only: lets Client ID Metadata Documents be fetched over http from loopback addresses. */
  oauthCimdAllowLoopback: boolean;
  /** Extra `Host` values (host or host:port) /mcp accepts besides PUBLIC_BASE_URL's and loopback (DNS-rebinding defence). */
  mcpAllowedHosts: string[];
  /** 2025-era confirmation prompts waiting for an answer: per agent connection, per instance, and how long each waits (docs/agents/confirmation.md "Limits"). */
  mcpConfirmations: { perConnection: number; perWorkspace: number; perInstance: number; waitMs: number };
  /** Open subscriptions/listen streams and their lifetime (MCP_LISTEN_*). */
  mcpListen: { perConnection: number; perWorkspace: number; perInstance: number; maxLifetimeMs: number; maxBufferedBytes: number; maxAnswerBytes: number };
  /** How long a connection's unsent bytes may make no progress before it is closed (WRITE_TIMEOUT_SECONDS). */
  writeTimeoutMs: number;
  /** Wake socket ping interval (WS_PING_SECONDS, default 15 s): a peer silent for two pings is dropped. */
  wsPingMs: number;
  rateLimits: RateLimitSettings;
  capacity: CapacityLimits;
  /** The owner's event stream and its replay window (EVENTS_*). */
  ownerEvents: OwnerEventSettings;
  /** Reverse proxies in front that append to X-Forwarded-For; 0: use the socket's peer. */
  trustProxyHops: number;
  /** Bearer token for GET /metrics; metrics are off without it. */
  metricsToken: string | undefined;
  /** Webhook delivery (docs/owners/webhooks.md). */
  webhooks: WebhookDeliverySettings;
  /** WEBHOOK_ALLOW_PRIVATE_HOSTS: the private hosts and ranges webhooks may reach (none by default). */
  webhookAllowPrivateHosts: PrivateHostAllowance;
}

const HOST_NAME = /^(?=.{1,253}$)[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?(\.[a-z0-9_]([a-z0-9_-]{0,61}[a-z0-9_])?)*$/;

/** WEBHOOK_ALLOW_PRIVATE_HOSTS read into names and ranges, or what is wrong with its first bad entry. */
function parsePrivateHosts(text: string): PrivateHostAllowance | string {
  const allowance: PrivateHostAllowance = { names: [], ranges: [] };
  for (const raw of text.split(',')) {
    const entry = raw.trim().toLowerCase();
    if (entry === '') continue;
    const [address = '', prefixText, extra] = entry.replace(/^\[|\](?=\/|$)/g, '').split('/');
    const family = isIP(address);
    if (family !== 0) {
      const bits = family === 4 ? 32 : 128;
      const prefix = prefixText === undefined ? bits : /^\d{1,3}$/.test(prefixText) ? Number(prefixText) : NaN;
      if (extra !== undefined || !(prefix >= 0 && prefix <= bits)) return `has a bad range "${entry}": the prefix length must be 0–${bits}`;
      allowance.ranges.push({ address, prefix, family: family === 4 ? 'ipv4' : 'ipv6' });
    } else if (prefixText !== undefined) {
      return `has a bad range "${entry}": a range is an IPv4 or IPv6 address, a slash and a prefix length`;
    } else if (HOST_NAME.test(address.replace(/\.$/, ''))) {
      allowance.names.push(address.replace(/\.$/, ''));
    } else {
      return `has a bad entry "${entry}": each entry is a host name or a CIDR range`;
    }
  }
  return allowance;
}

export class ConfigError extends Error {}

/**
 * A start-up step that failed for a reason the operator can fix (docs/operators/deploy.md "Deploy"): the message
 * is one line naming the cause, and `variable` is the setting to change. src/main.ts prints it
 * and exits 1.
 */
export class StartupError extends Error {
  constructor(
    readonly variable: string,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'StartupError';
  }
}

/** Parses the environment; throws a ConfigError whose message is one line naming the variable. */
export function parseConfig(env: Record<string, string | undefined>): Config {
  const present = Object.fromEntries(Object.entries(env).filter(([, value]) => value !== undefined && value !== ''));
  if (present.DEVICE_MAX_QUEUED_ACTIONS !== undefined) {
    // A total per device let a few principals fill a device for everyone (docs/reference/rules.md "Errors and limits"):
    // refused rather than ignored, so an operator who set it learns that its meaning changed.
    throw new ConfigError(
      'invalid configuration: DEVICE_MAX_QUEUED_ACTIONS was replaced by DEVICE_QUEUE_PER_PRINCIPAL (queued actions per principal per device)',
    );
  }
  const parsed = configSchema.safeParse(present);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    throw new ConfigError(`invalid configuration: ${issue.path.join('.') || 'environment'} ${issue.message}`);
  }
  const e = parsed.data;
  const dbFile = e.DATABASE_URL.startsWith('file:') ? e.DATABASE_URL.slice('file:'.length) : undefined;
  return {
    port: e.PORT,
    host: e.HOST,
    databaseUrl: e.DATABASE_URL,
    databaseAuthToken: e.DATABASE_AUTH_TOKEN,
    redisUrl: e.REDIS_URL,
    redisKeyPrefix: e.REDIS_KEY_PREFIX,
    dataDir: dbFile ? path.dirname(path.resolve(dbFile)) : path.resolve('data'),
    publicBaseUrl: (e.PUBLIC_BASE_URL ?? `http://localhost:${e.PORT}`).replace(/\/+$/, ''),
    publicBaseUrlSet: e.PUBLIC_BASE_URL !== undefined,
    corsAllowedOrigins: (e.CORS_ALLOWED_ORIGINS ?? '')
      .split(',')
      .map((origin) => origin.trim().toLowerCase())
      .filter(Boolean),
    owner: ownerSettings(e),
    deviceControlsEnabled: e.DEVICE_CONTROLS_ENABLED,
    commit: e.SERVICE_COMMIT,
    expirySweepMs: e.EXPIRY_SWEEP_SECONDS * 1000,
    housekeepingSweepMs: e.HOUSEKEEPING_SWEEP_SECONDS * 1000,
    logLevel: e.LOG_LEVEL,
    oauthCimdAllowLoopback: e.OAUTH_CIMD_ALLOW_LOOPBACK,
    webhookAllowPrivateHosts: parsePrivateHosts(e.WEBHOOK_ALLOW_PRIVATE_HOSTS ?? '') as PrivateHostAllowance,
    mcpAllowedHosts: (e.MCP_ALLOWED_HOSTS ?? '')
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
    mcpConfirmations: {
      perConnection: e.MCP_CONFIRMATIONS_PER_CONNECTION,
      perWorkspace: e.MCP_CONFIRMATIONS_PER_WORKSPACE,
      perInstance: e.MCP_CONFIRMATIONS_PER_INSTANCE,
      waitMs: e.MCP_CONFIRMATION_WAIT_SECONDS * 1000,
    },
    mcpListen: {
      perConnection: e.MCP_LISTEN_PER_CONNECTION,
      perWorkspace: e.MCP_LISTEN_PER_WORKSPACE,
      perInstance: e.MCP_LISTEN_PER_INSTANCE,
      maxLifetimeMs: e.MCP_LISTEN_MAX_SECONDS * 1000,
      maxBufferedBytes: e.MCP_LISTEN_MAX_BUFFERED_KIB * 1024,
      maxAnswerBytes: e.MCP_LISTEN_MAX_ANSWER_KIB * 1024,
    },
    writeTimeoutMs: e.WRITE_TIMEOUT_SECONDS * 1000,
    wsPingMs: e.WS_PING_SECONDS * 1000,
    ownerEvents: {
      retentionMs: e.EVENTS_RETENTION_HOURS * 3_600_000,
      heartbeatMs: e.EVENTS_HEARTBEAT_SECONDS * 1000,
      pollMs: e.EVENTS_POLL_SECONDS * 1000,
      maxStreamsPerWorkspace: e.EVENTS_MAX_STREAMS_PER_WORKSPACE,
      maxStreams: e.EVENTS_MAX_STREAMS,
    },
    trustProxyHops: e.TRUST_PROXY_HOPS,
    metricsToken: e.METRICS_TOKEN,
    rateLimits: rateLimitSettings(e),
    capacity: capacitySettings(e),
    actionsRetentionMs: e.ACTIONS_RETENTION_DAYS * 24 * 3_600_000,
    webhooks: {
      pollMs: e.WEBHOOK_POLL_SECONDS * 1000,
      timeoutMs: e.WEBHOOK_TIMEOUT_SECONDS * 1000,
      retryDelaysMs: e.WEBHOOK_RETRY_SECONDS.split(',').map((delay) => Math.round(Number(delay) * 1000)),
      maxInFlight: e.WEBHOOK_MAX_IN_FLIGHT,
      maxInFlightPerWebhook: e.WEBHOOK_MAX_IN_FLIGHT_PER_WEBHOOK,
      maxInFlightPerWorkspace: e.WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE,
      disableAfterFailures: e.WEBHOOK_DISABLE_AFTER_FAILURES,
      disableAfterMs: e.WEBHOOK_DISABLE_AFTER_HOURS * 3_600_000,
    },
  };
}

type Env = z.output<typeof configSchema>;

/** Who signs owner sessions: an external identity provider when a JWKS is given, else the development one. */
function ownerSettings(e: Env): Config['owner'] {
  const external = e.OWNER_JWKS_URL || e.OWNER_JWKS_FILE;
  return external
    ? {
        mode: 'external',
        ...(e.OWNER_JWKS_URL ? { jwksUrl: e.OWNER_JWKS_URL } : {}),
        ...(e.OWNER_JWKS_FILE ? { jwksFile: e.OWNER_JWKS_FILE } : {}),
        issuer: e.OWNER_ISSUER!,
        audience: e.OWNER_AUDIENCE!,
        workspaceClaim: e.OWNER_WORKSPACE_CLAIM,
        ...(e.OWNER_OIDC_CLIENT_ID
          ? { oidc: { clientId: e.OWNER_OIDC_CLIENT_ID, ...(e.OWNER_OIDC_CLIENT_SECRET ? { clientSecret: e.OWNER_OIDC_CLIENT_SECRET } : {}) } }
          : {}),
      }
    : {
        mode: 'development',
        issuer: e.OWNER_ISSUER ?? 'urn:dfc:development-identity-provider',
        audience: e.OWNER_AUDIENCE ?? 'urn:dfc:owner',
        workspaceClaim: e.OWNER_WORKSPACE_CLAIM,
        signIn: e.DEVELOPMENT_SIGN_IN === 'code' ? 'code' : 'open',
        exposure: e.NODE_ENV === 'production' ? 'NODE_ENV=production' : loopbackHost(e.HOST) ? undefined : `HOST=${e.HOST}`,
      };
}

/**
 * Whether HOST listens on this machine's loopback only. `0.0.0.0` and `::` listen on every
 * interface; a name other than localhost may resolve to anything.
 */
export function loopbackHost(host: string): boolean {
  const bare = host.replace(/^\[(.*)\]$/, '$1').toLowerCase();
  return bare === 'localhost' || bare === '::1' || /^127(\.\d{1,3}){3}$/.test(bare) || /^::ffff:127(\.\d{1,3}){3}$/.test(bare);
}

/**
 * The development identity provider's console sign-in lets whoever opens it choose any owner.
 * Served to others (production, or a HOST beyond loopback) without a one-time code, that is
 * every workspace for anyone who reaches the port: such a start is refused, naming what to set.
 */
export function developmentSignInRefusal(config: Config): StartupError | undefined {
  const owner = config.owner;
  if (owner.mode !== 'development' || owner.exposure === undefined || owner.signIn === 'code') return undefined;
  return new StartupError(
    'OWNER_JWKS_URL',
    `no identity provider is configured, and with ${owner.exposure} the development sign-in would let anyone who reaches the service sign in as any owner: set OWNER_JWKS_URL (or OWNER_JWKS_FILE) with OWNER_ISSUER and OWNER_AUDIENCE (docs/operators/identity-provider.md), or DEVELOPMENT_SIGN_IN=code to sign in with a one-time code from the log`,
  );
}

function rateLimitSettings(e: Env): Config['rateLimits'] {
  return {
    agent: { ratePerSecond: e.RATE_LIMIT_AGENT_PER_SECOND, burst: e.RATE_LIMIT_AGENT_BURST },
    device: { ratePerSecond: e.RATE_LIMIT_DEVICE_PER_SECOND, burst: e.RATE_LIMIT_DEVICE_BURST },
    owner: { ratePerSecond: e.RATE_LIMIT_OWNER_PER_SECOND, burst: e.RATE_LIMIT_OWNER_BURST },
    authFailures: { ratePerSecond: e.AUTH_FAILURES_PER_MINUTE / 60, burst: e.AUTH_FAILURES_PER_MINUTE },
    registrations: { ratePerSecond: e.OAUTH_REGISTRATIONS_PER_HOUR / 3600, burst: e.OAUTH_REGISTRATIONS_PER_HOUR },
  };
}

function capacitySettings(e: Env): Config['capacity'] {
  return {
    devicesPerWorkspace: e.WORKSPACE_MAX_DEVICES,
    queuedActionsPerWorkspace: e.WORKSPACE_MAX_QUEUED_ACTIONS,
    scheduledActionsPerWorkspace: e.WORKSPACE_MAX_SCHEDULED_ACTIONS,
    queuedActionsPerPrincipalPerDevice: e.DEVICE_QUEUE_PER_PRINCIPAL,
    agentConnectionsPerWorkspace: e.WORKSPACE_MAX_AGENT_CONNECTIONS,
    setupTokensPerWorkspace: e.WORKSPACE_MAX_SETUP_TOKENS,
    grantsPerWorkspace: e.WORKSPACE_MAX_GRANTS,
    oauthClientsPerWorkspace: e.WORKSPACE_MAX_OAUTH_CLIENTS,
    enrollmentCodesPerWorkspace: e.WORKSPACE_MAX_ENROLLMENT_CODES,
    webhooksPerWorkspace: e.WORKSPACE_MAX_WEBHOOKS,
    storage: {
      actions: e.WORKSPACE_MAX_STORED_ACTIONS,
      action_bytes: e.WORKSPACE_MAX_ACTION_BYTES,
      event_bytes: e.WORKSPACE_MAX_EVENT_BYTES,
      webhook_deliveries: e.WORKSPACE_MAX_WEBHOOK_DELIVERIES,
    },
  };
}

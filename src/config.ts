import path from 'node:path';
import { z } from 'zod';
import type { CapacityLimits, OwnerEventSettings } from './domain/context.js';
import type { RateLimitSettings } from './domain/rate-limits.js';
import type { WebhookDeliverySettings } from './domain/webhook-delivery.js';
import type { LogLevel } from './domain/context.js';

/**
 * Every setting the service reads, all optional (docs/rules.md "Running"). Parsed once by the entry
 * points (src/main.ts, src/cli/*) from the environment and injected everywhere else.
 */
const booleanString = z.enum(['true', 'false', '1', '0']).transform((value) => value === 'true' || value === '1');

const positiveInt = z.coerce.number().int().positive();
const positiveNumber = z.coerce.number().positive();

/** LOG_LEVEL values, most verbose first (README "Logs"). */
export const LOG_LEVELS = ['debug', 'info', 'warn', 'error', 'silent'] as const satisfies readonly LogLevel[];

export const configSchema = z
  .object({
    PORT: z.coerce.number().int().min(0).max(65535).default(8787),
    HOST: z.string().min(1).default('127.0.0.1'),
    DATABASE_URL: z
      .string()
      .regex(/^(file:|libsql:\/\/|wss?:\/\/|https?:\/\/)/, 'must start with file:, libsql://, ws://, wss://, http:// or https://')
      .default('file:./data/service.db'),
    DATABASE_AUTH_TOKEN: z.string().min(1).optional(),
    REDIS_URL: z
      .string()
      .regex(/^rediss?:\/\/[^\s]+$/, 'must start with redis:// or rediss:// (TLS), e.g. rediss://:password@host:6380')
      .optional(),
    REDIS_KEY_PREFIX: z
      .string()
      .regex(/^[A-Za-z0-9:_.-]{1,64}$/, 'must be 1 to 64 letters, digits or : _ . -, e.g. dfc-staging:')
      .default('dfc:'),
    PUBLIC_BASE_URL: z.url({ protocol: /^https?$/ }).optional(),
    CORS_ALLOWED_ORIGINS: z
      .string()
      .regex(
        /^\s*https?:\/\/[A-Za-z0-9.:[\]-]+\s*(,\s*https?:\/\/[A-Za-z0-9.:[\]-]+\s*)*$/,
        'must be a comma-separated list of origins (http[s]://host[:port])',
      )
      .optional(),
    OWNER_JWKS_URL: z.url({ protocol: /^https?$/ }).optional(),
    OWNER_JWKS_FILE: z.string().min(1).optional(),
    OWNER_ISSUER: z.string().min(1).optional(),
    OWNER_AUDIENCE: z.string().min(1).optional(),
    OWNER_WORKSPACE_CLAIM: z.string().min(1).default('sub'),
    OWNER_OIDC_CLIENT_ID: z.string().min(1).optional(),
    OWNER_OIDC_CLIENT_SECRET: z.string().min(1).optional(),
    DEVICE_CONTROLS_ENABLED: booleanString.default(true),
    SERVICE_COMMIT: z.string().min(1).optional(),
    EXPIRY_SWEEP_SECONDS: positiveInt.default(5),
    HOUSEKEEPING_SWEEP_SECONDS: positiveInt.default(600),
    LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
    OAUTH_CIMD_ALLOW_LOOPBACK: booleanString.default(false),
    MCP_ALLOWED_HOSTS: z
      .string()
      .regex(/^\s*[A-Za-z0-9.:[\]-]+\s*(,\s*[A-Za-z0-9.:[\]-]+\s*)*$/, 'must be a comma-separated list of host or host:port values')
      .optional(),
    MCP_CONFIRMATIONS_PER_CONNECTION: positiveInt.default(10),
    MCP_CONFIRMATIONS_PER_WORKSPACE: positiveInt.default(100),
    MCP_CONFIRMATIONS_PER_INSTANCE: positiveInt.default(1000),
    MCP_CONFIRMATION_WAIT_SECONDS: positiveInt.max(300).default(300),
    TRUST_PROXY_HOPS: z.coerce.number().int().min(0).max(10).default(0),
    METRICS_TOKEN: z.string().min(16, 'must be at least 16 characters').optional(),
    WS_PING_SECONDS: positiveInt.default(15),
    EVENTS_RETENTION_HOURS: positiveNumber.default(24),
    EVENTS_HEARTBEAT_SECONDS: positiveNumber.default(15),
    EVENTS_POLL_SECONDS: positiveNumber.default(2),
    EVENTS_MAX_STREAMS_PER_WORKSPACE: positiveInt.default(10),
    EVENTS_MAX_STREAMS: positiveInt.default(1000),
    RATE_LIMIT_AGENT_PER_SECOND: positiveNumber.default(20),
    RATE_LIMIT_AGENT_BURST: positiveInt.default(40),
    RATE_LIMIT_DEVICE_PER_SECOND: positiveNumber.default(10),
    RATE_LIMIT_DEVICE_BURST: positiveInt.default(20),
    RATE_LIMIT_OWNER_PER_SECOND: positiveNumber.default(20),
    RATE_LIMIT_OWNER_BURST: positiveInt.default(40),
    AUTH_FAILURES_PER_MINUTE: positiveInt.default(10),
    OAUTH_REGISTRATIONS_PER_HOUR: positiveInt.default(20),
    WORKSPACE_MAX_DEVICES: positiveInt.default(1000),
    WORKSPACE_MAX_QUEUED_ACTIONS: positiveInt.default(10_000),
    DEVICE_QUEUE_PER_PRINCIPAL: positiveInt.default(20),
    WORKSPACE_MAX_AGENT_CONNECTIONS: positiveInt.default(1000),
    WORKSPACE_MAX_SETUP_TOKENS: positiveInt.default(100),
    WORKSPACE_MAX_GRANTS: positiveInt.default(100_000),
    WORKSPACE_MAX_OAUTH_CLIENTS: positiveInt.default(100),
    WORKSPACE_MAX_ENROLLMENT_CODES: positiveInt.default(100),
    WORKSPACE_MAX_WEBHOOKS: positiveInt.default(20),
    WORKSPACE_MAX_STORED_ACTIONS: positiveInt.default(200_000),
    WORKSPACE_MAX_ACTION_BYTES: positiveInt.default(256 * 1024 * 1024),
    WORKSPACE_MAX_EVENT_BYTES: positiveInt.default(256 * 1024 * 1024),
    WORKSPACE_MAX_WEBHOOK_DELIVERIES: positiveInt.default(1_000_000),
    ACTIONS_RETENTION_DAYS: positiveNumber.default(30),
    WEBHOOK_POLL_SECONDS: positiveNumber.default(1),
    WEBHOOK_TIMEOUT_SECONDS: positiveNumber.default(10),
    WEBHOOK_RETRY_SECONDS: z
      .string()
      .regex(/^\s*\d+(\.\d+)?\s*(,\s*\d+(\.\d+)?\s*)*$/, 'must be a comma-separated list of delays in seconds')
      .default('5,30,120,600,3600,10800,21600,21600,21600,21600'),
    WEBHOOK_MAX_IN_FLIGHT: positiveInt.default(16),
    WEBHOOK_MAX_IN_FLIGHT_PER_WEBHOOK: positiveInt.default(2),
    WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: positiveInt.default(4),
    WEBHOOK_DISABLE_AFTER_FAILURES: positiveInt.default(10),
    WEBHOOK_DISABLE_AFTER_HOURS: z.coerce.number().min(0).default(24),
  })
  .superRefine((env, ctx) => {
    if (env.OWNER_JWKS_URL && env.OWNER_JWKS_FILE) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_JWKS_FILE'], message: 'set OWNER_JWKS_URL or OWNER_JWKS_FILE, not both' });
    }
    if ((env.OWNER_JWKS_URL || env.OWNER_JWKS_FILE) && (!env.OWNER_ISSUER || !env.OWNER_AUDIENCE)) {
      const missing = env.OWNER_ISSUER ? 'OWNER_AUDIENCE' : 'OWNER_ISSUER';
      ctx.addIssue({ code: 'custom', path: [missing], message: 'is required when an external JWKS is configured' });
    }
    // The console's OpenID Connect sign-in (README "Owner console") discovers the provider at
    // OWNER_ISSUER and maps its ID token as owner JWTs are mapped: an external provider only.
    if (env.OWNER_OIDC_CLIENT_SECRET && !env.OWNER_OIDC_CLIENT_ID) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_OIDC_CLIENT_ID'], message: 'is required when OWNER_OIDC_CLIENT_SECRET is set' });
    }
    if (env.OWNER_OIDC_CLIENT_ID && !(env.OWNER_JWKS_URL || env.OWNER_JWKS_FILE)) {
      ctx.addIssue({ code: 'custom', path: ['OWNER_OIDC_CLIENT_ID'], message: 'needs an external identity provider (OWNER_JWKS_URL or OWNER_JWKS_FILE)' });
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
  /** Redis shared by several instances (README "What instances share"); none: one process, nothing shared. */
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
    | { mode: 'development'; issuer: string; audience: string; workspaceClaim: string };
  deviceControlsEnabled: boolean;
  commit: string | undefined;
  expirySweepMs: number;
  /** How often rows past their purpose (codes, tokens, sessions, tickets, idempotency records) are deleted. */
  housekeepingSweepMs: number;
  /** How long finished actions are kept (ACTIONS_RETENTION_DAYS, default 30 days; docs/budgets.md). */
  actionsRetentionMs: number;
  logLevel: LogLevel;
  /** Test only: lets Client ID Metadata Documents be fetched over http from loopback addresses. */
  oauthCimdAllowLoopback: boolean;
  /** Extra `Host` values (host or host:port) /mcp accepts besides PUBLIC_BASE_URL's and loopback (DNS-rebinding defence). */
  mcpAllowedHosts: string[];
  /** 2025-era confirmation prompts waiting for an answer: per agent connection, per instance, and how long each waits (docs/confirmation.md "Limits"). */
  mcpConfirmations: { perConnection: number; perWorkspace: number; perInstance: number; waitMs: number };
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
  /** Webhook delivery (README "Webhooks"). */
  webhooks: WebhookDeliverySettings;
}

export class ConfigError extends Error {}

/**
 * A start-up step that failed for a reason the operator can fix (README "Deploy"): the message
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
    // A total per device let a few principals fill a device for everyone (docs/rules.md "Errors and limits"):
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
      };
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

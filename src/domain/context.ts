import type { Db } from '../store/driver.js';
import type { ApprovalMode } from '../store/grants.js';
import type { StorageLimits } from '../store/usage.js';
import type { ArgumentSchemas } from './argument-schemas.js';
import type { EventHub } from './event-hub.js';
import type { GrantConditions } from './grant-conditions.js';
import type { DependencyCheck } from './readiness.js';
import type { WebhookTransport } from './webhook-transport.js';

export type Access = 'read' | 'act';

/** Who is calling, resolved from the bearer credential by src/auth before any operation runs. */
export type Credential =
  | {
      kind: 'owner';
      workspaceId: string;
      subject: string;
      /** When the session token stops authenticating (its `exp`): a live stream ends then (docs/reference/event-streams.md). */
      expiresAt?: number;
      /**
       * The hash of the console session this credential came from: a live stream re-reads that
       * session and ends once it is gone (signed out, on any instance) or expired.
       */
      sessionHash?: string;
    }
  | {
      kind: 'agent';
      workspaceId: string;
      connectionId: string;
      principal: string;
      access: Access;
      /**
       * The workspace's functions_version, read in the statement that found the token: what the
       * caller's callable functions were derived from when it authenticated. An answer built
       * from them is current while this number is the one it was built at
       * (src/domain/functions.ts `callableFunctionsValidUntil`).
       */
      functionsVersion: number;
      oauth?: OAuthTokenInfo;
    }
  | { kind: 'setup'; workspaceId: string; connectionId: string }
  | {
      kind: 'device';
      workspaceId: string;
      deviceId: string;
      routingId: string;
      /** As read while authenticating. */
      lastSeenAt: number | null;
      /** Whether the device or one of its children declares a result schema, as read while authenticating. */
      declaresResults: boolean;
    };

/**
 * Set when an agent credential is an OAuth access token: `access` is then already the token's
 * scope ceiling intersected with its connection's (docs/reference/rules.md "Access"), so every check that reads
 * `access` holds for OAuth tokens too.
 */
export interface OAuthTokenInfo {
  clientId: string;
  /** The scopes the owner approved: `['read']` or `['read', 'act']`. */
  scopes: Access[];
  /** Unix ms. */
  expiresAt: number;
  /** The RFC 8707 resource the token is bound to: `${PUBLIC_BASE_URL}/mcp`. */
  resource: string;
  /** The token's own row: a long-lived stream re-reads it and ends once the token is revoked. */
  tokenId: string;
}

export type CredentialKind = Credential['kind'];
export type CredentialOf<K extends CredentialKind> = Extract<Credential, { kind: K }>;

export interface Clock {
  now(): number;
}

/** LOG_LEVEL: `silent` writes nothing. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error' | 'silent';

/** Levels as docs/operators/logs-and-metrics.md "Logs" defines them: debug (diagnosis), info (what happened), warn (degraded, needs an operator soon), error (failed). */
export interface Logger {
  /** Whether a record at `level` would be written; absent means always (a caller then builds the record regardless). */
  enabled?(level: 'debug' | 'info' | 'warn' | 'error'): boolean;
  debug(record: Record<string, unknown>): void;
  info(record: Record<string, unknown>): void;
  warn(record: Record<string, unknown>): void;
  error(record: Record<string, unknown>): void;
}

/** Service-wide facts an operation may need; fixed at start. */
export interface ServiceSettings {
  serviceName: string;
  commit: string | undefined;
  authConfigured: boolean;
  deviceControlsEnabled: boolean;
  publicBaseUrl: string;
  capacity: CapacityLimits;
  /** What GET /readyz asks (docs/operators/probes.md "Probes"): the database, and Redis when configured. */
  dependencies: readonly DependencyCheck[];
  /** The owner's event stream (docs/reference/events.md "Owner events"). */
  ownerEvents: OwnerEventSettings;
}

/** Workspace capacity (docs/reference/rules.md "Errors and limits"), checked in the transaction that would exceed it. */
export interface CapacityLimits {
  devicesPerWorkspace: number;
  queuedActionsPerWorkspace: number;
  /** Actions scheduled for later and not yet due (WORKSPACE_MAX_SCHEDULED_ACTIONS): they take no place in the queue until then. */
  scheduledActionsPerWorkspace: number;
  /** Each principal's share of one device's queue: one principal filling it never blocks another. */
  queuedActionsPerPrincipalPerDevice: number;
  agentConnectionsPerWorkspace: number;
  setupTokensPerWorkspace: number;
  grantsPerWorkspace: number;
  oauthClientsPerWorkspace: number;
  enrollmentCodesPerWorkspace: number;
  /** Live webhooks (WORKSPACE_MAX_WEBHOOKS). */
  webhooksPerWorkspace: number;
  /** What the workspace may make the service store (docs/operators/budgets.md), checked when an action is requested. */
  storage: StorageLimits;
}

/** How the stream behaves; from EVENTS_* (docs/operators/configuration.md "Configuration"). */
export interface OwnerEventSettings {
  /** A comment line after this long without an event, so proxies and clients know the stream is alive. */
  heartbeatMs: number;
  /** The safety poll: the journal is read at least this often even when nothing is announced. */
  pollMs: number;
  /** Open streams per workspace on one instance; 429 beyond. */
  maxStreamsPerWorkspace: number;
  /** Open streams on one instance, all workspaces together; 503 beyond. */
  maxStreams: number;
  /** How long events are kept for resumption (housekeeping prunes older ones). */
  retentionMs: number;
}

/** A place among the open streams of a workspace; `signal` aborts when the stream must end. */
export interface StreamSlot {
  signal: AbortSignal;
  release(): void;
}

/**
 * The open owner event streams of this instance: bounded per workspace, and all ended at
 * once when the service shuts down, so none holds `close()` past its grace period.
 */
export interface LiveStreams {
  /**
   * Takes a place, or throws 429 `capacity_exceeded` (the workspace's limit) or 503
   * `unavailable` (the instance's); the slot ends when `caller` aborts: a surface aborts it once
   * the answer has let go of its connection, not when the feed's last event is queued.
   */
  open(workspaceId: string, limits: Pick<OwnerEventSettings, 'maxStreams' | 'maxStreamsPerWorkspace'>, caller: AbortSignal): StreamSlot;
  /** Ends every open stream and refuses new ones (503): the service is shutting down. */
  closeAll(): void;
  /**
   * Aborts once `closeAll` is called: whatever else holds a request open until something
   * happens (a long-poll `next`) answers then, so shutdown never waits for it.
   */
  closing: AbortSignal;
}

/** A device function an agent may call now, as the live access check found it (docs/reference/rules.md "Access"). */
export interface AuthorizedFunction {
  /** Who fetches the command: the device itself, or its gateway. */
  targetId: string;
  kind: 'read' | 'control';
  argumentSchema: string;
  /** Whose yes the call needs first (docs/reference/rules.md "Approvals"). */
  approval: ApprovalMode;
  /** How far, when and how often the grant allows it (src/domain/grant-conditions.ts); null for no conditions. */
  conditions: GrantConditions | null;
}

/** Where a call came in: the REST facade or the MCP endpoint (some credentials are accepted on one only). */
export type Surface = 'rest' | 'mcp';

/** What every operation receives: plain data, never a transport's request object. */
export interface OperationContext {
  credential: Credential | null;
  surface: Surface;
  requestId: string;
  db: Db;
  clock: Clock;
  log: Logger;
  settings: ServiceSettings;
  events: EventHub;
  /** Device argument schemas, compiled once each into the service's bounded cache. */
  schemas: ArgumentSchemas;
  /** The owner event streams open on this instance: bounded, and ended on shutdown. */
  streams: LiveStreams;
  /** Checks webhook URLs against the SSRF guard (docs/owners/webhooks.md). */
  webhooks: WebhookTransport;
  /**
   * The agent's MCP client reported that its user said yes to this very call, under the grant
   * named here (a verified confirmation state: docs/agents/confirmation.md). Set by the MCP surface
   * only; a grant in `user` mode then queues the action, recorded as confirmed by the client,
   * if it is still that grant; a revoke and re-grant since refuses the call.
   */
  userConfirmation?: { grantId: string };
  /**
   * A function this request already found callable by a live read (the MCP gate resolves a
   * device tool's name from the caller's callable functions): the action request for exactly
   * that device function takes it instead of reading the same access again. Its guarded insert
   * checks, as for any read before it, what could have changed since (docs/contributors/performance-history.md
   * "One access read per MCP call").
   */
  callable?: { deviceId: string; capability: string; fn: AuthorizedFunction };
  /**
   * This request already found device control running in the caller's workspace (not
   * paused) by a live read just before the call runs (the MCP gate answers 503 before the
   * SDK when it is paused): `invoke` and the action request take that reading instead of
   * reading the switch again (without it, an action request that `checksPause` reads the
   * switch only when refused or keyed).
   * Never set on a call that waited for a person, which reads it afresh.
   */
  controlsRunning?: true;
}

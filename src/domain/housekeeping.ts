import { setImmediate as yieldToRequests } from 'node:timers/promises';
import type { Db } from '../store/driver.js';
import { logSweepFailure } from './errors.js';
import { deleteDueBatch, deleteExpiredActionsBatch, SWEPT_KINDS, workspacesWithExpiredActions, type SweptKind } from '../store/housekeeping.js';
import type { Clock, Logger } from './context.js';
import { IDEMPOTENCY_WINDOW_MS } from './idempotency.js';

/**
 * Rows that outlived their purpose, deleted so the database does not grow forever. What is
 * kept and why:
 *
 * - Actions are history (docs/reference/rules.md "Actions": history and export) for ACTIONS_RETENTION_DAYS
 *   (30 days by default) after they were requested, then deleted once finished; one still
 *   waiting, queued or handed out stays (docs/operators/budgets.md). What they stored then no longer
 *   counts against the workspace's storage budgets, and SQLite reuses the freed pages.
 * - Authorization codes: one hour past their 60 s expiry, so that a stolen code replayed in
 *   that hour still revokes the tokens it issued (src/domain/oauth/token.ts, exchangeCode).
 * - Access and refresh tokens, including rotated and revoked ones: until they expire. A
 *   rotated refresh token must stay while it could still be presented, or its reuse could not
 *   be detected (and its family revoked); a revoked one may go once it would have expired anyway.
 * - Consent-page sessions: until they expire (at most 8 h).
 * - Wake-channel tickets: once used, or past their 30 s.
 * - Idempotency records: 24 h, their replay window (docs/reference/rules.md "Actions").
 * - Owner events (the workspace event journal): their replay window, EVENTS_RETENTION_HOURS
 *   (24 h by default; docs/reference/events.md "Owner events"). Actions themselves stay, as history.
 * - OAuth clients no owner approved (no connection uses them): a dynamic registration a day
 *   after it was made, a cached client metadata document a day after it went stale. Anyone
 *   may register (POST /oauth/register), so unapproved ones would otherwise pile up; a client
 *   that comes back later registers again (or its document is fetched again).
 * - Webhook deliveries: 7 days after they finished (delivered, failed or cancelled), so the
 *   owner can look back at a week of `GET /v1/webhooks/{id}/deliveries`; pending ones stay
 *   until they finish. A revoked webhook goes once its deliveries have (docs/owners/webhooks.md).
 * - An event's webhook payload: once none of its deliveries is pending (a delivery that
 *   finished never sends again; what it was is in its row).
 */
export const CODE_RETENTION_MS = 3_600_000;
export const UNAPPROVED_CLIENT_RETENTION_MS = 24 * 3_600_000;
export const WEBHOOK_DELIVERY_RETENTION_MS = 7 * 24 * 3_600_000;

/** The owner events' replay window unless configured (EVENTS_RETENTION_HOURS). */
export const EVENTS_RETENTION_MS = 24 * 3_600_000;

/** How long finished actions are kept unless configured (ACTIONS_RETENTION_DAYS). */
export const ACTIONS_RETENTION_MS = 30 * 24 * 3_600_000;

/** Rows of each kind due for deletion at `now` are those whose deadline is at or before this. */
export function deadlines(now: number, eventsRetentionMs = EVENTS_RETENTION_MS): Record<SweptKind, number> {
  return {
    workspaceEvents: now - eventsRetentionMs,
    oauthCodes: now - CODE_RETENTION_MS,
    oauthTokens: now,
    ownerSessions: now,
    eventTickets: now,
    idempotencyKeys: now - IDEMPOTENCY_WINDOW_MS,
    unapprovedClients: now - UNAPPROVED_CLIENT_RETENTION_MS,
    webhookDeliveries: now - WEBHOOK_DELIVERY_RETENTION_MS,
    revokedWebhooks: now - WEBHOOK_DELIVERY_RETENTION_MS,
    webhookPayloads: now,
  };
}

export interface HousekeepingOptions {
  /** Rows per DELETE statement (500). */
  batchSize?: number;
  /** Batches per kind and run (200): a huge backlog is worked off over several runs. */
  maxBatches?: number;
  /** How long owner events are kept for resumption (EVENTS_RETENTION_HOURS, default 24 h). */
  eventsRetentionMs?: number;
  /** How long finished actions are kept (ACTIONS_RETENTION_DAYS, default 30 days). */
  actionsRetentionMs?: number;
}

export type SweptCounts = Record<SweptKind | 'actions', number>;

/** One pass over every kind; returns how many rows of each were deleted. */
export async function runHousekeeping(deps: { db: Db; clock: Clock }, options: HousekeepingOptions = {}): Promise<SweptCounts> {
  const batchSize = options.batchSize ?? 500;
  const maxBatches = options.maxBatches ?? 200;
  const now = deps.clock.now();
  const due = deadlines(now, options.eventsRetentionMs);
  const deleted = { actions: 0 } as SweptCounts;
  // Batches of one kind until a short one, with requests waiting on the database let in between.
  const drain = async (deleteBatch: () => Promise<number>) => {
    let total = 0;
    for (let batch = 0; batch < maxBatches; batch++) {
      const n = await deleteBatch();
      total += n;
      if (n < batchSize) break;
      await yieldToRequests();
    }
    return total;
  };
  // Actions per workspace (src/store/housekeeping.ts says why), then every other kind.
  const actionsDue = now - (options.actionsRetentionMs ?? ACTIONS_RETENTION_MS);
  for (const workspaceId of await workspacesWithExpiredActions(deps.db, actionsDue)) {
    deleted.actions += await drain(() => deleteExpiredActionsBatch(deps.db, workspaceId, actionsDue, batchSize));
  }
  for (const kind of SWEPT_KINDS) deleted[kind] = await drain(() => deleteDueBatch(deps.db, kind, due[kind], batchSize));
  return deleted;
}

/**
 * Runs `runHousekeeping` every `intervalMs` (HOUSEKEEPING_SWEEP_SECONDS, default 10 minutes).
 * Returns a stop function that waits for a run in progress, so the database is not closed
 * under it.
 */
export function startHousekeeping(deps: { db: Db; clock: Clock; log: Logger }, intervalMs: number, options: HousekeepingOptions = {}): () => Promise<void> {
  let running: Promise<void> | undefined;
  const timer = setInterval(() => {
    if (running) return;
    const started = performance.now();
    running = runHousekeeping(deps, options)
      .then((deleted) => {
        // docs/operators/logs-and-metrics.md "Logs": a run that deleted rows is news (info); an idle one is for diagnosis (debug).
        const line = { msg: 'housekeeping', deleted, durationMs: Math.round((performance.now() - started) * 100) / 100 };
        if (Object.values(deleted).some((n) => n > 0)) deps.log.info(line);
        else deps.log.debug(line);
      })
      .catch((error: unknown) => logSweepFailure(deps.log, 'housekeeping failed', error))
      .finally(() => {
        running = undefined;
      });
  }, intervalMs);
  timer.unref();
  return async () => {
    clearInterval(timer);
    await running;
  };
}

import { randomUUID } from 'node:crypto';
import type { Db, Statement } from '../store/driver.js';
import {
  advanceDispatchCursor,
  deliveryInsert,
  deliverySkipped,
  disableWebhook,
  passOverDispatch,
  payloadInsert,
  readDispatchState,
  readDispatchWindow,
  recordEndpointFailure,
  recordEndpointSuccess,
  tellSkipping,
} from '../store/webhooks.js';
import { claimDueDeliveries, hasDueDeliveries, recordAttempt, type ClaimedDelivery } from '../store/webhook-claims.js';
import { appendWorkspaceEvent } from '../store/event-journal.js';
import type { Clock, Logger } from './context.js';
import { logSweepFailure } from './errors.js';
import { eventIds } from './event-ids.js';
import { formattedRequest, redacted } from './webhook-formats.js';
import type { WebhookTransport } from './webhook-transport.js';
import { toWorkspaceEvent, webhookSnapshot } from './event-catalogue.js';

/**
 * Webhook delivery (docs/owners/webhooks.md), run by every instance:
 *
 * - the dispatcher follows the workspace event journal from a cursor kept in the database
 *   and writes, per event, its payload once and one pending delivery per live webhook that
 *   subscribes to the event's type — the outbox, which survives restarts;
 * - the sender claims due deliveries with one guarded UPDATE and a lease, so no two instances
 *   send the same delivery at once and a crashed instance's claims are sent again once the
 *   lease runs out; the claim is fair (per-webhook and per-workspace caps on what is in flight
 *   across instances, and workspaces served by the sender time they were charged, so a slow
 *   workspace gets fewer deliveries and a newcomer the next free slot: `claimDueDeliveries`).
 *   Each attempt's real duration is charged when it ends (`recordAttempt`). It POSTs them signed, and
 *   records each attempt: delivered on 2xx, otherwise retried after the next delay of the
 *   schedule (with up to 20% jitter, so a receiver coming back is not hit by every retry at
 *   once), failed once the schedule is spent;
 * - an endpoint that keeps failing is backed off as a whole (after three failures in a row,
 *   none of its deliveries is tried before the schedule's delay for its streak has passed),
 *   and once its streak is long enough in attempts and in time it is disabled, with a
 *   `webhook.disabled` event, until its owner enables it again (docs/owners/webhooks.md).
 *
 * Delivery is at least once: a receiver deduplicates by the `webhook-id` header.
 */
export interface WebhookDeliverySettings {
  /** How often the journal is read and due deliveries claimed (WEBHOOK_POLL_SECONDS). */
  pollMs: number;
  /** One attempt's deadline, DNS to response (WEBHOOK_TIMEOUT_SECONDS). */
  timeoutMs: number;
  /** The delays before each retry (WEBHOOK_RETRY_SECONDS); a delivery gets one attempt more than it has delays. */
  retryDelaysMs: number[];
  /** Attempts in flight at once per instance (WEBHOOK_MAX_IN_FLIGHT). */
  maxInFlight: number;
  /** Attempts in flight at once to one webhook, across instances (WEBHOOK_MAX_IN_FLIGHT_PER_WEBHOOK). */
  maxInFlightPerWebhook: number;
  /** Attempts in flight at once for one workspace, across instances (WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE). */
  maxInFlightPerWorkspace: number;
  /** A webhook is disabled after this many failed attempts in a row (WEBHOOK_DISABLE_AFTER_FAILURES)… */
  disableAfterFailures: number;
  /** …once its first failure of the streak is at least this old (WEBHOOK_DISABLE_AFTER_HOURS). */
  disableAfterMs: number;
}

/** Journal events read per dispatcher batch, and batches per poll. */
const DISPATCH_BATCH = 200;
const DISPATCH_BATCHES = 10;
/**
 * The payload bytes one write batch carries at most (it always takes a window's first event
 * whole). A window of 200 events of a few KB to 20 webhooks is tens of MB in one batch, and
 * over the WebSocket transport sqld closes the socket on a message that large, so the same
 * window failed on every poll: no webhook heard of anything again.
 */
const DISPATCH_BATCH_BYTES = 4 * 1024 * 1024;
/**
 * The statements one write batch carries at most (again cut only between events). A window of
 * 200 events to 20 webhooks is about 8,200 statements, which a loaded libSQL server did not
 * finish within the driver's request deadline (src/store/remote.ts), so the same window failed
 * on every poll; a thousand is about a second's work there, and the poll's next batch goes on.
 */
const DISPATCH_BATCH_STATEMENTS = 1000;
/**
 * Failed attempts in a row before an endpoint is paused as a whole. One failure says little: a
 * receiver that refuses one attempt in five, or times out now and then, stays at full speed with
 * only the failed deliveries retried on their own schedule; an endpoint that is down fails three
 * in a row at once, and is then paused.
 */
const ENDPOINT_PAUSE_AFTER_FAILURES = 3;
/** A claim outlives the attempt's deadline by this much before another instance may take it over. */
const LEASE_MARGIN_MS = 30_000;
const MAX_ERROR_LENGTH = 300;

/** An attempt's outcome: `pending` when it failed and the delivery will be retried. */
export type AttemptOutcome = 'delivered' | 'pending' | 'failed';

/** What the sender tells the metrics (src/metrics.ts). */
export interface WebhookDeliveryObserver {
  attempted(outcome: AttemptOutcome): void;
  disabled(): void;
}

interface Deps {
  db: Db;
  clock: Clock;
  log: Logger;
  transport: WebhookTransport;
  observer?: WebhookDeliveryObserver;
  /** The origin the chat formats' approve and reject links open (PUBLIC_BASE_URL). */
  consoleUrl: string;
  /** The storage budget `webhook_deliveries` (WORKSPACE_MAX_WEBHOOK_DELIVERIES): no workspace stores more deliveries. */
  deliveryBudget: number;
}

/**
 * Reads new journal events and writes their deliveries; answers how many were written. The
 * window is read outside any transaction and written as one batch (the deliveries and the
 * cursor's guarded move): on a libSQL server a poll holds the write lock for one round trip,
 * where a statement per event in one transaction held it for dozens.
 */
export async function dispatchWebhookEvents(deps: Pick<Deps, 'db' | 'clock'> & Partial<Pick<Deps, 'deliveryBudget'>>): Promise<number> {
  const budget = deps.deliveryBudget ?? Number.MAX_SAFE_INTEGER;
  const state = await readDispatchState(deps.db);
  if (state.newest <= state.cursor) return 0;
  // With no live webhook the new events are owed to nobody: the cursor passes over them
  // unread, instead of joining every one of them with the webhooks table to find that out.
  if (state.anyLive === 0) {
    await deps.db.batch([passOverDispatch(state.cursor, state.newest)]);
    return 0;
  }
  let written = 0;
  const ids = await eventIds(deps);
  for (let batch = 0; batch < DISPATCH_BATCHES; batch++) {
    const rows = await readDispatchWindow(deps.db, DISPATCH_BATCH);
    if (rows.length === 0) break;
    const now = deps.clock.now();
    const payloads = new Set<number>();
    const inserts: Statement[] = [];
    // Which of `inserts` write a delivery (the others write a payload or count a skip): what the poll reports.
    const deliveries: boolean[] = [];
    // The webhook each skip count of `inserts` is for.
    const skips = new Map<number, string>();
    let bytes = 0;
    let last = rows[0]!;
    let cut = false;
    for (const row of rows) {
      // Cut only between events: the cursor moves past an event once all its deliveries are written.
      if (row.id !== last.id && (bytes >= DISPATCH_BATCH_BYTES || inserts.length >= DISPATCH_BATCH_STATEMENTS)) {
        cut = true;
        break;
      }
      last = row;
      if (row.webhookId === null) continue;
      // An event's first row carries its data (readDispatchWindow): its payload, written once for all its deliveries.
      if (!payloads.has(row.id)) {
        payloads.add(row.id);
        const payload = JSON.stringify(toWorkspaceEvent(row, ids));
        bytes += Buffer.byteLength(payload);
        inserts.push(payloadInsert(row.id, payload));
        deliveries.push(false);
      }
      deliveries.push(true);
      inserts.push(
        deliveryInsert({ id: randomUUID(), webhookId: row.webhookId, workspaceId: row.workspaceId, eventId: row.id, eventType: row.type }, now, budget),
      );
      skips.set(inserts.length, row.webhookId);
      deliveries.push(false);
      inserts.push(deliverySkipped({ webhookId: row.webhookId, eventId: row.id }, row.cursor, now));
    }
    // Guarded: another instance that dispatched the same events first wrote the same rows.
    const results = await deps.db.batch([...inserts, advanceDispatchCursor(last.cursor, last.id)]);
    written += results.reduce((sum, result, i) => sum + (deliveries[i] ? result.changes : 0), 0);
    await tellOfSkips(deps, new Set([...skips].filter(([i]) => results[i]!.changes > 0).map(([, webhookId]) => webhookId)), now);
    if (!cut && new Set(rows.map((row) => row.id)).size < DISPATCH_BATCH) break;
  }
  return written;
}

/**
 * Tells each webhook's owner, once per run, that its events are being skipped because the
 * workspace's `webhook_deliveries` budget is used up: a `webhook.skipped` event,
 * written with the mark that it was told (`tellSkipping`), so two instances write it once.
 */
async function tellOfSkips(deps: Pick<Deps, 'db'>, webhookIds: ReadonlySet<string>, now: number): Promise<void> {
  for (const webhookId of webhookIds) {
    await deps.db.transaction(async (tx) => {
      const row = await tellSkipping(tx, webhookId, now);
      if (row)
        await appendWorkspaceEvent(tx, {
          workspaceId: row.workspaceId,
          type: 'webhook.skipped',
          subjectId: row.id,
          data: webhookSnapshot(row),
          createdAt: now,
        });
    });
  }
}

/** The wait before the retry that follows attempt number `attempts` (1-based), jittered; undefined when none is left. */
export function retryDelay(retryDelaysMs: readonly number[], attempts: number, random = Math.random): number | undefined {
  const base = retryDelaysMs[attempts - 1];
  return base === undefined ? undefined : Math.round(base * (1 + 0.2 * random()));
}

/**
 * Backs the endpoint off once its streak is ENDPOINT_PAUSE_AFTER_FAILURES long, for the
 * schedule's delay for the failures past that; disables it once the streak is long enough in
 * attempts and time.
 */
async function endpointFailed(deps: Deps, settings: WebhookDeliverySettings, delivery: ClaimedDelivery, error: string, now: number): Promise<void> {
  const past = delivery.failureCount + 1 - (ENDPOINT_PAUSE_AFTER_FAILURES - 1);
  const pause = retryDelay(settings.retryDelaysMs, Math.min(Math.max(past, 1), settings.retryDelaysMs.length)) ?? 0;
  const streak = await recordEndpointFailure(deps.db, delivery.webhookId, now, { from: ENDPOINT_PAUSE_AFTER_FAILURES, until: now + pause });
  if (!streak || streak.failureCount < settings.disableAfterFailures || now - streak.failingSince < settings.disableAfterMs) return;
  const reason = `Every attempt failed since ${new Date(streak.failingSince).toISOString()} (${streak.failureCount} in a row); the last: ${error}`;
  const disabled = await deps.db.transaction(async (tx) => {
    const row = await disableWebhook(tx, delivery.webhookId, now, reason);
    // Another instance's attempt disabled it first, and wrote the event.
    if (!row) return false;
    await appendWorkspaceEvent(tx, { workspaceId: row.workspaceId, type: 'webhook.disabled', subjectId: row.id, data: webhookSnapshot(row), createdAt: now });
    return true;
  });
  if (!disabled) return;
  deps.observer?.disabled();
  deps.log.warn({ msg: 'webhook disabled', webhookId: delivery.webhookId, workspaceId: delivery.workspaceId, reason });
}

/**
 * Starts dispatching and sending every `pollMs`. Nothing it does can reject unhandled or block
 * a request: each poll is one promise whose failure is logged, and attempts run concurrently
 * up to `maxInFlight`. The returned stop function aborts attempts in flight (they are recorded
 * as failed and retried), and waits for them and for a poll in progress.
 */
export function startWebhookDelivery(deps: Deps, settings: WebhookDeliverySettings): () => Promise<void> {
  const stopping = new AbortController();
  const inFlight = new Set<Promise<void>>();
  let polling: Promise<void> | undefined;

  async function attempt(delivery: ClaimedDelivery, leaseToken: string): Promise<void> {
    const request = await formattedRequest(deps, delivery);
    const started = performance.now();
    const outcome = await deps.transport.post(request.url, { ...request, timeoutMs: settings.timeoutMs, signal: stopping.signal });
    // Sender time, charged to the workspace: the service's clock may be a test's manual one.
    const tookMs = performance.now() - started;
    const now = deps.clock.now();
    const statusCode = 'statusCode' in outcome ? outcome.statusCode : null;
    const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
    const error = delivered
      ? null
      : 'error' in outcome
        ? redacted(delivery.format, delivery.url, outcome.error).slice(0, MAX_ERROR_LENGTH)
        : `HTTP ${statusCode}`;
    const delay = delivered ? undefined : retryDelay(settings.retryDelaysMs, delivery.attempts);
    const status: AttemptOutcome = delivered ? 'delivered' : delay === undefined ? 'failed' : 'pending';
    const nextAttemptAt = delay === undefined ? null : now + delay;
    await recordAttempt(deps.db, { ...delivery, leaseToken }, { status, statusCode, error, nextAttemptAt, now, tookMs });
    const line = { msg: 'webhook attempt', deliveryId: delivery.id, webhookId: delivery.webhookId, attempt: delivery.attempts, status, statusCode, error };
    if (status === 'failed') deps.log.warn(line);
    else deps.log.debug(line);
    deps.observer?.attempted(status);
    if (delivered) {
      // Only a streak seen at the claim costs a write. One that began while this attempt was
      // in flight is ended by the next success, which will see it.
      if (delivery.failureCount > 0) await recordEndpointSuccess(deps.db, delivery.webhookId);
    } else if (!stopping.signal.aborted) {
      // An attempt cut by the shutdown says nothing about the endpoint.
      await endpointFailed(deps, settings, delivery, error ?? '', now);
    }
  }

  async function poll(): Promise<void> {
    const dispatched = await dispatchWebhookEvents(deps);
    if (dispatched > 0) deps.log.debug({ msg: 'webhook deliveries queued', count: dispatched });
    const free = settings.maxInFlight - inFlight.size;
    const now = deps.clock.now();
    if (free <= 0 || stopping.signal.aborted || !(await hasDueDeliveries(deps.db, now))) return;
    const leaseToken = randomUUID();
    const claimed = await claimDueDeliveries(deps.db, leaseToken, now, settings.timeoutMs + LEASE_MARGIN_MS, free, {
      perWebhook: settings.maxInFlightPerWebhook,
      perWorkspace: settings.maxInFlightPerWorkspace,
    });
    for (const delivery of claimed) {
      const running: Promise<void> = attempt(delivery, leaseToken)
        .catch((error: unknown) => logSweepFailure(deps.log, `webhook attempt ${delivery.id} failed`, error))
        .finally(() => {
          inFlight.delete(running);
          // A freed slot is filled at once, not at the next tick: with the in-flight caps a
          // workspace's deliveries would otherwise go out a few per WEBHOOK_POLL_SECONDS.
          run(true);
        });
      inFlight.add(running);
    }
  }

  /** Starts a poll; one asked for while another runs (`queue`) starts as soon as it ends. */
  let queued = false;
  function run(queue: boolean): void {
    if (stopping.signal.aborted) return;
    if (polling) {
      queued ||= queue;
      return;
    }
    // Started inside a promise so that even a synchronous throw is caught: a timer callback that throws ends the process.
    polling = Promise.resolve()
      .then(poll)
      // A database outage is a warning like the sweeps' (docs/operators/logs-and-metrics.md "Logs"); anything else is a bug.
      .catch((error: unknown) => logSweepFailure(deps.log, 'webhook delivery failed', error))
      .finally(() => {
        polling = undefined;
        if (queued) {
          queued = false;
          run(false);
        }
      });
  }

  const timer = setInterval(() => run(false), settings.pollMs);
  timer.unref();

  return async () => {
    clearInterval(timer);
    stopping.abort();
    await polling;
    await Promise.all(inFlight);
  };
}

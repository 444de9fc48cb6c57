import type { Queryable, Statement } from './driver.js';
import type { WorkspaceEventRow } from './event-journal.js';
import { cutPage, newestFirstAfter, type PageQuery, type RowsPage } from './paging.js';

/** How a webhook's deliveries are written (migration 0026; src/domain/webhook-formats.ts). */
export const WEBHOOK_FORMATS = ['generic', 'ntfy', 'slack', 'discord', 'teams', 'telegram'] as const;
export type WebhookFormat = (typeof WEBHOOK_FORMATS)[number];

/** A registered webhook (migration 0019); `events` is a JSON array of event types. */
export interface WebhookRow {
  id: string;
  workspaceId: string;
  url: string;
  description: string | null;
  events: string;
  secret: string;
  previousSecret: string | null;
  previousSecretUntil: number | null;
  createdAt: number;
  revokedAt: number | null;
  failureCount: number;
  failingSince: number | null;
  pausedUntil: number | null;
  disabledAt: number | null;
  disabledReason: string | null;
  /** How deliveries are written (migration 0026): `generic` or a chat format. */
  format: WebhookFormat;
  /** The chat a Telegram webhook's bot writes to. */
  chatId: string | null;
  /** Events it was owed but not written a delivery for: the workspace's `webhook_deliveries` budget was used up (migration 0031). */
  skippedDeliveries: number;
  /** Since when its events are being skipped; null once a delivery is written for it again. */
  skippingSince: number | null;
}

const WEBHOOK_COLUMNS = `id, workspace_id AS workspaceId, url, description, events, secret, previous_secret AS previousSecret,
  previous_secret_until AS previousSecretUntil, created_at AS createdAt, revoked_at AS revokedAt, failure_count AS failureCount,
  failing_since AS failingSince, paused_until AS pausedUntil, disabled_at AS disabledAt, disabled_reason AS disabledReason, format, chat_id AS chatId,
  skipped_deliveries AS skippedDeliveries, skipping_since AS skippingSince`;

/** Writes a webhook that receives the journal's events after the newest one committed now. */
export async function insertWebhook(
  db: Queryable,
  webhook: {
    id: string;
    workspaceId: string;
    url: string;
    description: string | null;
    events: string[];
    secret: string;
    format: WebhookFormat;
    chatId: string | null;
    createdBy: string;
    now: number;
  },
): Promise<void> {
  await db.run(
    `INSERT INTO webhooks (id, workspace_id, url, description, events, secret, format, chat_id, after_event_id, created_by, created_at)
     VALUES (?, ?, ?, ?, ?, ?, ?, ?, (SELECT coalesce(max(id), 0) FROM workspace_events), ?, ?)`,
    [
      webhook.id,
      webhook.workspaceId,
      webhook.url,
      webhook.description,
      JSON.stringify(webhook.events),
      webhook.secret,
      webhook.format,
      webhook.chatId,
      webhook.createdBy,
      webhook.now,
    ],
  );
}

export function getWebhook(db: Queryable, workspaceId: string, id: string): Promise<WebhookRow | undefined> {
  return db.get<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = ? AND id = ?`, [workspaceId, id]);
}

/** The workspace's webhooks, revoked ones included, newest first. */
export async function listWebhooks(db: Queryable, workspaceId: string, page: PageQuery): Promise<RowsPage<WebhookRow>> {
  const after = newestFirstAfter(page.after, 'created_at', 'id');
  const rows = await db.all<WebhookRow>(`SELECT ${WEBHOOK_COLUMNS} FROM webhooks WHERE workspace_id = ? ${after.sql} ORDER BY created_at DESC, id LIMIT ?`, [
    workspaceId,
    ...after.args,
    page.limit + 1,
  ]);
  return cutPage(
    rows,
    page.limit,
    (row) => [row.createdAt, row.id],
    (row) => row,
  );
}

export async function countLiveWebhooks(db: Queryable, workspaceId: string): Promise<number> {
  return (await db.get<{ n: number }>('SELECT count(*) AS n FROM webhooks WHERE workspace_id = ? AND revoked_at IS NULL', [workspaceId]))!.n;
}

/**
 * Replaces a live webhook's secret; the one it replaces stays valid until `previousUntil`
 * (docs/owners/webhooks.md: rotation). Answers whether a live webhook was changed.
 */
export async function rotateWebhookSecret(db: Queryable, workspaceId: string, id: string, secret: string, previousUntil: number): Promise<boolean> {
  const { changes } = await db.run(
    `UPDATE webhooks SET previous_secret = secret, previous_secret_until = ?, secret = ?
     WHERE workspace_id = ? AND id = ? AND revoked_at IS NULL`,
    [previousUntil, secret, workspaceId, id],
  );
  return changes === 1;
}

/** Revokes a live webhook and cancels its deliveries not yet made; answers whether it was live. */
export async function revokeWebhook(db: Queryable, workspaceId: string, id: string, now: number): Promise<boolean> {
  const { changes } = await db.run('UPDATE webhooks SET revoked_at = ? WHERE workspace_id = ? AND id = ? AND revoked_at IS NULL', [now, workspaceId, id]);
  if (changes === 0) return false;
  await db.run(
    `UPDATE webhook_deliveries SET status = 'cancelled', finished_at = ?, next_attempt_at = NULL, lease_token = NULL, lease_until = NULL
     WHERE webhook_id = ? AND status = 'pending'`,
    [now, id],
  );
  return true;
}

/**
 * Enables a disabled webhook again, with a clean record: it receives the events after the
 * newest one committed now, as a new webhook does, and its pending deliveries are tried again.
 * Answers whether a disabled, live webhook was changed.
 */
export async function enableWebhook(db: Queryable, workspaceId: string, id: string): Promise<boolean> {
  const { changes } = await db.run(
    `UPDATE webhooks SET disabled_at = NULL, disabled_reason = NULL, failure_count = 0, failing_since = NULL, paused_until = NULL,
       after_event_id = max(after_event_id, (SELECT coalesce(max(id), 0) FROM workspace_events))
     WHERE workspace_id = ? AND id = ? AND revoked_at IS NULL AND disabled_at IS NOT NULL`,
    [workspaceId, id],
  );
  return changes === 1;
}

// The outbox.

export type DeliveryStatus = 'pending' | 'delivered' | 'failed' | 'cancelled';

export interface DeliveryRow {
  id: string;
  webhookId: string;
  eventId: number;
  eventType: string;
  status: DeliveryStatus;
  attempts: number;
  nextAttemptAt: number | null;
  lastAttemptAt: number | null;
  lastStatusCode: number | null;
  lastError: string | null;
  createdAt: number;
  finishedAt: number | null;
}

const DELIVERY_COLUMNS = `id, webhook_id AS webhookId, event_id AS eventId, event_type AS eventType, status, attempts,
  next_attempt_at AS nextAttemptAt, last_attempt_at AS lastAttemptAt, last_status_code AS lastStatusCode, last_error AS lastError,
  created_at AS createdAt, finished_at AS finishedAt`;

/** A webhook's deliveries, newest first. */
export async function listDeliveries(db: Queryable, webhookId: string, page: PageQuery): Promise<RowsPage<DeliveryRow>> {
  const after = newestFirstAfter(page.after, 'created_at', 'id');
  const rows = await db.all<DeliveryRow>(
    `SELECT ${DELIVERY_COLUMNS} FROM webhook_deliveries WHERE webhook_id = ? ${after.sql} ORDER BY created_at DESC, id LIMIT ?`,
    [webhookId, ...after.args, page.limit + 1],
  );
  return cutPage(
    rows,
    page.limit,
    (row) => [row.createdAt, row.id],
    (row) => row,
  );
}

/** A journal event past the dispatcher's cursor, with one webhook that wants it (null when none does). */
export interface DispatchRow extends WorkspaceEventRow {
  /** Where the dispatcher's cursor stood when this was read. */
  cursor: number;
  webhookId: string | null;
}

/**
 * The next `limit` journal events past the dispatcher's cursor, each joined with the live
 * webhooks of its workspace that subscribe to its type and were registered (or enabled again)
 * before it (a row per pair; one row with a null webhook for an event none wants, whose data
 * is not read). A disabled webhook is not live: what happens while it is disabled is not owed
 * to it.
 * An event's data comes once, on its first row (the rows of one event are in webhook order):
 * repeated on every webhook's row, a window of 200 events of a few KB to 20 webhooks passed
 * sqld's 10 MB answer limit, and the read failed on every poll from then on.
 * One read (a SELECT: `WITH` would make the drivers treat it as a write), outside any
 * transaction: an idle poll, or events no webhook wants, take no write
 * lock until the cursor moves (docs/performance.md "On a libSQL server (sqld)").
 */
export function readDispatchWindow(db: Queryable, limit: number): Promise<DispatchRow[]> {
  return db.all<DispatchRow>(
    `SELECT d.last_event_id AS cursor, e.id, e.workspace_id AS workspaceId, e.type, e.subject_id AS subjectId,
            CASE WHEN w.id IS NULL OR row_number() OVER (PARTITION BY e.id ORDER BY w.id) > 1 THEN '' ELSE e.data END AS data,
            e.created_at AS createdAt, w.id AS webhookId
     FROM webhook_dispatch d
     JOIN (SELECT * FROM workspace_events WHERE id > (SELECT last_event_id FROM webhook_dispatch WHERE id = 1) ORDER BY id LIMIT ?) e
     LEFT JOIN webhooks w ON w.workspace_id = e.workspace_id AND w.revoked_at IS NULL AND w.disabled_at IS NULL AND w.after_event_id < e.id
       AND EXISTS (SELECT 1 FROM json_each(w.events) WHERE json_each.value = e.type)
     WHERE d.id = 1
     ORDER BY e.id, w.id`,
    [limit],
  );
}

/**
 * An event's payload, the bytes every attempt of each of its deliveries sends: written once
 * per event, in the batch that writes its deliveries (`deliveryInsert`), and kept while one of
 * them is pending, however the journal is pruned (migration 0023). Another instance that
 * dispatched the same event first wrote the same bytes.
 */
export function payloadInsert(eventId: number, payload: string): Statement {
  return { sql: 'INSERT INTO webhook_payloads (event_id, payload) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING', args: [eventId, payload] };
}

/**
 * One pending delivery of an event to a webhook, unless that webhook was revoked or disabled
 * since the window was read, or its workspace's `webhook_deliveries` budget is used up (then
 * `deliverySkipped`, next in the batch, counts it on the webhook). A (webhook, event) pair is
 * written at most once, whichever instance dispatches it: a statement for `db.batch`, after the
 * event's `payloadInsert` and with `advanceDispatchCursor`. The budget is read in the statement,
 * after the triggers counted the batch's earlier deliveries, so the workspace never stores more
 * than its budget (docs/operators/budgets.md).
 */
export function deliveryInsert(
  delivery: { id: string; webhookId: string; workspaceId: string; eventId: number; eventType: string },
  now: number,
  budget: number,
): Statement {
  return {
    sql: `INSERT INTO webhook_deliveries (id, webhook_id, workspace_id, event_id, event_type, next_attempt_at, created_at)
          SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ? AND revoked_at IS NULL AND disabled_at IS NULL)
            AND (SELECT coalesce(max(webhook_deliveries), 0) FROM workspace_usage WHERE workspace_id = ?) < ?
          ON CONFLICT (webhook_id, event_id) DO NOTHING`,
    args: [
      delivery.id,
      delivery.webhookId,
      delivery.workspaceId,
      delivery.eventId,
      delivery.eventType,
      now,
      now,
      delivery.webhookId,
      delivery.workspaceId,
      budget,
    ],
  };
}

/**
 * After `deliveryInsert` in the same batch: when it wrote nothing for a live webhook, the event
 * was skipped for the budget, and the webhook counts it and since when its events are skipped;
 * when it wrote the delivery, a run of skips ends. Only while the cursor still stands at `from`
 * (an instance that dispatched the same window first counted it). Changes the webhook's row
 * only in those two cases: a written delivery to a webhook that was not skipping costs nothing.
 */
export function deliverySkipped(delivery: { webhookId: string; eventId: number }, from: number, now: number): Statement {
  const written = 'EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = ?1 AND d.event_id = ?2)';
  return {
    sql: `UPDATE webhooks SET skipped_deliveries = skipped_deliveries + CASE WHEN ${written} THEN 0 ELSE 1 END,
            skipping_since = CASE WHEN ${written} THEN NULL ELSE coalesce(skipping_since, ?3) END
          WHERE id = ?1 AND revoked_at IS NULL AND disabled_at IS NULL AND (NOT ${written} OR skipping_since IS NOT NULL)
            AND (SELECT last_event_id FROM webhook_dispatch WHERE id = 1) = ?4`,
    args: [delivery.webhookId, delivery.eventId, now, from],
  };
}

/**
 * Marks that the owner is told of the webhook's run of skipped events, once per run: answers the
 * webhook when this call marked it (the caller writes the `webhook.skipped` event in
 * the same transaction), undefined when it is not skipping or was told of this run already.
 */
export function tellSkipping(db: Queryable, webhookId: string, now: number): Promise<WebhookRow | undefined> {
  return db.get<WebhookRow>(
    `UPDATE webhooks SET skip_told_at = ?
     WHERE id = ? AND skipping_since IS NOT NULL AND (skip_told_at IS NULL OR skip_told_at < skipping_since)
     RETURNING ${WEBHOOK_COLUMNS}`,
    [now, webhookId],
  );
}

/** Where the dispatcher stands: its cursor, the journal's newest event, and whether any webhook is live (1) or none (0). */
export interface DispatchState {
  cursor: number;
  newest: number;
  anyLive: number;
}

/** One read, outside any transaction, so that an idle poll takes no write lock (see `readDispatchWindow`). */
export async function readDispatchState(db: Queryable): Promise<DispatchState> {
  return (await db.get<DispatchState>(
    `SELECT last_event_id AS cursor, (SELECT coalesce(max(id), 0) FROM workspace_events) AS newest,
            EXISTS (SELECT 1 FROM webhooks WHERE revoked_at IS NULL AND disabled_at IS NULL) AS anyLive
     FROM webhook_dispatch WHERE id = 1`,
  ))!;
}

/**
 * Moves the dispatcher's cursor from `from` to `to` without reading the events between, while
 * no webhook is live: none of them can be owed to anyone, since a webhook registered or enabled
 * later only receives events after the newest one when it was written (`insertWebhook`,
 * `enableWebhook`). Guarded by that condition in the same statement, so a webhook that went
 * live after `readDispatchState` keeps the cursor where it is and the next poll reads the window.
 * A statement for `db.batch`, as the dispatcher's other writes: a batch holds the write lock
 * for its own transaction only, not for a commit group's whole event-loop turn.
 */
export function passOverDispatch(from: number, to: number): Statement {
  return {
    sql: `UPDATE webhook_dispatch SET last_event_id = ?
          WHERE id = 1 AND last_event_id = ? AND NOT EXISTS (SELECT 1 FROM webhooks WHERE revoked_at IS NULL AND disabled_at IS NULL)`,
    args: [to, from],
  };
}

/**
 * Moves the dispatcher's cursor from `from` to `to`; changes nothing when another instance
 * moved it first (its deliveries for these events are then the same rows: see `deliveryInsert`).
 */
export function advanceDispatchCursor(from: number, to: number): Statement {
  return { sql: 'UPDATE webhook_dispatch SET last_event_id = ? WHERE id = 1 AND last_event_id = ?', args: [to, from] };
}

/** An endpoint answered 2xx: its failure streak and backoff end. */
export async function recordEndpointSuccess(db: Queryable, webhookId: string): Promise<void> {
  await db.run('UPDATE webhooks SET failure_count = 0, failing_since = NULL, paused_until = NULL WHERE id = ? AND failure_count > 0', [webhookId]);
}

/**
 * An attempt to an enabled endpoint failed: one more in its streak, and once the streak is
 * `pauseFrom` long none of its deliveries is tried before `pausedUntil`. Answers the streak as
 * it now stands (undefined when the webhook was revoked or disabled meanwhile).
 */
export function recordEndpointFailure(
  db: Queryable,
  webhookId: string,
  now: number,
  pause: { from: number; until: number },
): Promise<{ failureCount: number; failingSince: number } | undefined> {
  return db.get(
    `UPDATE webhooks SET failure_count = failure_count + 1, failing_since = coalesce(failing_since, ?1),
       paused_until = CASE WHEN failure_count + 1 >= ?4 THEN max(coalesce(paused_until, 0), ?2) ELSE paused_until END
     WHERE id = ?3 AND revoked_at IS NULL AND disabled_at IS NULL
     RETURNING failure_count AS failureCount, failing_since AS failingSince`,
    [now, pause.until, webhookId, pause.from],
  );
}

/** Disables a live, enabled webhook with the reason shown to its owner; answers the webhook when this call disabled it. */
/**
 * Records a test send to the webhook now, if neither it was tested within `windowMs` nor its
 * workspace already had `perWorkspace` test sends in that window; 1 when recorded, 0 when refused.
 */
export async function recordTestSend(
  db: Queryable,
  workspaceId: string,
  webhookId: string,
  now: number,
  limits: { windowMs: number; perWorkspace: number },
): Promise<number> {
  const since = now - limits.windowMs;
  const result = await db.run(
    `UPDATE webhooks SET last_tested_at = ?
     WHERE workspace_id = ? AND id = ? AND (last_tested_at IS NULL OR last_tested_at <= ?)
       AND (SELECT count(*) FROM webhooks WHERE workspace_id = ? AND last_tested_at > ?) < ?`,
    [now, workspaceId, webhookId, since, workspaceId, since, limits.perWorkspace],
  );
  return result.changes;
}

export function disableWebhook(db: Queryable, webhookId: string, now: number, reason: string): Promise<WebhookRow | undefined> {
  return db.get<WebhookRow>(
    `UPDATE webhooks SET disabled_at = ?, disabled_reason = ?, paused_until = NULL
     WHERE id = ? AND revoked_at IS NULL AND disabled_at IS NULL
     RETURNING ${WEBHOOK_COLUMNS}`,
    [now, reason, webhookId],
  );
}

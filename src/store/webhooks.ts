import type { Db, Queryable, Statement } from './driver.js';
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
}

const WEBHOOK_COLUMNS = `id, workspace_id AS workspaceId, url, description, events, secret, previous_secret AS previousSecret,
  previous_secret_until AS previousSecretUntil, created_at AS createdAt, revoked_at AS revokedAt, failure_count AS failureCount,
  failing_since AS failingSince, paused_until AS pausedUntil, disabled_at AS disabledAt, disabled_reason AS disabledReason, format, chat_id AS chatId`;

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
 * since the window was read. A (webhook, event) pair is written at most once, whichever
 * instance dispatches it: a statement for `db.batch`, after the event's `payloadInsert` and
 * with `advanceDispatchCursor`.
 */
export function deliveryInsert(delivery: { id: string; webhookId: string; workspaceId: string; eventId: number; eventType: string }, now: number): Statement {
  return {
    sql: `INSERT INTO webhook_deliveries (id, webhook_id, workspace_id, event_id, event_type, next_attempt_at, created_at)
          SELECT ?, ?, ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ? AND revoked_at IS NULL AND disabled_at IS NULL)
          ON CONFLICT (webhook_id, event_id) DO NOTHING`,
    args: [delivery.id, delivery.webhookId, delivery.workspaceId, delivery.eventId, delivery.eventType, now, now, delivery.webhookId],
  };
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

/** The webhooks whose deliveries may be tried at ?1: live, enabled, and not backed off. */
const SENDABLE_WEBHOOK = 'w.revoked_at IS NULL AND w.disabled_at IS NULL AND (w.paused_until IS NULL OR w.paused_until <= ?1)';

/**
 * Whether any delivery of a sendable webhook is due at `now`: read first, so an idle poll, or
 * one with only backed-off or disabled endpoints' deliveries waiting, takes no write lock. The
 * first test, one probe of the due index, answers an idle poll without reading the webhooks.
 */
export async function hasDueDeliveries(db: Queryable, now: number): Promise<boolean> {
  const row = await db.get<{ due: number }>(
    `SELECT EXISTS (SELECT 1 FROM webhook_deliveries WHERE status = 'pending' AND next_attempt_at <= ?1)
        AND EXISTS (SELECT 1 FROM webhooks w WHERE ${SENDABLE_WEBHOOK}
          AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.id AND d.status = 'pending' AND d.next_attempt_at <= ?1)) AS due`,
    [now],
  );
  return row!.due === 1;
}

/** A claimed delivery, with what sending it needs. */
export interface ClaimedDelivery {
  id: string;
  webhookId: string;
  workspaceId: string;
  attempts: number;
  payload: string;
  url: string;
  secret: string;
  previousSecret: string | null;
  previousSecretUntil: number | null;
  /** The endpoint's failed attempts in a row when it was claimed (0: it is healthy). */
  failureCount: number;
  format: WebhookFormat;
  chatId: string | null;
  /** The sender time its workspace was charged for it at the claim (the webhook's `attempt_ms`), corrected when it ends. */
  chargedMs: number;
}

/** How many attempts may be in flight at once, across all instances. */
export interface InFlightCaps {
  perWebhook: number;
  perWorkspace: number;
}

/**
 * Claims up to `limit` due deliveries for `leaseMs`, fairly: pending, due, and not claimed by
 * anyone (or claimed by an instance whose lease ran out: it crashed or stalled), of webhooks
 * that are live, enabled and not backed off. No webhook and no workspace gets more than its cap
 * in flight, counting every instance's unexpired leases.
 *
 * The claim serves workspaces by the sender time they were charged (start-time fair queueing,
 * migration 0030): a delivery's tag is its workspace's charge, lifted to the virtual clock if
 * the workspace was idle, plus what the deliveries ahead of it in its workspace will be charged
 * (each its webhook's `attempt_ms`); the lowest tags go first. Among equal tags the workspace
 * charged least before it was lifted goes first (so a newcomer is not tied with a busy
 * workspace that a shorter attempt than charged left just below the clock), then the slot each
 * would take in its workspace (each workspace's next delivery before any one's second), then
 * how long it has been due. A workspace whose endpoints are slow is charged more per
 * delivery and so gets fewer of them; a workspace that was idle starts at the virtual clock,
 * level with the least-charged busy one, and takes the next free slot however many busy
 * workspaces there are. The charge is written in the same batch as the claim, and corrected
 * by the attempt's real duration when it ends (`recordAttempt`).
 *
 * One guarded UPDATE, so two instances never claim the same delivery at once, and each sees
 * the other's claims in the counts and the charges; the claim counts as an attempt. A
 * webhook's candidates are its oldest due deliveries, at most its cap, read from its index: a
 * backlog is not scanned.
 */
export async function claimDueDeliveries(
  db: Pick<Db, 'all' | 'batch'>,
  leaseToken: string,
  now: number,
  leaseMs: number,
  limit: number,
  caps: InFlightCaps,
): Promise<ClaimedDelivery[]> {
  const claimed = await db.all<{ id: string; webhookId: string; workspaceId: string; eventId: number; attempts: number }>(
    `UPDATE webhook_deliveries SET lease_token = ?2, lease_until = ?3, attempts = attempts + 1, last_attempt_at = ?1
     WHERE id IN (
       SELECT id FROM (
         SELECT q.id, q.next_attempt_at, q.workspace_slot, q.workspace_finish,
                q.workspace_start + coalesce(sum(q.cost) OVER (PARTITION BY q.workspace_id ORDER BY q.workspace_slot
                  ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS tag
         FROM (
           SELECT c.id, c.next_attempt_at, c.workspace_id, c.workspace_start, c.workspace_finish, c.cost,
                  c.workspace_busy + row_number() OVER (PARTITION BY c.workspace_id ORDER BY c.webhook_slot, c.next_attempt_at, c.id) AS workspace_slot
           FROM (
             SELECT d.id, d.next_attempt_at, e.workspace_id, e.workspace_busy, e.workspace_start, e.workspace_finish, e.cost,
                    e.busy + row_number() OVER (PARTITION BY e.id ORDER BY d.next_attempt_at, d.id) AS webhook_slot
             FROM (
               SELECT w.id, w.workspace_id, w.attempt_ms AS cost, coalesce(s.finish_ms, 0) AS workspace_finish,
                      max(coalesce(s.finish_ms, 0), (SELECT virtual_ms FROM webhook_dispatch WHERE id = 1)) AS workspace_start,
                      (SELECT count(*) FROM webhook_deliveries x
                        WHERE x.webhook_id = w.id AND x.status = 'pending' AND x.lease_until > ?1) AS busy,
                      (SELECT count(*) FROM webhook_deliveries x
                        WHERE x.workspace_id = w.workspace_id AND x.status = 'pending' AND x.lease_until > ?1) AS workspace_busy
               FROM webhooks w LEFT JOIN webhook_shares s ON s.workspace_id = w.workspace_id
               WHERE ${SENDABLE_WEBHOOK}
                 AND EXISTS (SELECT 1 FROM webhook_deliveries x WHERE x.webhook_id = w.id AND x.status = 'pending' AND x.next_attempt_at <= ?1)
             ) e
             JOIN webhook_deliveries d ON d.id IN (
               SELECT x.id FROM webhook_deliveries x
               WHERE x.webhook_id = e.id AND x.status = 'pending' AND x.next_attempt_at <= ?1 AND (x.lease_until IS NULL OR x.lease_until <= ?1)
               ORDER BY x.next_attempt_at LIMIT ?5)
             WHERE e.busy < ?5 AND e.workspace_busy < ?6
           ) c
           WHERE c.webhook_slot <= ?5
         ) q
         WHERE q.workspace_slot <= ?6)
       ORDER BY tag, workspace_finish, workspace_slot, next_attempt_at
       LIMIT ?4)
       AND status = 'pending' AND next_attempt_at <= ?1 AND (lease_until IS NULL OR lease_until <= ?1)
     RETURNING id, webhook_id AS webhookId, workspace_id AS workspaceId, event_id AS eventId, attempts`,
    [now, leaseToken, now + leaseMs, limit, caps.perWebhook, caps.perWorkspace],
  );
  if (claimed.length === 0) return [];
  // What sending needs, read once for all the claimed deliveries: on a libSQL server each read is a round trip.
  type Endpoint = Pick<ClaimedDelivery, 'url' | 'secret' | 'previousSecret' | 'previousSecretUntil' | 'failureCount' | 'format' | 'chatId' | 'chargedMs'> & {
    id: string;
  };
  const endpoints = await db.all<Endpoint>(
    `SELECT id, url, secret, previous_secret AS previousSecret, previous_secret_until AS previousSecretUntil, failure_count AS failureCount,
       format, chat_id AS chatId, attempt_ms AS chargedMs
     FROM webhooks WHERE id IN (SELECT value FROM json_each(?))`,
    [JSON.stringify([...new Set(claimed.map((row) => row.webhookId))])],
  );
  const webhooks = new Map(endpoints.map(({ id, ...endpoint }) => [id, endpoint]));
  const charges = new Map<string, number>();
  for (const row of claimed) charges.set(row.workspaceId, (charges.get(row.workspaceId) ?? 0) + (webhooks.get(row.webhookId)?.chargedMs ?? 0));
  await db.batch(chargeWorkspaces([...charges]));
  const stored = await db.all<{ eventId: number; payload: string }>(
    'SELECT event_id AS eventId, payload FROM webhook_payloads WHERE event_id IN (SELECT value FROM json_each(?))',
    [JSON.stringify([...new Set(claimed.map((row) => row.eventId))])],
  );
  const payloads = new Map(stored.map((row) => [row.eventId, row.payload]));
  return claimed
    .filter((row) => webhooks.has(row.webhookId) && payloads.has(row.eventId))
    .map(({ eventId, ...row }) => ({ ...row, ...webhooks.get(row.webhookId)!, payload: payloads.get(eventId)! }));
}

/**
 * Charges each claimed workspace what its claimed deliveries are expected to take, from where
 * it stood (or from the virtual clock, if it was idle and so behind it), and moves the virtual
 * clock to the latest start among them: every delivery still waiting has a tag at least that
 * high, so a workspace that comes along now is served before any of them. Additive, so two
 * instances charging at once both count.
 */
function chargeWorkspaces(charges: readonly (readonly [workspaceId: string, ms: number])[]): Statement[] {
  const clock = '(SELECT virtual_ms FROM webhook_dispatch WHERE id = 1)';
  return [
    ...charges.map(([workspaceId, ms]) => ({
      sql: `INSERT INTO webhook_shares (workspace_id, finish_ms) VALUES (?1, ${clock} + ?2)
            ON CONFLICT (workspace_id) DO UPDATE SET finish_ms = max(finish_ms + ?2, excluded.finish_ms)`,
      args: [workspaceId, ms],
    })),
    {
      sql: `UPDATE webhook_dispatch SET virtual_ms = max(virtual_ms, coalesce((
              SELECT max(s.finish_ms - json_extract(j.value, '$[1]')) FROM json_each(?) j
              JOIN webhook_shares s ON s.workspace_id = json_extract(j.value, '$[0]')), 0))
            WHERE id = 1`,
      args: [JSON.stringify(charges)],
    },
  ];
}

/**
 * Records an attempt's outcome under the claim that made it (a claim that expired and was
 * taken over records nothing): `delivered`, `failed` for good, or pending again at `nextAttemptAt`.
 * In the same batch, the sender time it took: its workspace's charge is corrected from the
 * estimate charged at the claim to `tookMs`, and the webhook's running average moves halfway
 * towards it, so an endpoint that turns slow is charged as slow from its next claim on.
 */
export async function recordAttempt(
  db: Pick<Db, 'batch'>,
  claim: { id: string; leaseToken: string; webhookId: string; workspaceId: string; chargedMs: number },
  outcome: {
    status: 'delivered' | 'failed' | 'pending';
    statusCode: number | null;
    error: string | null;
    nextAttemptAt: number | null;
    now: number;
    tookMs: number;
  },
): Promise<boolean> {
  const finished = outcome.status === 'pending' ? null : outcome.now;
  const took = Math.max(0, Math.round(outcome.tookMs));
  const [recorded] = await db.batch([
    {
      sql: `UPDATE webhook_deliveries SET status = ?, last_status_code = ?, last_error = ?, next_attempt_at = ?, finished_at = ?,
              lease_token = NULL, lease_until = NULL
            WHERE id = ? AND status = 'pending' AND lease_token = ?`,
      args: [outcome.status, outcome.statusCode, outcome.error, outcome.nextAttemptAt, finished, claim.id, claim.leaseToken],
    },
    { sql: 'UPDATE webhook_shares SET finish_ms = finish_ms + ? WHERE workspace_id = ?', args: [took - claim.chargedMs, claim.workspaceId] },
    { sql: 'UPDATE webhooks SET attempt_ms = (attempt_ms + ?) / 2 WHERE id = ?', args: [took, claim.webhookId] },
  ]);
  return recorded!.changes === 1;
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

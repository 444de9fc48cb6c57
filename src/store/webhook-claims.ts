/**
 * The webhook sender's claims (src/domain/webhook-delivery.ts): which due deliveries an instance
 * takes next, fairly across workspaces (migration 0023's caps, migration 0030's sender-time
 * shares), and the record of each attempt with the time it took.
 */
import type { Db, Queryable, Statement } from './driver.js';
import type { WebhookFormat } from './webhooks.js';

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

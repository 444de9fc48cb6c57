import { ACTION_STATES, ACTION_STATUSES } from '../domain/action-states.js';
import { statusIn } from './actions.js';
import type { Queryable } from './driver.js';

/**
 * Deletes of the housekeeping sweep (src/domain/housekeeping.ts): rows that can no longer
 * mean anything, at most `limit` per statement so that each write transaction stays short
 * and requests interleave with a large cleanup. `rowid IN (… LIMIT ?)` because SQLite's
 * `DELETE … LIMIT` is a compile-time option that libSQL builds need not have.
 */
const STATEMENTS = {
  /** Authorization codes past `before` (the sweep passes expiry minus a replay-detection grace). */
  oauthCodes: 'DELETE FROM oauth_codes WHERE rowid IN (SELECT rowid FROM oauth_codes WHERE expires_at <= ? LIMIT ?)',
  /** Access and refresh tokens past their expiry: live, rotated and revoked alike. */
  oauthTokens: 'DELETE FROM oauth_tokens WHERE rowid IN (SELECT rowid FROM oauth_tokens WHERE expires_at <= ? LIMIT ?)',
  /** Consent-page sessions past their expiry. */
  ownerSessions: 'DELETE FROM owner_sessions WHERE rowid IN (SELECT rowid FROM owner_sessions WHERE expires_at <= ? LIMIT ?)',
  /** Wake-channel tickets used once already or past their 30 s. */
  eventTickets: 'DELETE FROM event_tickets WHERE rowid IN (SELECT rowid FROM event_tickets WHERE used_at IS NOT NULL OR expires_at <= ? LIMIT ?)',
  /**
   * OAuth clients no owner ever approved (no connection uses them): dynamic registrations made
   * at or before `before`, and cached client metadata documents stale since then.
   */
  unapprovedClients: `DELETE FROM oauth_clients WHERE rowid IN (
     SELECT c.rowid FROM oauth_clients c
      WHERE ((c.source = 'dynamic' AND c.created_at <= ?1) OR (c.source = 'metadata-document' AND c.fresh_until <= ?1))
        AND NOT EXISTS (SELECT 1 FROM connections k WHERE k.oauth_client = c.id)
      LIMIT ?2)`,
  /**
   * Owner events (the workspace event journal) written at or before `before`, the start of
   * the replay window; oldest ids first, so what is kept is always the journal's newest part
   * (a resumption from before it learns that events were lost: docs/reference/events.md "Owner events").
   * Ids grow with time, so the batch is the oldest ids' due rows, read in rowid order: the
   * journal keeps no index on `created_at` (migration 0021), every journal row would pay for it.
   * Deleting the newest row leaves a tombstone in its place, so its id is never given again
   * (migration 0022); a tombstone goes once a newer row exists, and is otherwise left alone
   * (deleting it would only put it back). docs/reference/events.md "Owner events".
   */
  workspaceEvents: `DELETE FROM workspace_events WHERE id IN (SELECT id FROM workspace_events ORDER BY id LIMIT ?2) AND created_at <= ?1
     AND (workspace_id <> '' OR id < (SELECT max(id) FROM workspace_events))`,
  /** Idempotency records created at or before `before` (the end of their replay window). */
  idempotencyKeys: 'DELETE FROM idempotency_keys WHERE rowid IN (SELECT rowid FROM idempotency_keys WHERE created_at <= ? LIMIT ?)',
  /** Webhook deliveries finished (delivered, failed or cancelled) at or before `before`. */
  webhookDeliveries: `DELETE FROM webhook_deliveries WHERE rowid IN (SELECT rowid FROM webhook_deliveries WHERE status <> 'pending' AND finished_at <= ? LIMIT ?)`,
  /**
   * Webhook payloads of events none of whose deliveries is pending any more (migration 0023):
   * a payload goes as soon as its last delivery finished, so `before` plays no part (the
   * `?1 IS NOT NULL` only takes the argument every statement here is given).
   */
  webhookPayloads: `DELETE FROM webhook_payloads WHERE event_id IN (
     SELECT p.event_id FROM webhook_payloads p
      WHERE ?1 IS NOT NULL AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = p.event_id AND d.status = 'pending') LIMIT ?2)`,
  /** Webhooks revoked at or before `before` whose deliveries are all gone. */
  revokedWebhooks: `DELETE FROM webhooks WHERE rowid IN (
     SELECT w.rowid FROM webhooks w WHERE w.revoked_at <= ?1 AND NOT EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.webhook_id = w.id) LIMIT ?2)`,
} as const;

export type SweptKind = keyof typeof STATEMENTS;
export const SWEPT_KINDS = Object.keys(STATEMENTS) as SweptKind[];

/** Deletes one batch of `kind` due at or before `before`; returns how many rows went. */
export async function deleteDueBatch(db: Queryable, kind: SweptKind, before: number, limit: number): Promise<number> {
  return (await db.run(STATEMENTS[kind], [before, limit])).changes;
}

const FINISHED = statusIn(ACTION_STATUSES.filter((status) => ACTION_STATES[status].terminal));

/**
 * Workspaces holding a finished action requested at or before `before` (ACTIONS_RETENTION_DAYS):
 * one seek of the history index (`actions_history`, workspace and time) per workspace that
 * stores actions. Actions are swept per workspace because only that index orders them by time;
 * one across all workspaces would cost every action request an index entry more.
 */
export async function workspacesWithExpiredActions(db: Queryable, before: number): Promise<string[]> {
  const rows = await db.all<{ workspaceId: string }>(
    `SELECT u.workspace_id AS workspaceId FROM workspace_usage u
      WHERE u.actions > 0 AND EXISTS (SELECT 1 FROM actions a WHERE a.workspace_id = u.workspace_id AND a.created_at <= ? AND ${FINISHED})`,
    [before],
  );
  return rows.map((row) => row.workspaceId);
}

/**
 * Deletes at most `limit` of the workspace's finished actions requested at or before
 * `before`, oldest first; an action still waiting, queued or handed out stays however old it
 * is, so a device can always report the result of a command it holds.
 */
export async function deleteExpiredActionsBatch(db: Queryable, workspaceId: string, before: number, limit: number): Promise<number> {
  return (
    await db.run(
      `DELETE FROM actions WHERE rowid IN (
         SELECT rowid FROM actions WHERE workspace_id = ?1 AND created_at <= ?2 AND ${FINISHED} ORDER BY created_at LIMIT ?3)`,
      [workspaceId, before, limit],
    )
  ).changes;
}

-- Webhooks for owners who are not looking (docs/owners/webhooks.md). An owner registers an
-- HTTPS URL and the event types it wants; events of the workspace journal (migration 0016)
-- are delivered to it from a durable outbox, signed with the webhook's secret.
--
-- `secret` is kept in clear: each delivery is signed with it (an HMAC needs the key itself).
-- `previous_secret` stays valid until `previous_secret_until` after a rotation, and deliveries
-- carry a signature with each. `events` is a JSON array of event types. `after_event_id` is the
-- newest journal event when the webhook was created: only later events are delivered to it.
CREATE TABLE webhooks (
  id                    TEXT PRIMARY KEY,
  workspace_id          TEXT NOT NULL,
  url                   TEXT NOT NULL,
  description           TEXT,
  events                TEXT NOT NULL,
  secret                TEXT NOT NULL,
  previous_secret       TEXT,
  previous_secret_until INTEGER,
  after_event_id        INTEGER NOT NULL,
  created_by            TEXT NOT NULL,
  created_at            INTEGER NOT NULL,
  revoked_at            INTEGER
);
CREATE INDEX webhooks_by_workspace ON webhooks (workspace_id, created_at DESC, id);

-- The outbox: one row per (webhook, event), written by the dispatcher, sent by whichever
-- instance claims it (`lease_token` and `lease_until`: a claim expires, so a crashed
-- instance's deliveries are sent again). `payload` is the event as sent, kept so that every
-- attempt sends the same bytes even after the journal has been pruned.
-- status: pending → delivered | failed | cancelled (webhook revoked).
CREATE TABLE webhook_deliveries (
  id               TEXT PRIMARY KEY,
  webhook_id       TEXT NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
  workspace_id     TEXT NOT NULL,
  event_id         INTEGER NOT NULL,
  event_type       TEXT NOT NULL,
  payload          TEXT NOT NULL,
  status           TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed', 'cancelled')),
  attempts         INTEGER NOT NULL DEFAULT 0,
  next_attempt_at  INTEGER,
  lease_token      TEXT,
  lease_until      INTEGER,
  last_attempt_at  INTEGER,
  last_status_code INTEGER,
  last_error       TEXT,
  created_at       INTEGER NOT NULL,
  finished_at      INTEGER,
  UNIQUE (webhook_id, event_id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, created_at DESC, id);
CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (finished_at) WHERE status <> 'pending';

-- How far the dispatcher has read the journal: one row, moved forward with a guarded UPDATE so
-- that two instances never both advance it from the same place. It starts at the journal's end:
-- events from before webhooks existed are never delivered.
CREATE TABLE webhook_dispatch (
  id            INTEGER PRIMARY KEY CHECK (id = 1),
  last_event_id INTEGER NOT NULL
);
INSERT INTO webhook_dispatch (id, last_event_id) SELECT 1, coalesce(max(id), 0) FROM workspace_events;

-- Webhook delivery that one workspace cannot starve, and an event's payload stored once for all
-- its deliveries (docs/owners/webhooks.md).
--
-- Payloads. Migration 0019 copied the event into every delivery row, so that every attempt sends
-- the same bytes even after the journal has been pruned: an action with 14 KB of arguments took
-- 65 KiB without webhooks and 889 KiB with 20. The payload now has a row of its own per event,
-- written by the dispatcher in the batch that writes the event's deliveries, and kept while any
-- delivery of the event is pending (housekeeping deletes it afterwards): the same guarantee,
-- once per event. Journal ids are never given twice (migration 0022), so the event id is a key.
-- Pending deliveries carry their payload across; finished ones never send again.
CREATE TABLE webhook_payloads (
  event_id INTEGER PRIMARY KEY,
  payload  TEXT NOT NULL
);
INSERT INTO webhook_payloads (event_id, payload)
SELECT event_id, min(payload) FROM webhook_deliveries WHERE status = 'pending' GROUP BY event_id;
ALTER TABLE webhook_deliveries DROP COLUMN payload;
-- Housekeeping asks, per payload, whether a delivery still needs it.
CREATE INDEX webhook_deliveries_pending_by_event ON webhook_deliveries (event_id) WHERE status = 'pending';

-- Fairness. A claim takes a webhook's oldest due deliveries, and counts what each webhook and
-- each workspace has in flight (a lease not run out) on every instance, to hold both to a cap.
CREATE INDEX webhook_deliveries_due_by_webhook ON webhook_deliveries (webhook_id, next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_leased_by_webhook ON webhook_deliveries (webhook_id, lease_until) WHERE status = 'pending' AND lease_until IS NOT NULL;
CREATE INDEX webhook_deliveries_leased_by_workspace ON webhook_deliveries (workspace_id, lease_until) WHERE status = 'pending' AND lease_until IS NOT NULL;

-- An endpoint's health. `failure_count` attempts in a row have failed since `failing_since`;
-- none of its deliveries is tried before `paused_until` (the backoff). Once the streak passes
-- the thresholds the webhook is disabled: `disabled_at` and `disabled_reason` until the owner
-- enables it again. Any 2xx ends the streak.
ALTER TABLE webhooks ADD COLUMN failure_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN failing_since INTEGER;
ALTER TABLE webhooks ADD COLUMN paused_until INTEGER;
ALTER TABLE webhooks ADD COLUMN disabled_at INTEGER;
ALTER TABLE webhooks ADD COLUMN disabled_reason TEXT;

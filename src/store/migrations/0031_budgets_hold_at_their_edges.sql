-- Storage budgets that hold at their edges (docs/operators/budgets.md "How the check is made,
-- and its bound").
--
-- Results reserved at creation. A device's result was never refused and came after the action
-- was accepted, so sixty tiny actions accepted just under `action_bytes` took the workspace to
-- four times it once their devices reported 15 kB each. An action now reserves, when it is
-- created, room for what may still be written into it: its device's result or error message and
-- the owner's decision reason (`reserved_bytes`, set by the insert). The reservation counts in
-- `action_bytes` like the bytes it stands for; a decision reason takes its bytes out of it, and
-- it is given back whole once nothing more can be written: the action succeeded or failed, was
-- rejected or cancelled, expired before any device fetched it, or its late result arrived.
-- Rows from before this migration reserve nothing.
ALTER TABLE actions ADD COLUMN reserved_bytes INTEGER NOT NULL DEFAULT 0;

DROP TRIGGER actions_usage_insert;
CREATE TRIGGER actions_usage_insert AFTER INSERT ON actions
BEGIN
  INSERT INTO workspace_usage (workspace_id, actions, action_bytes)
  VALUES (NEW.workspace_id, 1, length(CAST(NEW.arguments AS BLOB)) + coalesce(length(CAST(NEW.result AS BLOB)), 0)
    + coalesce(length(CAST(NEW.error_message AS BLOB)), 0) + coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0) + NEW.reserved_bytes)
  ON CONFLICT (workspace_id) DO UPDATE SET actions = actions + 1, action_bytes = action_bytes + excluded.action_bytes;
END;

DROP TRIGGER actions_usage_delete;
CREATE TRIGGER actions_usage_delete AFTER DELETE ON actions
BEGIN
  UPDATE workspace_usage SET actions = actions - 1, action_bytes = action_bytes
    - length(CAST(OLD.arguments AS BLOB)) - coalesce(length(CAST(OLD.result AS BLOB)), 0)
    - coalesce(length(CAST(OLD.error_message AS BLOB)), 0) - coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0)
    - OLD.reserved_bytes
  WHERE workspace_id = OLD.workspace_id;
END;

CREATE TRIGGER actions_usage_reserved AFTER UPDATE OF reserved_bytes ON actions
WHEN NEW.reserved_bytes <> OLD.reserved_bytes
BEGIN
  UPDATE workspace_usage SET action_bytes = action_bytes + NEW.reserved_bytes - OLD.reserved_bytes WHERE workspace_id = NEW.workspace_id;
END;

-- Fires on every move, but does its work only for the few that end what may be written.
CREATE TRIGGER actions_reservation_released AFTER UPDATE OF status, reported_late_at ON actions
WHEN NEW.reserved_bytes > 0 AND (NEW.status IN ('succeeded', 'failed', 'rejected', 'cancelled')
  OR (NEW.status = 'expired' AND (NEW.dispatched_at IS NULL OR NEW.reported_late_at IS NOT NULL)))
BEGIN
  UPDATE actions SET reserved_bytes = 0 WHERE id = NEW.id;
END;

CREATE TRIGGER actions_reservation_decided AFTER UPDATE OF decision_reason ON actions
WHEN NEW.reserved_bytes > 0
BEGIN
  UPDATE actions SET reserved_bytes = max(0, reserved_bytes - coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0)
    + coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0))
  WHERE id = NEW.id;
END;

-- Deliveries past the budget are not written. A webhook owed an event while its workspace's
-- `webhook_deliveries` budget is used up gets no delivery row; instead it counts what it missed
-- (`skipped_deliveries`) since when (`skipping_since`, cleared by its next written delivery),
-- and its owner is told once per such run, with a `webhook.skipped` event
-- (`skip_told_at`: when the owner was last told).
ALTER TABLE webhooks ADD COLUMN skipped_deliveries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN skipping_since INTEGER;
ALTER TABLE webhooks ADD COLUMN skip_told_at INTEGER;

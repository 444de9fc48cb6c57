-- Storage budgets per workspace (docs/operators/budgets.md): what each workspace makes the service
-- store, counted as it is written and deleted, so that the request that would exceed a budget
-- reads one row by key instead of summing the workspace's history.
--
-- The counters are kept by triggers, inside the statement that writes or deletes the row, so
-- they can never drift from the rows (a rolled-back write rolls its count back too) and every
-- writer — the guarded action insert, a device's result, the journal triggers, the webhook
-- dispatcher, housekeeping — counts without knowing about it.
--
--   actions             action rows, whatever their status
--   action_bytes        bytes a caller chose in them: arguments, result, error message, decision reason
--   event_bytes         bytes of the workspace's journal events (`data`)
--   webhook_deliveries  webhook delivery rows, pending or finished
--
-- Bytes are UTF-8 bytes (`length(CAST(… AS BLOB))`), not characters.
CREATE TABLE workspace_usage (
  workspace_id       TEXT PRIMARY KEY,
  actions            INTEGER NOT NULL DEFAULT 0,
  action_bytes       INTEGER NOT NULL DEFAULT 0,
  event_bytes        INTEGER NOT NULL DEFAULT 0,
  webhook_deliveries INTEGER NOT NULL DEFAULT 0
);

INSERT INTO workspace_usage (workspace_id) SELECT DISTINCT workspace_id FROM actions
UNION SELECT DISTINCT workspace_id FROM workspace_events WHERE workspace_id <> ''
UNION SELECT DISTINCT workspace_id FROM webhook_deliveries;

UPDATE workspace_usage SET
  actions = (SELECT count(*) FROM actions a WHERE a.workspace_id = workspace_usage.workspace_id),
  action_bytes = (SELECT coalesce(sum(length(CAST(a.arguments AS BLOB)) + coalesce(length(CAST(a.result AS BLOB)), 0)
      + coalesce(length(CAST(a.error_message AS BLOB)), 0) + coalesce(length(CAST(a.decision_reason AS BLOB)), 0)), 0)
    FROM actions a WHERE a.workspace_id = workspace_usage.workspace_id),
  event_bytes = (SELECT coalesce(sum(length(CAST(e.data AS BLOB))), 0) FROM workspace_events e WHERE e.workspace_id = workspace_usage.workspace_id),
  webhook_deliveries = (SELECT count(*) FROM webhook_deliveries d WHERE d.workspace_id = workspace_usage.workspace_id);

CREATE TRIGGER actions_usage_insert AFTER INSERT ON actions
BEGIN
  INSERT INTO workspace_usage (workspace_id, actions, action_bytes)
  VALUES (NEW.workspace_id, 1, length(CAST(NEW.arguments AS BLOB)) + coalesce(length(CAST(NEW.result AS BLOB)), 0)
    + coalesce(length(CAST(NEW.error_message AS BLOB)), 0) + coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0))
  ON CONFLICT (workspace_id) DO UPDATE SET actions = actions + 1, action_bytes = action_bytes + excluded.action_bytes;
END;

-- A result, an error or a decision reason written later: only the difference counts. Fires
-- only for statements that set one of these columns (results and decisions), never for the
-- hand-out or the expiry sweep.
CREATE TRIGGER actions_usage_update AFTER UPDATE OF arguments, result, error_message, decision_reason ON actions
BEGIN
  UPDATE workspace_usage SET action_bytes = action_bytes
    + length(CAST(NEW.arguments AS BLOB)) + coalesce(length(CAST(NEW.result AS BLOB)), 0)
    + coalesce(length(CAST(NEW.error_message AS BLOB)), 0) + coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0)
    - length(CAST(OLD.arguments AS BLOB)) - coalesce(length(CAST(OLD.result AS BLOB)), 0)
    - coalesce(length(CAST(OLD.error_message AS BLOB)), 0) - coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0)
  WHERE workspace_id = NEW.workspace_id;
END;

CREATE TRIGGER actions_usage_delete AFTER DELETE ON actions
BEGIN
  UPDATE workspace_usage SET actions = actions - 1, action_bytes = action_bytes
    - length(CAST(OLD.arguments AS BLOB)) - coalesce(length(CAST(OLD.result AS BLOB)), 0)
    - coalesce(length(CAST(OLD.error_message AS BLOB)), 0) - coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0)
  WHERE workspace_id = OLD.workspace_id;
END;

-- Tombstones (workspace id '', migration 0022) belong to no workspace and count nowhere.
CREATE TRIGGER workspace_events_usage_insert AFTER INSERT ON workspace_events
WHEN NEW.workspace_id <> ''
BEGIN
  INSERT INTO workspace_usage (workspace_id, event_bytes) VALUES (NEW.workspace_id, length(CAST(NEW.data AS BLOB)))
  ON CONFLICT (workspace_id) DO UPDATE SET event_bytes = event_bytes + excluded.event_bytes;
END;

CREATE TRIGGER workspace_events_usage_delete AFTER DELETE ON workspace_events
WHEN OLD.workspace_id <> ''
BEGIN
  UPDATE workspace_usage SET event_bytes = event_bytes - length(CAST(OLD.data AS BLOB)) WHERE workspace_id = OLD.workspace_id;
END;

CREATE TRIGGER webhook_deliveries_usage_insert AFTER INSERT ON webhook_deliveries
BEGIN
  INSERT INTO workspace_usage (workspace_id, webhook_deliveries) VALUES (NEW.workspace_id, 1)
  ON CONFLICT (workspace_id) DO UPDATE SET webhook_deliveries = webhook_deliveries + 1;
END;

CREATE TRIGGER webhook_deliveries_usage_delete AFTER DELETE ON webhook_deliveries
BEGIN
  UPDATE workspace_usage SET webhook_deliveries = webhook_deliveries - 1 WHERE workspace_id = OLD.workspace_id;
END;

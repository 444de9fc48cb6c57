-- Device state (docs/devices/state.md): a read function may declare the JSON Schema of the
-- result its device reports, and each device keeps one last-known value per read function,
-- written by its latest successful action (source `result`) or by the device on its own
-- (`POST /v1/device/{deviceId}/state`, source `report`).
ALTER TABLE capabilities ADD COLUMN result TEXT; -- JSON Schema of the result object, as published; NULL when none is declared

CREATE TABLE device_state (
  device_id    TEXT NOT NULL REFERENCES devices(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  capability   TEXT NOT NULL,
  value        TEXT NOT NULL,                   -- JSON, as stored for a result
  source       TEXT NOT NULL CHECK (source IN ('result', 'report')),
  action_id    TEXT,                            -- the action whose result it is; NULL for a report
  reported_at  INTEGER NOT NULL,
  changed_at   INTEGER NOT NULL,                -- when the value last differed from the one before
  PRIMARY KEY (device_id, capability)
) WITHOUT ROWID;
CREATE INDEX device_state_by_workspace ON device_state (workspace_id);

-- A successful action of a read function is its last-known value, in the statement that
-- records the result: a result costs no write more. An equal value only moves reported_at.
CREATE TRIGGER actions_result_is_state AFTER UPDATE OF status ON actions
WHEN NEW.status = 'succeeded' AND OLD.status <> 'succeeded' AND NEW.result IS NOT NULL
  AND EXISTS (SELECT 1 FROM capabilities c WHERE c.device_id = NEW.device_id AND c.name = NEW.capability AND c.kind = 'read')
BEGIN
  INSERT INTO device_state (device_id, workspace_id, capability, value, source, action_id, reported_at, changed_at)
  VALUES (NEW.device_id, NEW.workspace_id, NEW.capability, NEW.result, 'result', NEW.id, NEW.completed_at, NEW.completed_at)
  ON CONFLICT (device_id, capability) DO UPDATE SET
    changed_at = CASE WHEN device_state.value = excluded.value THEN device_state.changed_at ELSE excluded.reported_at END,
    value = excluded.value, source = excluded.source, action_id = excluded.action_id, reported_at = excluded.reported_at;
END;

-- Values count in the workspace's `action_bytes` (docs/operators/budgets.md): bytes a caller chose.
CREATE TRIGGER device_state_usage_insert AFTER INSERT ON device_state
BEGIN
  INSERT INTO workspace_usage (workspace_id, action_bytes) VALUES (NEW.workspace_id, length(CAST(NEW.value AS BLOB)))
  ON CONFLICT (workspace_id) DO UPDATE SET action_bytes = action_bytes + excluded.action_bytes;
END;

CREATE TRIGGER device_state_usage_update AFTER UPDATE OF value ON device_state
BEGIN
  UPDATE workspace_usage SET action_bytes = action_bytes + length(CAST(NEW.value AS BLOB)) - length(CAST(OLD.value AS BLOB))
  WHERE workspace_id = NEW.workspace_id;
END;

CREATE TRIGGER device_state_usage_delete AFTER DELETE ON device_state
BEGIN
  UPDATE workspace_usage SET action_bytes = action_bytes - length(CAST(OLD.value AS BLOB)) WHERE workspace_id = OLD.workspace_id;
END;

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
  event_at     INTEGER NOT NULL,                -- when its latest device.state_changed was journalled
  event_pending INTEGER NOT NULL DEFAULT 0,     -- 1: a change came within a second of event_at, its event is owed
  PRIMARY KEY (device_id, capability)
) WITHOUT ROWID;
CREATE INDEX device_state_by_workspace ON device_state (workspace_id);
-- The sweep that journals owed events (src/store/device-state.ts flushOwedStateEvents) reads only these.
CREATE INDEX device_state_owed ON device_state (event_at) WHERE event_pending = 1;

-- device.state_changed, at most one per device and function per second, the latest value
-- winning: a first value is journalled at once; a later write moves event_at (and so journals)
-- only when the value changed, or a change is owed, a second or more after the last event;
-- a change within that second only marks the event owed, for the next write or the sweep.
CREATE TRIGGER device_state_journal_insert AFTER INSERT ON device_state
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'device.state_changed', NEW.device_id, json_object(
    'deviceId', NEW.device_id, 'capability', NEW.capability, 'value', json(NEW.value), 'reportedAt', NEW.reported_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER device_state_journal_update AFTER UPDATE OF event_at ON device_state
WHEN NEW.event_at IS NOT OLD.event_at
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'device.state_changed', NEW.device_id, json_object(
    'deviceId', NEW.device_id, 'capability', NEW.capability, 'value', json(NEW.value), 'reportedAt', NEW.reported_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

-- A successful action of a read function is its last-known value, in the statement that
-- records the result: a result costs no write more. An equal value only moves reported_at.
CREATE TRIGGER actions_result_is_state AFTER UPDATE OF status ON actions
WHEN NEW.status = 'succeeded' AND OLD.status <> 'succeeded' AND NEW.result IS NOT NULL
  AND EXISTS (SELECT 1 FROM capabilities c WHERE c.device_id = NEW.device_id AND c.name = NEW.capability AND c.kind = 'read')
BEGIN
  INSERT INTO device_state (device_id, workspace_id, capability, value, source, action_id, reported_at, changed_at, event_at)
  VALUES (NEW.device_id, NEW.workspace_id, NEW.capability, NEW.result, 'result', NEW.id, NEW.completed_at, NEW.completed_at, NEW.completed_at)
  ON CONFLICT (device_id, capability) DO UPDATE SET
    changed_at = CASE WHEN device_state.value = excluded.value THEN device_state.changed_at ELSE excluded.reported_at END,
    event_pending = CASE WHEN (device_state.value <> excluded.value OR device_state.event_pending = 1)
      AND excluded.reported_at - device_state.event_at < 1000 THEN 1 ELSE 0 END,
    event_at = CASE WHEN (device_state.value <> excluded.value OR device_state.event_pending = 1)
      AND excluded.reported_at - device_state.event_at >= 1000 THEN excluded.reported_at ELSE device_state.event_at END,
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

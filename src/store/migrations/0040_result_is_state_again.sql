-- Migration 0039 rebuilt the actions table (to widen its status CHECK) from a schema that did
-- not yet hold 0034's trigger, and a dropped table takes its triggers with it: a read's
-- successful result stopped becoming its function's last-known value. The trigger again, as
-- 0034 wrote it (docs/devices/state.md).
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

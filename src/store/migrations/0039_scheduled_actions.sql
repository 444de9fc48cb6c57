-- Scheduled actions (docs/agents/actions.md "Scheduling"): an action asked for with `notBefore`
-- in the future is created `scheduled` and becomes `queued` (or `awaiting_approval`) when due.
-- The status CHECK must accept it, and SQLite cannot alter a CHECK, so the table is rebuilt as
-- 0017 did: nothing references `actions`, rowid is kept (it orders actions created in the same
-- millisecond), and every index and trigger is created again as the earlier migrations left it.
--
-- New column:
--   not_before  when a scheduled action becomes due (Unix ms); NULL for one queued at once.
-- The journal snapshots carry it as `notBefore`.

CREATE TABLE actions_new (
  id                  TEXT PRIMARY KEY,
  workspace_id        TEXT NOT NULL REFERENCES workspaces(id),
  device_id           TEXT NOT NULL REFERENCES devices(id),
  target_id           TEXT NOT NULL REFERENCES devices(id), -- who fetches it: the device, or a child's gateway
  capability          TEXT NOT NULL,
  arguments           TEXT NOT NULL,                        -- JSON
  status              TEXT NOT NULL CHECK (status IN ('scheduled', 'awaiting_approval', 'queued', 'received', 'succeeded', 'failed', 'rejected', 'cancelled', 'expired')),
  principal           TEXT NOT NULL,
  broadcast_id        TEXT,
  created_at          INTEGER NOT NULL,
  expires_at          INTEGER NOT NULL,
  dispatched_at       INTEGER,
  completed_at        INTEGER,
  result              TEXT,                                 -- JSON reported by the device
  error_code          TEXT,
  error_message       TEXT,
  connection_id       TEXT REFERENCES connections(id),
  cancel_reason       TEXT,
  cancel_requested_at INTEGER,
  reported_late_at    INTEGER,
  approval            TEXT NOT NULL DEFAULT 'none' CHECK (approval IN ('none', 'owner', 'user')),
  approval_expires_at INTEGER,
  ttl_seconds         INTEGER,
  decided_by          TEXT,
  decided_at          INTEGER,
  decision_reason     TEXT,
  expired_reason      TEXT CHECK (expired_reason IN ('deadline', 'approval_timeout')),
  reserved_bytes      INTEGER NOT NULL DEFAULT 0,
  allowed_until       INTEGER,
  not_before          INTEGER
);

-- rowid is kept: it orders actions created in the same millisecond (src/store/actions.ts paging).
INSERT INTO actions_new (rowid, id, workspace_id, device_id, target_id, capability, arguments, status, principal, broadcast_id, created_at, expires_at, dispatched_at, completed_at, result, error_code, error_message, connection_id, cancel_reason, cancel_requested_at, reported_late_at, approval, approval_expires_at, ttl_seconds, decided_by, decided_at, decision_reason, expired_reason, reserved_bytes, allowed_until)
SELECT rowid, id, workspace_id, device_id, target_id, capability, arguments, status, principal, broadcast_id, created_at, expires_at, dispatched_at, completed_at, result, error_code, error_message, connection_id, cancel_reason, cancel_requested_at, reported_late_at, approval, approval_expires_at, ttl_seconds, decided_by, decided_at, decision_reason, expired_reason, reserved_bytes, allowed_until
FROM actions;

DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;

-- Every index, as the earlier migrations left them.
CREATE INDEX actions_history ON actions (workspace_id, created_at);
CREATE INDEX actions_by_principal ON actions (workspace_id, principal, created_at);
CREATE INDEX actions_by_device_history ON actions (device_id, created_at);
CREATE INDEX actions_by_grant_function ON actions (workspace_id, principal, device_id, capability, created_at);
CREATE INDEX actions_queued_by_target ON actions (target_id, created_at) WHERE status = 'queued';
CREATE INDEX actions_queued_by_workspace ON actions (workspace_id) WHERE status = 'queued';
CREATE INDEX actions_queued_by_device ON actions (device_id, principal) WHERE status = 'queued';
CREATE INDEX actions_received_by_device ON actions (device_id) WHERE status = 'received';
CREATE INDEX actions_recalled_by_target ON actions (target_id) WHERE cancel_requested_at IS NOT NULL AND status = 'received';
CREATE INDEX actions_awaiting_by_workspace ON actions (workspace_id, created_at) WHERE status = 'awaiting_approval';
CREATE INDEX actions_awaiting_by_device ON actions (device_id, principal) WHERE status = 'awaiting_approval';
-- The deadline sweep also ends a scheduled action whose deadline passed before it could be made
-- due (the service was down all that time): its WHERE is the `expire` move's guard.
CREATE INDEX actions_live_by_deadline ON actions (expires_at) WHERE status IN ('scheduled', 'awaiting_approval', 'queued', 'received');
-- The due step reads the earliest scheduled actions: one indexed read per instance, however many wait.
CREATE INDEX actions_scheduled_by_due ON actions (not_before) WHERE status = 'scheduled';
-- The workspace's limit on scheduled actions, and the withdrawals that cancel them like queued ones.
CREATE INDEX actions_scheduled_by_workspace ON actions (workspace_id) WHERE status = 'scheduled';
CREATE INDEX actions_scheduled_by_device ON actions (device_id, principal) WHERE status = 'scheduled';
CREATE INDEX actions_scheduled_by_target ON actions (target_id) WHERE status = 'scheduled';

-- The triggers, dropped with the old table. An action that becomes due waiting for the owner
-- reports `approval.requested` then, after its `action.updated`: the owner is asked when it is due.
CREATE TRIGGER actions_insert_journal AFTER INSERT ON actions
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'action.created', NEW.id, json_object(
    'id', NEW.id, 'workspaceId', NEW.workspace_id, 'deviceId', NEW.device_id, 'targetId', NEW.target_id,
    'capability', NEW.capability, 'arguments', NEW.arguments, 'status', NEW.status, 'principal', NEW.principal,
    'broadcastId', NEW.broadcast_id, 'createdAt', NEW.created_at, 'expiresAt', NEW.expires_at,
    'dispatchedAt', NEW.dispatched_at, 'completedAt', NEW.completed_at, 'result', NEW.result,
    'errorCode', NEW.error_code, 'errorMessage', NEW.error_message, 'connectionId', NEW.connection_id,
    'cancelReason', NEW.cancel_reason, 'cancelRequestedAt', NEW.cancel_requested_at, 'reportedLateAt', NEW.reported_late_at,
    'approval', NEW.approval, 'approvalExpiresAt', NEW.approval_expires_at, 'ttlSeconds', NEW.ttl_seconds,
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason,
    'notBefore', NEW.not_before),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  SELECT NEW.workspace_id, 'approval.requested', NEW.id, json_object(
    'id', NEW.id, 'workspaceId', NEW.workspace_id, 'deviceId', NEW.device_id, 'targetId', NEW.target_id,
    'capability', NEW.capability, 'arguments', NEW.arguments, 'status', NEW.status, 'principal', NEW.principal,
    'broadcastId', NEW.broadcast_id, 'createdAt', NEW.created_at, 'expiresAt', NEW.expires_at,
    'dispatchedAt', NEW.dispatched_at, 'completedAt', NEW.completed_at, 'result', NEW.result,
    'errorCode', NEW.error_code, 'errorMessage', NEW.error_message, 'connectionId', NEW.connection_id,
    'cancelReason', NEW.cancel_reason, 'cancelRequestedAt', NEW.cancel_requested_at, 'reportedLateAt', NEW.reported_late_at,
    'approval', NEW.approval, 'approvalExpiresAt', NEW.approval_expires_at, 'ttlSeconds', NEW.ttl_seconds,
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason,
    'notBefore', NEW.not_before),
    CAST(unixepoch('subsec') * 1000 AS INTEGER)
  WHERE NEW.status = 'awaiting_approval';
END;

CREATE TRIGGER actions_reservation_decided AFTER UPDATE OF decision_reason ON actions
WHEN NEW.reserved_bytes > 0
BEGIN
  UPDATE actions SET reserved_bytes = max(0, reserved_bytes - coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0)
    + coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0))
  WHERE id = NEW.id;
END;

CREATE TRIGGER actions_reservation_released AFTER UPDATE OF status, reported_late_at ON actions
WHEN NEW.reserved_bytes > 0 AND (NEW.status IN ('succeeded', 'failed', 'rejected', 'cancelled')
  OR (NEW.status = 'expired' AND (NEW.dispatched_at IS NULL OR NEW.reported_late_at IS NOT NULL)))
BEGIN
  UPDATE actions SET reserved_bytes = 0 WHERE id = NEW.id;
END;

CREATE TRIGGER actions_usage_delete AFTER DELETE ON actions
BEGIN
  UPDATE workspace_usage SET actions = actions - 1, action_bytes = action_bytes
    - length(CAST(OLD.arguments AS BLOB)) - coalesce(length(CAST(OLD.result AS BLOB)), 0)
    - coalesce(length(CAST(OLD.error_message AS BLOB)), 0) - coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0)
    - OLD.reserved_bytes
  WHERE workspace_id = OLD.workspace_id;
END;

CREATE TRIGGER actions_usage_insert AFTER INSERT ON actions
BEGIN
  INSERT INTO workspace_usage (workspace_id, actions, action_bytes)
  VALUES (NEW.workspace_id, 1, length(CAST(NEW.arguments AS BLOB)) + coalesce(length(CAST(NEW.result AS BLOB)), 0)
    + coalesce(length(CAST(NEW.error_message AS BLOB)), 0) + coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0) + NEW.reserved_bytes)
  ON CONFLICT (workspace_id) DO UPDATE SET actions = actions + 1, action_bytes = action_bytes + excluded.action_bytes;
END;

CREATE TRIGGER actions_usage_reserved AFTER UPDATE OF reserved_bytes ON actions
WHEN NEW.reserved_bytes <> OLD.reserved_bytes
BEGIN
  UPDATE workspace_usage SET action_bytes = action_bytes + NEW.reserved_bytes - OLD.reserved_bytes WHERE workspace_id = NEW.workspace_id;
END;

CREATE TRIGGER actions_usage_update AFTER UPDATE OF arguments, result, error_message, decision_reason ON actions
BEGIN
  UPDATE workspace_usage SET action_bytes = action_bytes
    + length(CAST(NEW.arguments AS BLOB)) + coalesce(length(CAST(NEW.result AS BLOB)), 0)
    + coalesce(length(CAST(NEW.error_message AS BLOB)), 0) + coalesce(length(CAST(NEW.decision_reason AS BLOB)), 0)
    - length(CAST(OLD.arguments AS BLOB)) - coalesce(length(CAST(OLD.result AS BLOB)), 0)
    - coalesce(length(CAST(OLD.error_message AS BLOB)), 0) - coalesce(length(CAST(OLD.decision_reason AS BLOB)), 0)
  WHERE workspace_id = NEW.workspace_id;
END;

CREATE TRIGGER actions_update_journal AFTER UPDATE OF status, cancel_requested_at, reported_late_at ON actions
WHEN OLD.status IS NOT NEW.status OR OLD.cancel_requested_at IS NOT NEW.cancel_requested_at OR OLD.reported_late_at IS NOT NEW.reported_late_at
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'action.updated', NEW.id, json_object(
    'id', NEW.id, 'workspaceId', NEW.workspace_id, 'deviceId', NEW.device_id, 'targetId', NEW.target_id,
    'capability', NEW.capability, 'arguments', NEW.arguments, 'status', NEW.status, 'principal', NEW.principal,
    'broadcastId', NEW.broadcast_id, 'createdAt', NEW.created_at, 'expiresAt', NEW.expires_at,
    'dispatchedAt', NEW.dispatched_at, 'completedAt', NEW.completed_at, 'result', NEW.result,
    'errorCode', NEW.error_code, 'errorMessage', NEW.error_message, 'connectionId', NEW.connection_id,
    'cancelReason', NEW.cancel_reason, 'cancelRequestedAt', NEW.cancel_requested_at, 'reportedLateAt', NEW.reported_late_at,
    'approval', NEW.approval, 'approvalExpiresAt', NEW.approval_expires_at, 'ttlSeconds', NEW.ttl_seconds,
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason,
    'notBefore', NEW.not_before),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  SELECT NEW.workspace_id, 'approval.requested', NEW.id, json_object(
    'id', NEW.id, 'workspaceId', NEW.workspace_id, 'deviceId', NEW.device_id, 'targetId', NEW.target_id,
    'capability', NEW.capability, 'arguments', NEW.arguments, 'status', NEW.status, 'principal', NEW.principal,
    'broadcastId', NEW.broadcast_id, 'createdAt', NEW.created_at, 'expiresAt', NEW.expires_at,
    'dispatchedAt', NEW.dispatched_at, 'completedAt', NEW.completed_at, 'result', NEW.result,
    'errorCode', NEW.error_code, 'errorMessage', NEW.error_message, 'connectionId', NEW.connection_id,
    'cancelReason', NEW.cancel_reason, 'cancelRequestedAt', NEW.cancel_requested_at, 'reportedLateAt', NEW.reported_late_at,
    'approval', NEW.approval, 'approvalExpiresAt', NEW.approval_expires_at, 'ttlSeconds', NEW.ttl_seconds,
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason,
    'notBefore', NEW.not_before),
    CAST(unixepoch('subsec') * 1000 AS INTEGER)
  WHERE OLD.status = 'scheduled' AND NEW.status = 'awaiting_approval';
END;

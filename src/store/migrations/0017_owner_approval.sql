-- Owner approval (docs/reference/rules.md "Approvals"). An action whose grant asks for a yes
-- starts `awaiting_approval` and ends `rejected` when the owner says no: two statuses the
-- CHECK must accept, and SQLite cannot alter a CHECK, so the table is rebuilt. Nothing
-- references `actions`, so dropping the old table breaks no foreign key.
--
-- New columns:
--   approval            the mode the action was requested under: 'none', 'owner' or 'user'
--                       (a `user` call confirmed by the agent's user in the MCP client queues at once).
--   approval_expires_at the end of the approval window; while the action waits, `expires_at`
--                       holds the same instant, so one deadline index and one sweep expire both.
--   ttl_seconds         the execution deadline asked for: an approval starts it then.
--   decided_by, decided_at, decision_reason
--                       who approved or rejected it, when, and the reason they gave.
--   expired_reason      'deadline' or 'approval_timeout' for an expired action (older ones: NULL).
CREATE TABLE actions_new (
  id                  TEXT PRIMARY KEY,
  workspace_id        TEXT NOT NULL REFERENCES workspaces(id),
  device_id           TEXT NOT NULL REFERENCES devices(id),
  target_id           TEXT NOT NULL REFERENCES devices(id), -- who fetches it: the device, or a child's gateway
  capability          TEXT NOT NULL,
  arguments           TEXT NOT NULL,                        -- JSON
  status              TEXT NOT NULL CHECK (status IN ('awaiting_approval', 'queued', 'received', 'succeeded', 'failed', 'rejected', 'cancelled', 'expired')),
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
  expired_reason      TEXT CHECK (expired_reason IN ('deadline', 'approval_timeout'))
);

-- rowid is kept: it orders actions created in the same millisecond (src/store/actions.ts paging).
INSERT INTO actions_new (rowid, id, workspace_id, device_id, target_id, capability, arguments, status, principal, broadcast_id,
  created_at, expires_at, dispatched_at, completed_at, result, error_code, error_message, connection_id, cancel_reason,
  cancel_requested_at, reported_late_at, expired_reason)
SELECT rowid, id, workspace_id, device_id, target_id, capability, arguments, status, principal, broadcast_id,
  created_at, expires_at, dispatched_at, completed_at, result, error_code, error_message, connection_id, cancel_reason,
  cancel_requested_at, reported_late_at, CASE WHEN status = 'expired' THEN 'deadline' END
FROM actions;

DROP TABLE actions;
ALTER TABLE actions_new RENAME TO actions;

-- Every index of the earlier migrations, as they left them (0002, 0007, 0009, 0014, 0015).
CREATE INDEX actions_history ON actions (workspace_id, created_at);
CREATE INDEX actions_by_principal ON actions (workspace_id, principal, created_at);
CREATE INDEX actions_queued_by_target ON actions (target_id, created_at) WHERE status = 'queued';
CREATE INDEX actions_queued_by_workspace ON actions (workspace_id) WHERE status = 'queued';
CREATE INDEX actions_queued_by_device ON actions (device_id, principal) WHERE status = 'queued';
CREATE INDEX actions_received_by_device ON actions (device_id) WHERE status = 'received';
CREATE INDEX actions_recalled_by_target ON actions (target_id) WHERE cancel_requested_at IS NOT NULL AND status = 'received';
-- The deadline sweep now also ends approval windows (`expires_at` holds the window while an
-- action waits): its WHERE is the `expire` move's guard, as 0009 explains.
CREATE INDEX actions_live_by_deadline ON actions (expires_at) WHERE status IN ('awaiting_approval', 'queued', 'received');
-- Actions waiting for a decision: the owner's inbox (GET /v1/actions?status=awaiting_approval,
-- newest first) and the withdrawals of a revocation, which cancel them like queued ones.
CREATE INDEX actions_awaiting_by_workspace ON actions (workspace_id, created_at) WHERE status = 'awaiting_approval';
CREATE INDEX actions_awaiting_by_device ON actions (device_id, principal) WHERE status = 'awaiting_approval';
-- No full index on status (0009 removed them: every status change rewrote their entries): a
-- filter on a final status walks the workspace's history newest first, as the unfiltered list does.

-- The journal triggers of 0016, dropped with the old table, with the new columns in the
-- snapshot; an action created waiting also reports `approval.requested`, after `action.created`
-- (one trigger, so the order is fixed).
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
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason),
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
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason),
    CAST(unixepoch('subsec') * 1000 AS INTEGER)
  WHERE NEW.status = 'awaiting_approval';
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
    'decidedBy', NEW.decided_by, 'decidedAt', NEW.decided_at, 'decisionReason', NEW.decision_reason, 'expiredReason', NEW.expired_reason),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

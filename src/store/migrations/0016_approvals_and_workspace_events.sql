-- A grant says whether a call under it needs a human's yes first (docs/reference/rules.md
-- "Approvals"): 'none' (default), 'owner' (the workspace owner approves each action) or
-- 'user' (the agent's own user confirms in the MCP client).
ALTER TABLE grants ADD COLUMN approval TEXT NOT NULL DEFAULT 'none' CHECK (approval IN ('none', 'owner', 'user'));

-- The workspace's event journal: what the owner's live stream (GET /v1/events) replays from
-- `Last-Event-ID` and what webhooks deliver. Written by triggers, so an event commits in the
-- same transaction as the change it reports, whichever instance or write path made it, and
-- is never published for a change that rolled back. `id` orders events across the whole
-- service (AUTOINCREMENT: never reused after pruning, so a stale Last-Event-ID cannot name a
-- later event). `data` is a snapshot of the row in the store's column names (see
-- src/store/workspace-events.ts), rendered to the API's records when read. `created_at` is the
-- database's wall clock (a trigger cannot see the service's clock): the replay window is
-- pruned by it.
CREATE TABLE workspace_events (
  id           INTEGER PRIMARY KEY AUTOINCREMENT,
  workspace_id TEXT NOT NULL,
  type         TEXT NOT NULL,
  subject_id   TEXT NOT NULL,
  data         TEXT NOT NULL,
  created_at   INTEGER NOT NULL
);
CREATE INDEX workspace_events_by_workspace ON workspace_events (workspace_id, id);
CREATE INDEX workspace_events_by_time ON workspace_events (created_at);

-- Actions: created, and every change of status or mark (recall, late report). A table rebuild
-- of `actions` drops these triggers: it must create them again, with any new columns in the snapshot.
CREATE TRIGGER actions_insert_journal AFTER INSERT ON actions
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'action.created', NEW.id, json_object(
    'id', NEW.id, 'workspaceId', NEW.workspace_id, 'deviceId', NEW.device_id, 'targetId', NEW.target_id,
    'capability', NEW.capability, 'arguments', NEW.arguments, 'status', NEW.status, 'principal', NEW.principal,
    'broadcastId', NEW.broadcast_id, 'createdAt', NEW.created_at, 'expiresAt', NEW.expires_at,
    'dispatchedAt', NEW.dispatched_at, 'completedAt', NEW.completed_at, 'result', NEW.result,
    'errorCode', NEW.error_code, 'errorMessage', NEW.error_message, 'connectionId', NEW.connection_id,
    'cancelReason', NEW.cancel_reason, 'cancelRequestedAt', NEW.cancel_requested_at, 'reportedLateAt', NEW.reported_late_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
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
    'cancelReason', NEW.cancel_reason, 'cancelRequestedAt', NEW.cancel_requested_at, 'reportedLateAt', NEW.reported_late_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

-- Grants: created (a replacement is a revocation and a creation) and revoked.
CREATE TRIGGER grants_insert_journal AFTER INSERT ON grants
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'grant.created', NEW.id, json_object(
    'id', NEW.id, 'principal', NEW.principal, 'deviceId', NEW.device_id, 'capability', NEW.capability,
    'approval', NEW.approval, 'gatewayId', NEW.gateway_id, 'expiresAt', NEW.expires_at,
    'revokedAt', NEW.revoked_at, 'createdAt', NEW.created_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER grants_revoke_journal AFTER UPDATE OF revoked_at ON grants
WHEN OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'grant.revoked', NEW.id, json_object(
    'id', NEW.id, 'principal', NEW.principal, 'deviceId', NEW.device_id, 'capability', NEW.capability,
    'approval', NEW.approval, 'gatewayId', NEW.gateway_id, 'expiresAt', NEW.expires_at,
    'revokedAt', NEW.revoked_at, 'createdAt', NEW.created_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

-- Devices: revoked (online and offline are found by time, not by a write: src/domain).
CREATE TRIGGER devices_revoke_journal AFTER UPDATE OF revoked_at ON devices
WHEN OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'device.revoked', NEW.id, json_object(
    'id', NEW.id, 'name', NEW.name, 'kind', NEW.kind, 'parentId', NEW.parent_id, 'revokedAt', NEW.revoked_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

-- Grant conditions (docs/owners/grants.md "Conditions"): argument bounds, a schedule and a budget,
-- kept as the JSON object the API shows; NULL for none.
ALTER TABLE grants ADD COLUMN conditions TEXT;

-- A budget counts the actions created for one principal, device and function in a sliding
-- window: the guarded insert reads this range in the statement that creates the action.
CREATE INDEX actions_by_grant_function ON actions (workspace_id, principal, device_id, capability, created_at);

-- Grant events carry the conditions.
DROP TRIGGER grants_insert_journal;
DROP TRIGGER grants_revoke_journal;

CREATE TRIGGER grants_insert_journal AFTER INSERT ON grants
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'grant.created', NEW.id, json_object(
    'id', NEW.id, 'principal', NEW.principal, 'deviceId', NEW.device_id, 'capability', NEW.capability,
    'approval', NEW.approval, 'gatewayId', NEW.gateway_id, 'expiresAt', NEW.expires_at,
    'revokedAt', NEW.revoked_at, 'createdAt', NEW.created_at, 'conditions', json(NEW.conditions)),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

CREATE TRIGGER grants_revoke_journal AFTER UPDATE OF revoked_at ON grants
WHEN OLD.revoked_at IS NULL AND NEW.revoked_at IS NOT NULL
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, 'grant.revoked', NEW.id, json_object(
    'id', NEW.id, 'principal', NEW.principal, 'deviceId', NEW.device_id, 'capability', NEW.capability,
    'approval', NEW.approval, 'gatewayId', NEW.gateway_id, 'expiresAt', NEW.expires_at,
    'revokedAt', NEW.revoked_at, 'createdAt', NEW.created_at, 'conditions', json(NEW.conditions)),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

-- What an agent may call (docs/reference/rules.md "Access") depends on grants, capabilities and devices only.
-- Every write to them bumps the workspace's functions_version in the same transaction, by
-- trigger so that no write path can forget it: a cache of a principal's tool list (src/mcp)
-- is valid while the version it was built at is still the current one (and no grant it
-- counted has expired). Device columns that do not change what is callable (last_seen_at)
-- do not bump it, so devices calling in never invalidate anything.
ALTER TABLE workspaces ADD COLUMN functions_version INTEGER NOT NULL DEFAULT 0;

CREATE TRIGGER grants_insert_bumps_functions_version AFTER INSERT ON grants
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id = NEW.workspace_id; END;
CREATE TRIGGER grants_update_bumps_functions_version AFTER UPDATE ON grants
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id IN (OLD.workspace_id, NEW.workspace_id); END;
CREATE TRIGGER grants_delete_bumps_functions_version AFTER DELETE ON grants
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id = OLD.workspace_id; END;

CREATE TRIGGER capabilities_insert_bumps_functions_version AFTER INSERT ON capabilities
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id = NEW.workspace_id; END;
CREATE TRIGGER capabilities_update_bumps_functions_version AFTER UPDATE ON capabilities
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id IN (OLD.workspace_id, NEW.workspace_id); END;
CREATE TRIGGER capabilities_delete_bumps_functions_version AFTER DELETE ON capabilities
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id = OLD.workspace_id; END;

CREATE TRIGGER devices_insert_bumps_functions_version AFTER INSERT ON devices
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id = NEW.workspace_id; END;
CREATE TRIGGER devices_update_bumps_functions_version
AFTER UPDATE OF workspace_id, parent_id, name, kind, revoked_at, detached_at, created_at ON devices
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id IN (OLD.workspace_id, NEW.workspace_id); END;
CREATE TRIGGER devices_delete_bumps_functions_version AFTER DELETE ON devices
BEGIN UPDATE workspaces SET functions_version = functions_version + 1 WHERE id = OLD.workspace_id; END;

-- An agent's own recent actions (the MCP action:// resource list) are read by principal.
CREATE INDEX actions_by_principal ON actions (workspace_id, principal, created_at);

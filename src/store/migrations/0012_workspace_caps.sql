-- Workspace caps (docs/reference/rules.md "Errors and limits") count live rows per workspace inside the
-- transaction that would add one; these partial indexes keep each count to an index scan.
CREATE INDEX connections_live ON connections (workspace_id, purpose, expires_at) WHERE revoked_at IS NULL;
CREATE INDEX grants_live ON grants (workspace_id, expires_at) WHERE revoked_at IS NULL;
CREATE INDEX enrollments_live ON enrollments (workspace_id, expires_at) WHERE used_at IS NULL;
CREATE INDEX oauth_clients_by_workspace ON oauth_clients (workspace_id) WHERE workspace_id IS NOT NULL;

-- 2025-era MCP resource subscriptions (docs/agents/state.md): a session's `resources/subscribe`
-- of `device://{deviceId}/state`, told on the session's GET stream whichever instance serves
-- it. A session id holds no server state (src/mcp/client-sessions.ts), so what it subscribed
-- to is kept here, by the session's nonce and its agent connection: a stream on another
-- instance reads it, and a subscribe on one instance reaches a stream on another.
CREATE TABLE mcp_resource_subscriptions (
  connection_id TEXT NOT NULL REFERENCES connections(id),
  session       TEXT NOT NULL,                   -- the nonce of the session id the connection was issued
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
  device_id     TEXT NOT NULL,
  created_at    INTEGER NOT NULL,
  PRIMARY KEY (connection_id, session, device_id)
) WITHOUT ROWID;
-- The newest per connection are kept (src/store/mcp-subscriptions.ts): an abandoned session's go first.
CREATE INDEX mcp_resource_subscriptions_by_age ON mcp_resource_subscriptions (connection_id, created_at);

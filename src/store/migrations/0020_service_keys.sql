-- Secret keys the service keeps for itself, one row per purpose (today:
-- `mcp-confirmation`, the HMAC key of the MCP confirmation's requestState, docs/agents/confirmation.md "User
-- confirmation"). A key is created at random by the first instance that needs it
-- (INSERT … ON CONFLICT DO NOTHING, then read back), so every instance sharing the database
-- uses the same key and accepts the others' states without any configuration.
CREATE TABLE service_keys (
  name       TEXT PRIMARY KEY,
  secret     TEXT NOT NULL,
  created_at INTEGER NOT NULL
);

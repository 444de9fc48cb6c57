-- Function grants per principal x device x capability, the durable action queue and its
-- history, and idempotency records for action requests and broadcasts.

CREATE TABLE grants (
  id           TEXT PRIMARY KEY,                -- uuid
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  principal    TEXT NOT NULL,
  device_id    TEXT NOT NULL REFERENCES devices(id),
  capability   TEXT NOT NULL,
  gateway_id   TEXT REFERENCES devices(id),     -- set when written by a gateway grant
  expires_at   INTEGER,
  revoked_at   INTEGER,
  created_by   TEXT NOT NULL,
  created_at   INTEGER NOT NULL
);
-- At most one unrevoked grant per principal, device and capability.
CREATE UNIQUE INDEX grants_unrevoked ON grants (workspace_id, principal, device_id, capability) WHERE revoked_at IS NULL;
CREATE INDEX grants_by_device ON grants (workspace_id, device_id);

CREATE TABLE actions (
  id            TEXT PRIMARY KEY,               -- uuid
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
  device_id     TEXT NOT NULL REFERENCES devices(id),
  target_id     TEXT NOT NULL REFERENCES devices(id), -- who fetches it: the device, or a child's gateway
  capability    TEXT NOT NULL,
  arguments     TEXT NOT NULL,                  -- JSON
  status        TEXT NOT NULL CHECK (status IN ('queued', 'received', 'succeeded', 'failed', 'cancelled', 'expired')),
  principal     TEXT NOT NULL,
  broadcast_id  TEXT,
  created_at    INTEGER NOT NULL,
  expires_at    INTEGER NOT NULL,
  dispatched_at INTEGER,
  completed_at  INTEGER,
  result        TEXT,                           -- JSON reported by the device
  error_code    TEXT,
  error_message TEXT
);
CREATE INDEX actions_queue ON actions (target_id, status, created_at);
CREATE INDEX actions_history ON actions (workspace_id, created_at);
CREATE INDEX actions_deadline ON actions (status, expires_at);

CREATE TABLE idempotency_keys (
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  principal    TEXT NOT NULL,
  key          TEXT NOT NULL,
  request_hash TEXT NOT NULL,                   -- sha256 of the canonical request
  response     TEXT NOT NULL,                   -- the first answer, replayed as is
  created_at   INTEGER NOT NULL,
  PRIMARY KEY (workspace_id, principal, key)
);

-- Workspaces, owner-issued connections (agent tokens and device setup tokens), devices
-- with their capabilities, and legacy board enrollments. Timestamps are Unix ms.

CREATE TABLE workspaces (
  id          TEXT PRIMARY KEY,                 -- uuid
  external_id TEXT NOT NULL UNIQUE,             -- the owner session claim naming the workspace
  routing_id  TEXT NOT NULL UNIQUE,             -- 64 hex, sent by devices as x-service-workspace
  created_at  INTEGER NOT NULL
);

CREATE TABLE connections (
  id             TEXT PRIMARY KEY,              -- uuid
  workspace_id   TEXT NOT NULL REFERENCES workspaces(id),
  purpose        TEXT NOT NULL CHECK (purpose IN ('agent', 'device-setup')),
  name           TEXT NOT NULL,
  principal      TEXT NOT NULL,
  access         TEXT NOT NULL CHECK (access IN ('read', 'act')),
  token_hash     TEXT NOT NULL UNIQUE,          -- sha256 hex of the opaque token
  token_prefix   TEXT NOT NULL,                 -- safe to display and log
  device_limit   INTEGER NOT NULL,
  attached_count INTEGER NOT NULL DEFAULT 0,
  expires_at     INTEGER,
  revoked_at     INTEGER,
  created_by     TEXT NOT NULL,                 -- owner sub
  created_at     INTEGER NOT NULL,
  CHECK (attached_count <= device_limit)
);
CREATE INDEX connections_by_workspace ON connections (workspace_id, purpose, created_at);

CREATE TABLE devices (
  id           TEXT PRIMARY KEY,                -- uuid
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  parent_id    TEXT REFERENCES devices(id),     -- the gateway of a child or service device
  child_key    TEXT,                            -- the gateway manifest's key for a child
  name         TEXT NOT NULL,
  kind         TEXT NOT NULL CHECK (kind IN ('device', 'gateway', 'service')),
  token_hash   TEXT UNIQUE,                     -- device child credential; null for gateway children
  token_prefix TEXT,
  attached_via TEXT NOT NULL,                   -- setup connection id or enrollment id
  revoked_at   INTEGER,
  detached_at  INTEGER,                         -- a child left out of its gateway's latest manifest
  last_seen_at INTEGER,
  created_at   INTEGER NOT NULL,
  UNIQUE (parent_id, child_key)
);
CREATE INDEX devices_by_workspace ON devices (workspace_id, created_at);
CREATE INDEX devices_by_parent ON devices (parent_id);

CREATE TABLE capabilities (
  device_id    TEXT NOT NULL REFERENCES devices(id),
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  name         TEXT NOT NULL,
  kind         TEXT NOT NULL CHECK (kind IN ('read', 'control')),
  description  TEXT,
  arguments    TEXT NOT NULL,                   -- JSON Schema of an object, as published
  position     INTEGER NOT NULL,                -- order in the manifest
  PRIMARY KEY (device_id, name)
);

CREATE TABLE enrollments (
  id           TEXT PRIMARY KEY,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  code_hash    TEXT NOT NULL UNIQUE,
  code_prefix  TEXT NOT NULL,
  expires_at   INTEGER NOT NULL,
  used_at      INTEGER,
  device_id    TEXT REFERENCES devices(id),
  created_by   TEXT NOT NULL,
  created_at   INTEGER NOT NULL
);

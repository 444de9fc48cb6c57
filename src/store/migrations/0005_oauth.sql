-- OAuth: the service as its own authorization server (docs/reference/rules.md "OAuth"). A client acts in a
-- workspace through an agent connection (purpose 'agent') linked to its oauth_clients row;
-- codes, access and refresh tokens and owner sessions are stored as SHA-256 hashes only.

CREATE TABLE oauth_clients (
  id            TEXT PRIMARY KEY,               -- uuid: the applicationId
  client_id     TEXT NOT NULL UNIQUE,           -- the protocol client_id (the document URL for CIMD)
  source        TEXT NOT NULL CHECK (source IN ('registered', 'dynamic', 'metadata-document')),
  workspace_id  TEXT REFERENCES workspaces(id), -- registered clients only; others serve any workspace
  name          TEXT NOT NULL,
  client_uri    TEXT,
  redirect_uris TEXT NOT NULL,                  -- JSON array, matched exactly
  public        INTEGER NOT NULL CHECK (public IN (0, 1)),
  secret_hash   TEXT UNIQUE,                    -- confidential clients only
  secret_prefix TEXT,
  fresh_until   INTEGER,                        -- metadata documents: the cache lifetime
  created_at    INTEGER NOT NULL,
  updated_at    INTEGER NOT NULL
);

-- The agent connection a client acts through in one workspace. Revoked connections keep the
-- link for history; at most one live connection per workspace and client.
ALTER TABLE connections ADD COLUMN oauth_client TEXT REFERENCES oauth_clients(id);
CREATE UNIQUE INDEX connections_oauth_live ON connections (workspace_id, oauth_client)
  WHERE oauth_client IS NOT NULL AND revoked_at IS NULL;

CREATE TABLE oauth_codes (
  code_hash      TEXT PRIMARY KEY,
  family_id      TEXT NOT NULL,                 -- every token issued from this code carries it
  connection_id  TEXT NOT NULL REFERENCES connections(id),
  workspace_id   TEXT NOT NULL REFERENCES workspaces(id),
  client_id      TEXT NOT NULL,
  redirect_uri   TEXT NOT NULL,
  code_challenge TEXT NOT NULL,                 -- PKCE S256
  scope          TEXT NOT NULL,                 -- normalised: 'read' or 'read act'
  resource       TEXT NOT NULL,                 -- RFC 8707
  expires_at     INTEGER NOT NULL,
  used_at        INTEGER,
  created_by     TEXT NOT NULL,                 -- the approving owner's sub
  created_at     INTEGER NOT NULL
);

CREATE TABLE oauth_tokens (
  id            TEXT PRIMARY KEY,               -- uuid
  token_hash    TEXT NOT NULL UNIQUE,
  token_prefix  TEXT NOT NULL,
  kind          TEXT NOT NULL CHECK (kind IN ('access', 'refresh')),
  family_id     TEXT NOT NULL,
  connection_id TEXT NOT NULL REFERENCES connections(id),
  workspace_id  TEXT NOT NULL REFERENCES workspaces(id),
  client_id     TEXT NOT NULL,
  scope         TEXT NOT NULL,
  resource      TEXT NOT NULL,
  expires_at    INTEGER NOT NULL,
  rotated_at    INTEGER,                        -- refresh tokens: exchanged once; a second use is reuse
  revoked_at    INTEGER,
  created_at    INTEGER NOT NULL
);
CREATE INDEX oauth_tokens_by_family ON oauth_tokens (family_id);
CREATE INDEX oauth_tokens_by_connection ON oauth_tokens (connection_id);

-- Owner sessions of the consent page (an HttpOnly cookie holds the plain token).
CREATE TABLE owner_sessions (
  token_hash   TEXT PRIMARY KEY,
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  subject      TEXT NOT NULL,
  expires_at   INTEGER NOT NULL,
  created_at   INTEGER NOT NULL
);

-- One-use tickets for the device wake WebSocket (docs/reference/rules.md "Actions"): a device trades its
-- credential for a ticket over HTTPS, then presents the ticket in the WebSocket URL, where
-- an Authorization header cannot be sent by every client. Only the hash is kept.

CREATE TABLE event_tickets (
  ticket_hash  TEXT PRIMARY KEY,                -- sha256 hex of the ticket
  workspace_id TEXT NOT NULL REFERENCES workspaces(id),
  device_id    TEXT NOT NULL REFERENCES devices(id), -- the only device it opens a socket for
  expires_at   INTEGER NOT NULL,                -- 30 s after issue
  used_at      INTEGER,                         -- set once, by the upgrade that consumed it
  created_at   INTEGER NOT NULL
);
CREATE INDEX event_tickets_by_device ON event_tickets (device_id, expires_at);

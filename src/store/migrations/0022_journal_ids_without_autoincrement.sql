-- The workspace event journal without AUTOINCREMENT, see
-- docs/performance.md "Journal ids without AUTOINCREMENT". Every journal row (three per
-- action round trip) read and wrote `sqlite_sequence`; a plain INTEGER PRIMARY KEY gives
-- max(id) + 1 instead, at no extra cost.
--
-- What AUTOINCREMENT guaranteed stays: an id is never given twice, even after pruning removed
-- every row and the service restarted, so a stale Last-Event-ID or the webhook dispatcher's
-- cursor can never name a different, newer event (docs/reference/events.md "Owner events"). max(id) must
-- therefore never go back: the trigger `workspace_events_keep_newest` below puts a tombstone
-- in the place of the newest row whenever that row is deleted. A tombstone has the workspace
-- id '' (no workspace has it), so every reader, which reads one workspace's events or joins
-- them with a workspace's webhooks, skips it; the replay window's pruning deletes it once a
-- newer row exists (src/store/housekeeping.ts).
--
-- The table is rebuilt with its ids kept (clients' Last-Event-IDs and the webhook cursor name
-- them). Not through `ALTER TABLE … RENAME`: the journal triggers on actions, grants and
-- devices name `workspace_events`, and SQLite refuses a rename while they name a table that is
-- missing. So the rows go to a copy, the table is dropped and created again under its own
-- name, and the rows come back; the triggers are left as they are. When the newest ids were
-- pruned already, `sqlite_sequence` is above every kept id: a tombstone at that id keeps the
-- next id above it.
-- The copy only carries the rows across: it needs no key or constraint of its own.
CREATE TABLE workspace_events_copy AS
SELECT id, workspace_id, type, subject_id, data, created_at FROM workspace_events;
INSERT INTO workspace_events_copy (id, workspace_id, type, subject_id, data, created_at)
SELECT seq, '', 'pruned', '', '{}', 0 FROM sqlite_sequence
WHERE name = 'workspace_events' AND seq > (SELECT coalesce(max(id), 0) FROM workspace_events);

DROP TABLE workspace_events;
CREATE TABLE workspace_events (
  id           INTEGER PRIMARY KEY,
  workspace_id TEXT NOT NULL,
  type         TEXT NOT NULL,
  subject_id   TEXT NOT NULL,
  data         TEXT NOT NULL,
  created_at   INTEGER NOT NULL
);
INSERT INTO workspace_events (id, workspace_id, type, subject_id, data, created_at)
SELECT id, workspace_id, type, subject_id, data, created_at FROM workspace_events_copy;
DROP TABLE workspace_events_copy;

-- The one index the journal keeps (0016; 0021 dropped the other).
CREATE INDEX workspace_events_by_workspace ON workspace_events (workspace_id, id);

-- Whatever deletes the newest row (the pruning, an operator), its id stays taken. Fires only
-- on DELETE, never on the write path.
CREATE TRIGGER workspace_events_keep_newest AFTER DELETE ON workspace_events
WHEN NOT EXISTS (SELECT 1 FROM workspace_events WHERE id > OLD.id)
BEGIN
  INSERT INTO workspace_events (id, workspace_id, type, subject_id, data, created_at)
  VALUES (OLD.id, '', 'pruned', '', '{}', OLD.created_at);
END;

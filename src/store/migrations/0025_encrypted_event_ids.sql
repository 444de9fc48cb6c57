-- The event ids shown to owners are encrypted from here on (src/domain/event-ids.ts,
-- docs/reference/event-ids.md): the journal's own ids count every workspace's events, so showing them
-- told each owner how busy the others were. Plain ids shown before stay valid as a
-- Last-Event-ID up to the last one given by then, kept here; a plain id past it is unknown.
CREATE TABLE legacy_event_ids (last_id INTEGER NOT NULL);
INSERT INTO legacy_event_ids (last_id) SELECT coalesce(max(id), 0) FROM workspace_events;

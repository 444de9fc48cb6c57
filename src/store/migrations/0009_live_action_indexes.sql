-- The queue indexes only need live actions. As full indexes on (…, status) every status
-- change rewrote four index entries and the indexes grew with the whole history; as partial
-- indexes over the statuses they serve, a finished action leaves them for good and they stay
-- as small as the queue itself. Each query that uses one repeats its WHERE term exactly, as
-- SQLite requires to pick a partial index.
DROP INDEX actions_queue;
DROP INDEX actions_deadline;
DROP INDEX actions_by_workspace_status;
DROP INDEX actions_by_device_status;

CREATE INDEX actions_queued_by_target ON actions (target_id, created_at) WHERE status = 'queued';
CREATE INDEX actions_queued_by_workspace ON actions (workspace_id) WHERE status = 'queued';
CREATE INDEX actions_queued_by_device ON actions (device_id) WHERE status = 'queued';
CREATE INDEX actions_live_by_deadline ON actions (expires_at) WHERE status IN ('queued', 'received');

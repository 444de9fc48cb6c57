-- Grants mean what the owner saw (docs/reference/rules.md "Access"): a grant records the kind of the
-- function and the fingerprint of its argument schema at grant time, and applies only while
-- the published function still has both (GRANT_MATCHES_FUNCTION in src/store/grants.ts).
-- A capability carries its fingerprint, written at publish. SQL cannot hash, so this file
-- records the kinds and the service fills the fingerprints of what existed before it at
-- start, before it answers (backfillSchemaFingerprints in src/domain/schema-fingerprints.ts).
-- A grant whose function is gone now gets no kind: it never applies again, even when the
-- name comes back. These writes bump functions_version through the 0006 triggers.
ALTER TABLE capabilities ADD COLUMN schema_fingerprint TEXT;
ALTER TABLE grants ADD COLUMN function_kind TEXT CHECK (function_kind IN ('read', 'control'));
ALTER TABLE grants ADD COLUMN schema_fingerprint TEXT;
UPDATE grants SET function_kind = (SELECT c.kind FROM capabilities c WHERE c.device_id = grants.device_id AND c.name = grants.capability);

-- Fair queues (docs/reference/rules.md "Errors and limits"): the queue is counted per principal and
-- device inside the transaction that queues.
DROP INDEX actions_queued_by_device;
CREATE INDEX actions_queued_by_device ON actions (device_id, principal) WHERE status = 'queued';
-- A republish that changes or removes a function recalls its handed-out commands, found by device.
CREATE INDEX actions_received_by_device ON actions (device_id) WHERE status = 'received';

-- Capacity checks (docs/reference/rules.md "Errors and limits") count queued actions per workspace and per device
-- inside the transaction that queues; these indexes keep those counts to index scans.
CREATE INDEX actions_by_workspace_status ON actions (workspace_id, status);
CREATE INDEX actions_by_device_status ON actions (device_id, status);

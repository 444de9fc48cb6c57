-- The owner's pause switch for device control (docs/owners/console-guide.md "Pause device
-- control"): while `controls_paused_at` is set, the workspace's agents get 503
-- `device_controls_disabled` on every request that would queue an action and `next` hands its
-- devices nothing, as the service-wide kill switch does for every workspace. Persisted, so it
-- holds across restarts and on every instance that shares the database.
ALTER TABLE workspaces ADD COLUMN controls_paused_at INTEGER;
ALTER TABLE workspaces ADD COLUMN controls_paused_by TEXT;

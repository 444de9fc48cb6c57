-- Recalled commands a device still holds, by the device that fetched them: a wake socket that
-- opens is told them again (docs/devices/wire-protocol.md "Wake channel"). Few rows: a recalled command leaves the
-- index as soon as it is reported or expires.
CREATE INDEX actions_recalled_by_target ON actions (target_id) WHERE cancel_requested_at IS NOT NULL AND status = 'received';

-- Whether the owner's event journal last said a device was online (1) or offline
-- (0): the guard that makes device.online and device.offline appear exactly once per
-- transition, whichever instance notices it. A device's call sets it to 1 in the same UPDATE
-- that records last_seen_at (src/store/devices.ts touchDevice); the presence sweep sets it
-- to 0 once the device has been quiet for the online window. The trigger below journals the
-- change in that same statement, so two instances racing on one device write one event: the
-- second UPDATE sees the value already changed and the WHEN clause holds it back.
ALTER TABLE devices ADD COLUMN reported_online INTEGER NOT NULL DEFAULT 0;

-- The presence sweep looks only at devices the journal calls online.
CREATE INDEX devices_reported_online ON devices (reported_online, last_seen_at) WHERE reported_online = 1;

CREATE TRIGGER devices_presence_journal AFTER UPDATE OF reported_online ON devices
WHEN OLD.reported_online IS NOT NEW.reported_online
BEGIN
  INSERT INTO workspace_events (workspace_id, type, subject_id, data, created_at)
  VALUES (NEW.workspace_id, CASE NEW.reported_online WHEN 1 THEN 'device.online' ELSE 'device.offline' END, NEW.id, json_object(
    'id', NEW.id, 'name', NEW.name, 'kind', NEW.kind, 'parentId', NEW.parent_id, 'lastSeenAt', NEW.last_seen_at),
    CAST(unixepoch('subsec') * 1000 AS INTEGER));
END;

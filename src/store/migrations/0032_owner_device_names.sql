-- A name the owner gave a device (POST /v1/devices/{deviceId}/rename): once set, a gateway's
-- manifest no longer renames the child it publishes under that key; the owner's name wins.
ALTER TABLE devices ADD COLUMN named_by_owner INTEGER NOT NULL DEFAULT 0;

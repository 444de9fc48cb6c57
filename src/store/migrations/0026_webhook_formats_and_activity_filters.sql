-- Webhooks in the formats owners read (docs/owners/approval-notifications.md): `format` says how
-- a delivery is written; `generic` is the signed JSON event every webhook sent before. A
-- Telegram webhook also names the chat its bot writes to (`chat_id`); its URL carries the bot's
-- token and is never shown back whole.
ALTER TABLE webhooks ADD COLUMN format TEXT NOT NULL DEFAULT 'generic'
  CHECK (format IN ('generic', 'ntfy', 'slack', 'discord', 'teams', 'telegram'));
ALTER TABLE webhooks ADD COLUMN chat_id TEXT;

-- The owner's history filtered by device (docs/owners/activity-log.md) reads the device's actions
-- newest first instead of walking the whole workspace's history.
CREATE INDEX actions_by_device_history ON actions (device_id, created_at);

-- When each webhook was last sent a test (POST /v1/webhooks/{webhookId}/test): a test send
-- reaches out to an address the owner chose, so it is limited to one per webhook per window and
-- a few per workspace per window, checked by the guarded UPDATE that records it, on every
-- instance that shares the database.
ALTER TABLE webhooks ADD COLUMN last_tested_at INTEGER;

-- The housekeeping sweep (src/domain/housekeeping.ts) deletes rows past their deadline in
-- small batches; these indexes let each batch find them without scanning the live rows.
-- event_tickets needs none: issuing a ticket already prunes the device's dead ones, so the
-- table stays a few rows per device.
CREATE INDEX oauth_codes_by_expiry ON oauth_codes (expires_at);
CREATE INDEX oauth_tokens_by_expiry ON oauth_tokens (expires_at);
CREATE INDEX owner_sessions_by_expiry ON owner_sessions (expires_at);
CREATE INDEX idempotency_keys_by_age ON idempotency_keys (created_at);

-- Stop means stop (docs/reference/rules.md "Actions"): an action remembers which agent connection asked
-- for it, so a revoked connection's commands can be told apart from another connection of the
-- same principal; why it was cancelled; when a recall of a handed-out command was asked for;
-- and when a result arrived after the deadline (stored, never dropped).
ALTER TABLE actions ADD COLUMN connection_id TEXT REFERENCES connections(id);
ALTER TABLE actions ADD COLUMN cancel_reason TEXT;
ALTER TABLE actions ADD COLUMN cancel_requested_at INTEGER;
ALTER TABLE actions ADD COLUMN reported_late_at INTEGER;

-- The embedded round trip pays for every index the event journal keeps,
-- once per journal row and three rows per action, see
-- docs/performance.md "Winning back the embedded round trip".
-- The index on `created_at` served only the replay window's pruning; ids grow with time, so
-- the pruning now walks the oldest ids instead (src/store/housekeeping.ts) and each journal
-- row writes one index entry fewer.
DROP INDEX workspace_events_by_time;

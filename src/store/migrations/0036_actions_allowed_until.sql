-- A queued action whose grant has a schedule may be handed out only until the window it was
-- queued (or approved) in closes (docs/owners/grants.md "Conditions"): the instant, computed by
-- the domain from the schedule's zone, is kept on the action so the claim's guard can read it.
-- NULL: no schedule applies.
ALTER TABLE actions ADD COLUMN allowed_until INTEGER;

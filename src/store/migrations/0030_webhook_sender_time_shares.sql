-- Webhook delivery fair across workspaces whatever their number (docs/owners/webhooks.md "Fair
-- delivery between workspaces"). A claim that went round the idle workspaces by the age of
-- their oldest due delivery let twenty workspaces of slow endpoints keep a newcomer waiting
-- behind every delivery they had made before it. Each workspace is now charged for the sender
-- time its attempts take, and the claim serves the workspace charged least first (start-time
-- fair queueing, kept in the database so that every instance claims by the same account):
--
-- `webhook_shares.finish_ms`: the sender time charged to the workspace, in the virtual clock;
-- `webhook_dispatch.virtual_ms`: the virtual clock, the charge of the last workspace served. A
--   workspace that was idle starts from it, so idleness is no credit and a newcomer is next;
-- `webhooks.attempt_ms`: how long the endpoint's attempts take (a running average), charged
--   when one is claimed and corrected by the attempt's real duration when it ends.
CREATE TABLE webhook_shares (
  workspace_id TEXT PRIMARY KEY,
  finish_ms    INTEGER NOT NULL
);
ALTER TABLE webhook_dispatch ADD COLUMN virtual_ms INTEGER NOT NULL DEFAULT 0;
ALTER TABLE webhooks ADD COLUMN attempt_ms INTEGER NOT NULL DEFAULT 0;

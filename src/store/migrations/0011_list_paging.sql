-- GET /v1/grants pages newest first by (created_at, id) (src/store/paging.ts): without this
-- index every page sorts all of the workspace's unrevoked grants.
CREATE INDEX grants_unrevoked_by_age ON grants (workspace_id, created_at, id) WHERE revoked_at IS NULL;

-- The housekeeping sweep deletes OAuth clients nobody approved (src/domain/housekeeping.ts):
-- dynamic registrations by age, cached client metadata documents by staleness, when no
-- connection uses them. The first index answers "does any connection use this client"
-- without scanning connections; the other two find the candidates of each kind.
CREATE INDEX connections_by_oauth_client ON connections (oauth_client) WHERE oauth_client IS NOT NULL;
CREATE INDEX oauth_clients_by_source_age ON oauth_clients (source, created_at);
CREATE INDEX oauth_clients_by_source_freshness ON oauth_clients (source, fresh_until);

import type { Db } from '../../store/driver.js';
import type { CapacityLimits, Clock, Logger } from '../context.js';
import type { DocumentFetcher, MetadataDocumentCache } from './metadata-documents.js';

/**
 * The authorization server's protocol logic (docs/reference/rules.md "OAuth"), free of HTTP: the
 * endpoints in src/oauth parse requests into these calls and render what they return. This
 * folder holds one file per concern (scopes, clients, authorize, token, revoke, registration,
 * sessions); this file holds what every one of them is handed.
 */

export interface OAuthDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  /**
   * The issuer as this request names it, served at /.well-known/oauth-authorization-server:
   * PUBLIC_BASE_URL, or unset, the loopback alias the request came to (src/http/base-url.ts).
   */
  issuer: string;
  /** `${PUBLIC_BASE_URL}/mcp`: the only resource (RFC 8707) tokens are issued for, as codes and tokens store it. */
  resource: string;
  /** Whether a client's `resource` names `resource` (itself, or with PUBLIC_BASE_URL unset a loopback alias of it). */
  isResource(name: string): boolean;
  /** Budgeted per client address (src/oauth/cimd-limits.ts): the endpoints hand in one per request. */
  fetchClientDocument: DocumentFetcher;
  /** Fetched documents of clients no owner approved yet (metadata-documents.ts). */
  clientDocuments: MetadataDocumentCache;
  /** OAUTH_CIMD_ALLOW_LOOPBACK: test-only, admits http loopback document URLs. */
  cimdAllowLoopback: boolean;
  /** The workspace caps: a client's first approval creates an agent connection, which counts. */
  capacity: CapacityLimits;
}

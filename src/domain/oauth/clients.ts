import { timingSafeEqual } from 'node:crypto';
import { hashToken } from '../tokens.js';
import { findClient, type OAuthClientRow } from '../../store/oauth.js';
import { inputIssues } from '../input-limits.js';
import type { OAuthDeps } from './deps.js';
import { oauthError, OAuthProtocolError, UnsafeAuthorizationRequest } from './errors.js';
import { FETCH_FAILED_MESSAGE, FetchBudgetExceeded, metadataDocumentUrl, MetadataDocumentError, resolveMetadataClient } from './metadata-documents.js';

/**
 * Clients during the flow: which client a client_id names (registered, dynamic, or a
 * metadata document), its default principal, and how the token and revocation endpoints
 * authenticate it. The owner's operations on clients are in client-operations.ts.
 */

/** `oauth:<client id>` (docs/reference/rules.md "Access"), or by application id when the client id is too long for a principal. */
export function defaultPrincipal(clientId: string, applicationId: string): string {
  const principal = `oauth:${clientId}`;
  return principal.length <= 128 ? principal : `oauth:${applicationId}`;
}

/** Finds a client by its protocol client_id: registered or dynamic in the table, or a metadata document URL. */
export async function resolveClient(deps: OAuthDeps, clientId: string): Promise<OAuthClientRow | undefined> {
  // Text no client can have been stored with (NUL, lone surrogates; src/domain/input-limits.ts)
  // names no client, whatever the driver would make of it.
  if (clientId === '' || clientId.length > 512 || inputIssues(clientId).length > 0) return undefined;
  const url = metadataDocumentUrl(clientId, deps.cimdAllowLoopback);
  if (!url) return findClient(deps.db, clientId);
  try {
    return await resolveMetadataClient({ db: deps.db, now: deps.clock.now(), fetchDocument: deps.fetchClientDocument, cache: deps.clientDocuments }, url);
  } catch (error) {
    deps.log.info({ msg: 'client metadata document refused', clientId, reason: error instanceof Error ? error.message : String(error) });
    if (error instanceof FetchBudgetExceeded) {
      throw new UnsafeAuthorizationRequest(
        `Too many client metadata documents are being fetched; retry after ${error.retryAfterSeconds} s.`,
        error.retryAfterSeconds,
      );
    }
    // The document's own content is the client's to know; why a fetch failed (a name that
    // does not resolve, a private address, a refused connection) would map this server's
    // network for anyone asking, so it goes to the log only.
    if (error instanceof MetadataDocumentError) throw new UnsafeAuthorizationRequest(`The client's metadata document was refused: ${error.message}.`);
    throw new UnsafeAuthorizationRequest(FETCH_FAILED_MESSAGE);
  }
}

// Client authentication at the token and revocation endpoints (RFC 6749 §2.3, §3.2).

export interface ClientCredentials {
  clientId: string | undefined;
  clientSecret: string | undefined;
}

function secretMatches(secret: string, hash: string): boolean {
  const a = Buffer.from(hashToken(secret), 'hex');
  const b = Buffer.from(hash, 'hex');
  return a.length === b.length && timingSafeEqual(a, b);
}

/** Public clients name themselves; confidential ones prove it with their secret. */
export async function authenticateClient(deps: OAuthDeps, credentials: ClientCredentials): Promise<OAuthClientRow> {
  if (!credentials.clientId) throw oauthError('invalid_client', 'Client authentication failed: no client_id.');
  let client: OAuthClientRow | undefined;
  try {
    client = await resolveClient(deps, credentials.clientId);
  } catch (error) {
    // Over the fetch budget is not a failed authentication: 429, and no failure counted.
    if (error instanceof UnsafeAuthorizationRequest && error.retryAfterSeconds !== undefined) {
      throw new OAuthProtocolError('temporarily_unavailable', error.message, error.retryAfterSeconds);
    }
    client = undefined;
  }
  if (!client) throw oauthError('invalid_client', 'Client authentication failed: unknown client.');
  if (client.public) {
    if (credentials.clientSecret !== undefined) throw oauthError('invalid_client', 'This client is public: it has no secret.');
    return client;
  }
  if (credentials.clientSecret === undefined || client.secretHash === null || !secretMatches(credentials.clientSecret, client.secretHash)) {
    throw oauthError('invalid_client', 'Client authentication failed.');
  }
  return client;
}

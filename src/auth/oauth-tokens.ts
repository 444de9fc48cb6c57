import type { CredentialOf } from '../domain/context.js';
import { lowerAccess, parseScope, scopesOf } from '../domain/oauth/scopes.js';
import type { Db } from '../store/driver.js';
import { findAccessToken } from '../store/oauth.js';
import { hashToken } from '../domain/tokens.js';

/**
 * Resolves an OAuth access token (`dfc_oauth_…`) to the agent credential it acts as, or
 * undefined when it is unknown, expired, revoked, bound to another resource, or its
 * client's connection is revoked. It is an agent credential on purpose: the principal's
 * grants and the ceiling are checked by the same code for agent tokens and OAuth tokens, so
 * no path can forget one of them; `oauth` tells the two apart where it matters (the MCP
 * AuthInfo's scopes and expiry).
 */
export async function resolveOAuthAccessToken(db: Db, bearer: string, now: number, resource: string): Promise<CredentialOf<'agent'> | undefined> {
  const row = await findAccessToken(db, hashToken(bearer));
  if (!row || row.revokedAt !== null || row.expiresAt <= now) return undefined;
  if (row.connectionRevokedAt !== null || (row.connectionExpiresAt !== null && row.connectionExpiresAt <= now)) return undefined;
  // RFC 8707: the token was issued for this resource only (a changed PUBLIC_BASE_URL voids it).
  if (row.resource !== resource) return undefined;
  // The scope is a ceiling only, capped again by the connection's ceiling as it is now.
  const access = lowerAccess(parseScope(row.scope), row.connectionAccess);
  return {
    kind: 'agent',
    workspaceId: row.workspaceId,
    connectionId: row.connectionId,
    principal: row.principal,
    access,
    functionsVersion: row.functionsVersion,
    oauth: { clientId: row.clientId, scopes: scopesOf(access), expiresAt: row.expiresAt, resource: row.resource, tokenId: row.id },
  };
}

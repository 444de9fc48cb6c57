import { hashToken } from '../tokens.js';
import { findToken, revokeFamily, revokeTokenById, type OAuthClientRow } from '../../store/oauth.js';
import type { OAuthDeps } from './deps.js';
import { oauthError } from './errors.js';

/** The revocation endpoint's logic, apart from token.ts because it issues nothing. */

/**
 * RFC 7009: revokes a token the client holds. Unknown tokens, and tokens of other clients,
 * are answered the same way (success) so the endpoint tells nothing. A refresh token takes
 * its whole family with it (§2.1: "SHOULD also invalidate all access tokens").
 */
export async function revokeToken(deps: OAuthDeps, client: OAuthClientRow, token: string | undefined): Promise<void> {
  if (!token) throw oauthError('invalid_request', 'token is required.');
  const now = deps.clock.now();
  await deps.db.transaction(async (tx) => {
    const row = await findToken(tx, hashToken(token));
    if (!row || row.clientId !== client.clientId) return;
    if (row.kind === 'refresh') await revokeFamily(tx, row.familyId, now);
    else await revokeTokenById(tx, row.id, now);
  });
}

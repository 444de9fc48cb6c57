import { createHash, randomUUID, timingSafeEqual } from 'node:crypto';
import { hashToken, issueToken } from '../tokens.js';
import type { Queryable } from '../../store/driver.js';
import {
  consumeCode,
  findCode,
  findToken,
  getClientConnection,
  insertToken,
  liveClientConnection,
  revokeFamily,
  rotateRefreshToken,
  type OAuthClientRow,
  type TokenRow,
} from '../../store/oauth.js';
import type { Access } from '../context.js';
import type { OAuthDeps } from './deps.js';
import { oauthError } from './errors.js';
import { parseScope, scopeString } from './scopes.js';

/**
 * The token endpoint (RFC 6749 §3.2, §4.1.3, §4.4, §6; RFC 7636 §4.6): a code redeemed with its
 * PKCE verifier, or a refresh token rotated, each for a new access and refresh token pair; or a
 * confidential client's own credentials for an access token alone. The client is authenticated
 * before these run (clients.ts).
 */

export const ACCESS_TOKEN_TTL_MS = 3_600_000;
export const REFRESH_TOKEN_TTL_MS = 30 * 86_400_000;

export interface TokenResponse {
  access_token: string;
  token_type: 'Bearer';
  expires_in: number;
  refresh_token: string;
  scope: string;
}

async function issuePair(
  tx: Queryable,
  fields: { familyId: string; connectionId: string; workspaceId: string; clientId: string; scope: string; resource: string },
  now: number,
): Promise<TokenResponse> {
  const access = issueToken('oauth');
  const refresh = issueToken('refresh');
  await insertToken(tx, {
    id: randomUUID(),
    tokenHash: access.hash,
    tokenPrefix: access.displayPrefix,
    kind: 'access',
    ...fields,
    expiresAt: now + ACCESS_TOKEN_TTL_MS,
    createdAt: now,
  });
  await insertToken(tx, {
    id: randomUUID(),
    tokenHash: refresh.hash,
    tokenPrefix: refresh.displayPrefix,
    kind: 'refresh',
    ...fields,
    expiresAt: now + REFRESH_TOKEN_TTL_MS,
    createdAt: now,
  });
  return { access_token: access.token, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_MS / 1000, refresh_token: refresh.token, scope: fields.scope };
}

const PKCE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

function pkceMatches(verifier: string, challenge: string): boolean {
  if (!PKCE_VERIFIER.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

/** Outcome of a token request: the answer, or an error after which some writes must still commit. */
type Outcome = { ok: true; tokens: TokenResponse } | { ok: false; error: ReturnType<typeof oauthError> };

/** A client's `resource` names the one a code or token was issued for: the same string, or an alias of this server's (OAuthDeps.isResource). */
function namesStored(deps: OAuthDeps, given: string, stored: string): boolean {
  return given === stored || (stored === deps.resource && deps.isResource(given));
}

async function connectionIsLive(tx: Queryable, connectionId: string, now: number): Promise<boolean> {
  const connection = await getClientConnection(tx, connectionId);
  return connection !== undefined && connection.revokedAt === null && (connection.expiresAt === null || connection.expiresAt > now);
}

export async function exchangeCode(
  deps: OAuthDeps,
  client: OAuthClientRow,
  params: { code?: string | undefined; redirect_uri?: string | undefined; code_verifier?: string | undefined; resource?: string | undefined },
): Promise<TokenResponse> {
  if (!params.code) throw oauthError('invalid_request', 'code is required.');
  if (!params.code_verifier) throw oauthError('invalid_request', 'code_verifier is required (PKCE).');
  if (!params.redirect_uri) throw oauthError('invalid_request', 'redirect_uri is required.');
  const now = deps.clock.now();
  const codeHash = hashToken(params.code);
  // Errors are returned, not thrown, inside the transaction so that consuming the code and
  // revoking a replayed code's tokens commit even though the request fails.
  const outcome = await deps.db.transaction(async (tx): Promise<Outcome> => {
    const code = await findCode(tx, codeHash);
    if (!code || code.clientId !== client.clientId)
      return { ok: false, error: oauthError('invalid_grant', 'The code is unknown or was issued to another client.') };
    if (!(await consumeCode(tx, codeHash, now))) {
      // RFC 6749 §4.1.2 / OAuth 2.1 §4.1.3: a code used twice may have been stolen; what it issued is revoked.
      const revoked = await revokeFamily(tx, code.familyId, now);
      deps.log.info({ msg: 'authorization code replayed', clientId: client.clientId, revokedTokens: revoked });
      return { ok: false, error: oauthError('invalid_grant', 'The code was already used; the tokens issued from it are revoked.') };
    }
    if (code.expiresAt <= now) return { ok: false, error: oauthError('invalid_grant', 'The code has expired (codes live 60 seconds).') };
    if (code.redirectUri !== params.redirect_uri)
      return { ok: false, error: oauthError('invalid_grant', 'redirect_uri does not match the authorization request.') };
    if (!pkceMatches(params.code_verifier!, code.codeChallenge))
      return { ok: false, error: oauthError('invalid_grant', 'The code_verifier does not match the code_challenge.') };
    if (params.resource !== undefined && !namesStored(deps, params.resource, code.resource)) {
      return { ok: false, error: oauthError('invalid_target', 'resource differs from the one the code was issued for.') };
    }
    if (!(await connectionIsLive(tx, code.connectionId, now))) return { ok: false, error: oauthError('invalid_grant', 'The client was revoked.') };
    const tokens = await issuePair(
      tx,
      {
        familyId: code.familyId,
        connectionId: code.connectionId,
        workspaceId: code.workspaceId,
        clientId: code.clientId,
        scope: code.scope,
        resource: code.resource,
      },
      now,
    );
    return { ok: true, tokens };
  });
  if (!outcome.ok) throw outcome.error;
  return outcome.tokens;
}

export async function refreshTokens(
  deps: OAuthDeps,
  client: OAuthClientRow,
  params: { refresh_token?: string | undefined; scope?: string | undefined; resource?: string | undefined },
): Promise<TokenResponse> {
  if (!params.refresh_token) throw oauthError('invalid_request', 'refresh_token is required.');
  const now = deps.clock.now();
  const hash = hashToken(params.refresh_token);
  // OAuth 2.1 §4.3.1 / BCP 240 §4.14.2: a rotated refresh token presented again means two
  // parties hold it; the whole family is revoked, the legitimate client signs in again.
  const reuse = async (tx: Queryable, token: TokenRow): Promise<Outcome> => {
    const revoked = await revokeFamily(tx, token.familyId, now);
    deps.log.info({ msg: 'refresh token reused', clientId: client.clientId, revokedTokens: revoked });
    return { ok: false, error: oauthError('invalid_grant', 'The refresh token was already used; every token of this authorization is revoked.') };
  };
  const outcome = await deps.db.transaction(async (tx): Promise<Outcome> => {
    const token = await findToken(tx, hash);
    if (!token || token.kind !== 'refresh' || token.clientId !== client.clientId) {
      return { ok: false, error: oauthError('invalid_grant', 'The refresh token is unknown or was issued to another client.') };
    }
    if (token.revokedAt !== null) return { ok: false, error: oauthError('invalid_grant', 'The refresh token is revoked.') };
    // Reuse first: a rotated token presented again revokes its family whatever else is wrong.
    if (token.rotatedAt !== null) return reuse(tx, token);
    // Every other check comes before the rotation, so that a refused request (a bad scope or
    // resource, an expired token) writes nothing: the client keeps its refresh token instead
    // of losing it and then tripping the reuse detection with its next, valid, request.
    if (token.expiresAt <= now) return { ok: false, error: oauthError('invalid_grant', 'The refresh token has expired.') };
    if (params.resource !== undefined && !namesStored(deps, params.resource, token.resource)) {
      return { ok: false, error: oauthError('invalid_target', 'resource differs from the one the token was issued for.') };
    }
    let scope = token.scope;
    if (params.scope !== undefined && params.scope !== '') {
      let asked: Access;
      try {
        asked = parseScope(params.scope);
      } catch (error) {
        return { ok: false, error: error as ReturnType<typeof oauthError> };
      }
      const original = parseScope(token.scope);
      if (asked === 'act' && original !== 'act')
        return { ok: false, error: oauthError('invalid_scope', 'A refresh cannot widen the scope the owner approved.') };
      scope = scopeString(asked);
    }
    if (!(await connectionIsLive(tx, token.connectionId, now))) return { ok: false, error: oauthError('invalid_grant', 'The client was revoked.') };
    // Guarded: of two requests racing with the same token, one rotates it and the other is reuse.
    if (!(await rotateRefreshToken(tx, token.id, now))) return reuse(tx, token);
    const tokens = await issuePair(
      tx,
      { familyId: token.familyId, connectionId: token.connectionId, workspaceId: token.workspaceId, clientId: token.clientId, scope, resource: token.resource },
      now,
    );
    return { ok: true, tokens };
  });
  if (!outcome.ok) throw outcome.error;
  return outcome.tokens;
}

/** A client_credentials answer: an access token alone (RFC 6749 §4.4.3 says no refresh token). */
export type AccessTokenResponse = Omit<TokenResponse, 'refresh_token'>;

/**
 * RFC 6749 §4.4: a confidential client the owner registered acts as its own principal, with no
 * person at a browser. Its connection (made at registration) holds the ceiling the scope is
 * capped by and the principal its grants name, exactly as for the authorization code flow; a
 * dynamic or metadata-document client has no owner who vouched for it until consent, so it
 * may not skip consent this way.
 */
export async function clientCredentialsToken(
  deps: OAuthDeps,
  client: OAuthClientRow,
  params: { scope?: string | undefined; resource?: string | undefined },
): Promise<AccessTokenResponse> {
  if (client.public) throw oauthError('unauthorized_client', 'A public client cannot use client_credentials: it has no secret to prove itself with.');
  if (client.source !== 'registered' || client.workspaceId === null) {
    throw oauthError('unauthorized_client', 'Only a confidential client the owner registered (POST /v1/oauth-clients) may use client_credentials.');
  }
  // The loopback aliases are one resource (PUBLIC_BASE_URL unset), as for the other grants.
  if (params.resource !== undefined && !deps.isResource(params.resource)) {
    throw oauthError('invalid_target', `This server issues tokens for ${deps.resource} only.`);
  }
  const now = deps.clock.now();
  const connection = await liveClientConnection(deps.db, client.workspaceId, client.id);
  if (!connection || (connection.expiresAt !== null && connection.expiresAt <= now)) throw oauthError('invalid_client', 'The client was revoked.');
  let access: Access = connection.access;
  if (params.scope !== undefined && params.scope !== '') {
    access = parseScope(params.scope);
    if (access === 'act' && connection.access !== 'act')
      throw oauthError('invalid_scope', 'The scope asked for is above the ceiling the owner set for this client (read).');
  }
  const token = issueToken('oauth');
  const scope = scopeString(access);
  await insertToken(deps.db, {
    id: randomUUID(),
    tokenHash: token.hash,
    tokenPrefix: token.displayPrefix,
    kind: 'access',
    // Each token is its own family: nothing rotates from it, and revoking it revokes it alone.
    familyId: randomUUID(),
    connectionId: connection.id,
    workspaceId: connection.workspaceId,
    clientId: client.clientId,
    scope,
    resource: deps.resource,
    expiresAt: now + ACCESS_TOKEN_TTL_MS,
    createdAt: now,
  });
  return { access_token: token.token, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_MS / 1000, scope };
}

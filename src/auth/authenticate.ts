import type { Credential } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { findConnectionByTokenHash } from '../store/connections.js';
import { findDeviceByTokenHash } from '../store/devices.js';
import type { Db } from '../store/driver.js';
import { workspaceForOwner } from '../store/workspaces.js';
import { resolveOAuthAccessToken } from './oauth-tokens.js';
import type { OwnerVerifier } from './owner.js';
import { hashToken, tokenKinds, tokenKindOf, type TokenKind } from '../domain/tokens.js';

export interface Authenticator {
  /**
   * Resolves a bearer token to the credential it is. No token: null (the operation decides
   * whether that is allowed). A token that is unknown, expired or revoked: `unauthorized`.
   * `clientAddress` lets a rate-limiting authenticator count failures per address.
   */
  authenticate(bearer: string | null, clientAddress?: string): Promise<Credential | null>;
}

/** The unlimited authenticator, and what the rate-limiting wrapper asks it before a lookup. */
export interface CredentialResolver extends Authenticator {
  /**
   * Whether looking the token up could succeed, decided without a database read or a signature
   * check: an opaque bearer kind with the shape `issueToken` gives it, or an owner JWT whose
   * unverified header and claims fit (`OwnerVerifier.plausible`).
   */
  plausible(bearer: string): boolean;
}

/** A prefix and 32 random bytes in base64url (src/domain/tokens.ts `issueToken`). */
const OPAQUE_BODY = /^[A-Za-z0-9_-]{43}$/;
const BEARER_KINDS = new Set<TokenKind | undefined>(['agent', 'setup', 'device', 'oauth']);

const invalid = () => new DomainError('unauthorized', 'The credential is unknown, expired or revoked.');

export function createAuthenticator(deps: {
  db: Db;
  owners: OwnerVerifier;
  now: () => number;
  /** `${PUBLIC_BASE_URL}/mcp`: OAuth access tokens bound to another resource are refused. */
  oauthResource: string;
}): CredentialResolver {
  const { db, owners, now, oauthResource } = deps;
  return {
    plausible(bearer) {
      const kind = tokenKindOf(bearer);
      if (kind === undefined) return bearer.split('.').length === 3 && owners.plausible(bearer);
      return BEARER_KINDS.has(kind) && OPAQUE_BODY.test(bearer.slice(tokenKinds[kind].length));
    },
    async authenticate(bearer) {
      if (bearer === null) return null;
      const kind = tokenKindOf(bearer);
      if (kind === 'agent' || kind === 'setup') {
        const row = await findConnectionByTokenHash(db, hashToken(bearer));
        const purpose = kind === 'agent' ? 'agent' : 'device-setup';
        if (!row || row.purpose !== purpose || row.revokedAt !== null) throw invalid();
        if (row.expiresAt !== null && row.expiresAt <= now()) throw invalid();
        return kind === 'agent'
          ? {
              kind: 'agent',
              workspaceId: row.workspaceId,
              connectionId: row.id,
              principal: row.principal,
              access: row.access,
              functionsVersion: row.functionsVersion,
            }
          : { kind: 'setup', workspaceId: row.workspaceId, connectionId: row.id };
      }
      if (kind === 'oauth') {
        const credential = await resolveOAuthAccessToken(db, bearer, now(), oauthResource);
        if (!credential) throw invalid();
        return credential;
      }
      if (kind === 'device') {
        const row = await findDeviceByTokenHash(db, hashToken(bearer));
        if (!row || row.revokedAt !== null) throw invalid();
        return {
          kind: 'device',
          workspaceId: row.workspaceId,
          deviceId: row.id,
          routingId: row.routingId,
          lastSeenAt: row.lastSeenAt,
          declaresResults: row.declaresResults === 1,
        };
      }
      if (kind === undefined && bearer.split('.').length === 3) {
        const identity = await owners.verify(bearer);
        if (!identity) throw invalid();
        const workspace = await workspaceForOwner(db, identity.workspaceKey, now());
        return {
          kind: 'owner',
          workspaceId: workspace.id,
          subject: identity.subject,
          ...(identity.expiresAt !== undefined ? { expiresAt: identity.expiresAt } : {}),
        };
      }
      throw invalid();
    },
  };
}

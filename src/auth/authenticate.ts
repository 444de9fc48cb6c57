import type { Credential } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { findConnectionByTokenHash } from '../store/connections.js';
import { findDeviceByTokenHash } from '../store/devices.js';
import type { Db } from '../store/driver.js';
import { workspaceForOwner } from '../store/workspaces.js';
import { resolveOAuthAccessToken } from './oauth-tokens.js';
import type { OwnerVerifier } from './owner.js';
import { hashToken, tokenKindOf } from '../domain/tokens.js';

export interface Authenticator {
  /**
   * Resolves a bearer token to the credential it is. No token: null (the operation decides
   * whether that is allowed). A token that is unknown, expired or revoked: `unauthorized`.
   * `clientAddress` lets a rate-limiting authenticator count failures per address.
   */
  authenticate(bearer: string | null, clientAddress?: string): Promise<Credential | null>;
}

const invalid = () => new DomainError('unauthorized', 'The credential is unknown, expired or revoked.');

export function createAuthenticator(deps: {
  db: Db;
  owners: OwnerVerifier;
  now: () => number;
  /** `${PUBLIC_BASE_URL}/mcp`: OAuth access tokens bound to another resource are refused. */
  oauthResource: string;
}): Authenticator {
  const { db, owners, now, oauthResource } = deps;
  return {
    async authenticate(bearer) {
      if (bearer === null) return null;
      const kind = tokenKindOf(bearer);
      if (kind === 'agent' || kind === 'setup') {
        const row = await findConnectionByTokenHash(db, hashToken(bearer));
        const purpose = kind === 'agent' ? 'agent' : 'device-setup';
        if (!row || row.purpose !== purpose || row.revokedAt !== null) throw invalid();
        if (row.expiresAt !== null && row.expiresAt <= now()) throw invalid();
        return kind === 'agent'
          ? { kind: 'agent', workspaceId: row.workspaceId, connectionId: row.id, principal: row.principal, access: row.access }
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
        return { kind: 'device', workspaceId: row.workspaceId, deviceId: row.id, routingId: row.routingId, lastSeenAt: row.lastSeenAt };
      }
      if (kind === undefined && bearer.split('.').length === 3) {
        const identity = await owners.verify(bearer);
        if (!identity) throw invalid();
        const workspace = await workspaceForOwner(db, identity.workspaceKey, now());
        return { kind: 'owner', workspaceId: workspace.id, subject: identity.subject };
      }
      throw invalid();
    },
  };
}

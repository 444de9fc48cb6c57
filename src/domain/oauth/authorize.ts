import { randomUUID } from 'node:crypto';
import { hashToken, issueToken } from '../tokens.js';
import { insertConnection } from '../../store/connections.js';
import { assertWithinCap } from '../capacity.js';
import type { Queryable } from '../../store/driver.js';
import { callableFunctions, workspaceFunctions } from '../../store/callable-functions.js';
import { BROWSER_GRANT_DEFAULTS } from '../grant-defaults.js';
import {
  clientApproved,
  getClientConnection,
  insertCode,
  linkConnection,
  liveClientConnection,
  raiseConnectionAccess,
  type OAuthClientRow,
  type OAuthConnectionRow,
} from '../../store/oauth.js';
import type { Access } from '../context.js';
import { defaultPrincipal, resolveClient } from './clients.js';
import { persistMetadataClient } from './metadata-documents.js';
import type { OAuthDeps } from './deps.js';
import { oauthError, UnsafeAuthorizationRequest } from './errors.js';
import { isLoopbackRedirect } from './redirects.js';
import { lowerAccess, parseScope, scopeString } from './scopes.js';
import type { OwnerSession } from '../owner-sessions.js';

/**
 * Authorization requests (RFC 6749 §4.1.1 with PKCE, RFC 8707, RFC 9207): checking one,
 * what the consent page shows for it, and the one-use code an approval issues. The code is
 * redeemed in token.ts.
 */

export const CODE_TTL_MS = 60_000;

export interface AuthorizationParams {
  response_type?: string | undefined;
  client_id?: string | undefined;
  redirect_uri?: string | undefined;
  code_challenge?: string | undefined;
  code_challenge_method?: string | undefined;
  state?: string | undefined;
  scope?: string | undefined;
  resource?: string | undefined;
  /** Parameters the request carried more than once (RFC 6749 §3.1: "MUST NOT be included more than once"). */
  repeated?: readonly string[] | undefined;
}

export interface ValidAuthorization {
  client: OAuthClientRow;
  redirectUri: string;
  state: string | undefined;
  codeChallenge: string;
  requested: Access;
  resource: string;
}

/** Where errors of this request may be sent back to (once client and redirect URI are trusted). */
export interface ErrorDestination {
  redirectUri: string;
  state: string | undefined;
}

const PKCE_CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

/**
 * Checks an authorization request. Client or redirect URI problems throw
 * UnsafeAuthorizationRequest (shown as a page, never redirected); every later problem throws
 * an OAuthProtocolError together with the destination it may be reported to.
 */
export async function checkAuthorizationRequest(
  deps: OAuthDeps,
  params: AuthorizationParams,
  /** The owner signed in on this browser, if any: only their approval makes a dynamic client's redirect URI trusted. */
  owner: OwnerSession | undefined,
): Promise<{ ok: true; value: ValidAuthorization } | { ok: false; error: ReturnType<typeof oauthError>; to: ErrorDestination }> {
  const repeated = params.repeated ?? [];
  // Which client or redirect URI is meant is unclear: nothing may be sent back to either.
  for (const name of ['client_id', 'redirect_uri']) {
    if (repeated.includes(name)) throw new UnsafeAuthorizationRequest(`The request carries ${name} more than once.`);
  }
  if (!params.client_id) throw new UnsafeAuthorizationRequest('The request names no client (client_id is missing).');
  const client = await resolveClient(deps, params.client_id);
  if (!client) throw new UnsafeAuthorizationRequest('The client is not known to this service.');
  if (!params.redirect_uri) throw new UnsafeAuthorizationRequest('The request has no redirect_uri.');
  if (!client.redirectUris.includes(params.redirect_uri)) {
    throw new UnsafeAuthorizationRequest('The redirect_uri is not one the client registered (they must match exactly).');
  }
  const to = { redirectUri: params.redirect_uri, state: params.state };
  // A dynamically registered client's redirect URI is whatever its anonymous registration
  // said; until the signed-in owner has approved the client in their own workspace, an error
  // redirect there would make this server an open redirector (RFC 9700 §4.11.2), so errors are
  // shown as a page. Approval in some other workspace vouches for nothing: anyone can make a
  // workspace and approve their own client there. Registered clients were made by an owner,
  // and a metadata document's URIs are vouched for by its host.
  const trusted = client.source !== 'dynamic' || (owner !== undefined && (await clientApproved(deps.db, client.id, owner.workspaceId)));
  const fail = (error: ReturnType<typeof oauthError>) => {
    if (!trusted) throw new UnsafeAuthorizationRequest(`${error.description} (${error.code})`);
    return { ok: false as const, error, to };
  };
  if (repeated.length > 0) return fail(oauthError('invalid_request', `Parameter ${repeated[0]} is repeated.`));
  if (params.response_type !== 'code') return fail(oauthError('unsupported_response_type', 'Only response_type=code is supported.'));
  if (!params.code_challenge) return fail(oauthError('invalid_request', 'PKCE is required: code_challenge is missing.'));
  if (params.code_challenge_method !== 'S256') return fail(oauthError('invalid_request', 'code_challenge_method must be S256.'));
  if (!PKCE_CHALLENGE.test(params.code_challenge)) return fail(oauthError('invalid_request', 'code_challenge is not a base64url SHA-256 digest.'));
  if (!params.resource) return fail(oauthError('invalid_target', `The resource parameter is required; use ${deps.issuer}/mcp.`));
  if (!deps.isResource(params.resource)) return fail(oauthError('invalid_target', `This server issues tokens for ${deps.issuer}/mcp only.`));
  let requested: Access;
  try {
    requested = parseScope(params.scope);
  } catch (error) {
    return fail(error as ReturnType<typeof oauthError>);
  }
  return {
    ok: true,
    value: { client, redirectUri: params.redirect_uri, state: params.state, codeChallenge: params.code_challenge, requested, resource: deps.resource },
  };
}

export interface ConsentView {
  clientName: string;
  clientId: string;
  clientUri: string | null;
  source: OAuthClientRow['source'];
  redirectUri: string;
  redirectHost: string;
  /** Every redirect URI is on this computer: the code goes to whatever listens there. */
  loopbackOnly: boolean;
  principal: string;
  requested: Access;
  /** What the token will carry: the request capped by a registered client's ceiling. */
  granted: Access;
  devices: { id: string; name: string; functions: { name: string; kind: 'read' | 'control' }[] }[];
  /**
   * The workspace's functions the principal is not granted yet, by device, which the owner may
   * grant on the consent page in the same step (each pick with `grantDefaults`). The first
   * CONSENT_OFFER_LIMIT functions only: more are granted in the console.
   */
  offered: { id: string; name: string; functions: { name: string; kind: 'read' | 'control' }[] }[];
  /** True when the workspace has more functions than the page offers. */
  offerTruncated: boolean;
  grantDefaults: typeof BROWSER_GRANT_DEFAULTS;
}

/** How many not yet granted functions the consent page offers at most. */
export const CONSENT_OFFER_LIMIT = 200;

/** A pick on the consent page: `<device id>:<function name>`. */
export const consentPick = (deviceId: string, capability: string) => `${deviceId}:${capability}`;

/** Registered clients serve only their own workspace; the consent page treats others as unknown. */
async function connectionFor(db: Queryable, owner: OwnerSession, client: OAuthClientRow): Promise<OAuthConnectionRow | undefined> {
  if (client.source === 'registered') {
    if (client.workspaceId !== owner.workspaceId) throw new UnsafeAuthorizationRequest('The client is not known to this service.');
    const connection = await liveClientConnection(db, owner.workspaceId, client.id);
    if (!connection) throw new UnsafeAuthorizationRequest('This client has been revoked.');
    return connection;
  }
  return liveClientConnection(db, owner.workspaceId, client.id);
}

/** What the consent page shows the signed-in owner for a valid request. */
export async function consentView(deps: OAuthDeps, owner: OwnerSession, request: ValidAuthorization): Promise<ConsentView> {
  const { client } = request;
  const connection = await connectionFor(deps.db, owner, client);
  const principal = connection?.principal ?? defaultPrincipal(client.clientId, client.id);
  const granted = client.source === 'registered' ? lowerAccess(request.requested, connection!.access) : request.requested;
  const functions = await callableFunctions(deps.db, owner.workspaceId, principal, 'act', deps.clock.now());
  const devices = new Map<string, ConsentView['devices'][number]>();
  for (const fn of functions) {
    const device = devices.get(fn.deviceId) ?? { id: fn.deviceId, name: fn.deviceName, functions: [] };
    device.functions.push({ name: fn.capability, kind: fn.kind });
    devices.set(fn.deviceId, device);
  }
  const alreadyGranted = new Set(functions.map((fn) => consentPick(fn.deviceId, fn.capability)));
  const all = await workspaceFunctions(deps.db, owner.workspaceId, { limit: CONSENT_OFFER_LIMIT, after: null });
  const offered = new Map<string, ConsentView['offered'][number]>();
  for (const fn of all.rows) {
    if (alreadyGranted.has(consentPick(fn.deviceId, fn.capability))) continue;
    const name = fn.parentName === null ? fn.deviceName : `${fn.deviceName} (on ${fn.parentName})`;
    const device = offered.get(fn.deviceId) ?? { id: fn.deviceId, name, functions: [] };
    device.functions.push({ name: fn.capability, kind: fn.kind });
    offered.set(fn.deviceId, device);
  }
  return {
    clientName: client.name,
    clientId: client.clientId,
    clientUri: client.clientUri,
    source: client.source,
    redirectUri: request.redirectUri,
    redirectHost: new URL(request.redirectUri).host,
    loopbackOnly: client.redirectUris.every(isLoopbackRedirect),
    principal,
    requested: request.requested,
    granted,
    devices: [...devices.values()],
    offered: [...offered.values()],
    offerTruncated: all.next !== null,
    grantDefaults: BROWSER_GRANT_DEFAULTS,
  };
}

/**
 * The owner approved: the client's connection in this workspace is found or created (a
 * dynamic or metadata-document client gets one on first approval, its ceiling raised to
 * what the owner approved), and a one-use code valid 60 s is issued.
 */
export async function approveAuthorization(
  deps: OAuthDeps,
  owner: OwnerSession,
  request: ValidAuthorization,
  /** The owner may approve less than asked (read only); never more. */
  approved: Access = request.requested,
): Promise<{ code: string }> {
  const now = deps.clock.now();
  const allowed = lowerAccess(approved, request.requested);
  const code = issueToken('code');
  await deps.db.transaction(async (tx) => {
    const { client } = request;
    let connection = await connectionFor(tx, owner, client);
    let granted = allowed;
    if (client.source === 'registered') {
      granted = lowerAccess(allowed, connection!.access);
    } else if (!connection) {
      await persistMetadataClient(tx, deps.clientDocuments, client);
      const id = randomUUID();
      await insertConnection(tx, {
        id,
        workspaceId: owner.workspaceId,
        purpose: 'agent',
        name: client.name.slice(0, 64),
        principal: defaultPrincipal(client.clientId, client.id),
        access: allowed,
        // An OAuth client's connection has no bearer token of its own: a random hash that
        // no issued token can match fills the column.
        tokenHash: hashToken(randomUUID()),
        tokenPrefix: '',
        deviceLimit: 0,
        expiresAt: null,
        createdBy: owner.subject,
        createdAt: now,
      });
      await linkConnection(tx, id, client.id);
      // The connection counts against the workspace's caps like one the owner creates by hand;
      // over a cap the whole approval rolls back.
      await assertWithinCap(tx, deps.capacity, 'agentConnections', owner.workspaceId, now);
      await assertWithinCap(tx, deps.capacity, 'oauthClients', owner.workspaceId, now);
      connection = await getClientConnection(tx, id);
    } else if (allowed === 'act' && connection.access !== 'act') {
      await raiseConnectionAccess(tx, connection.id);
    }
    await insertCode(tx, {
      codeHash: code.hash,
      familyId: randomUUID(),
      connectionId: connection!.id,
      workspaceId: owner.workspaceId,
      clientId: client.clientId,
      redirectUri: request.redirectUri,
      codeChallenge: request.codeChallenge,
      scope: scopeString(granted),
      resource: request.resource,
      expiresAt: now + CODE_TTL_MS,
      createdBy: owner.subject,
      createdAt: now,
    });
  });
  return { code: code.token };
}

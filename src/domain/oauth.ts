import { createHash, createHmac, randomUUID, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import { hashToken, issueToken } from './tokens.js';
import { insertConnection } from '../store/connections.js';
import type { Db, Queryable } from '../store/driver.js';
import { callableFunctions } from '../store/grants.js';
import {
  consumeCode,
  deleteSession,
  findClient,
  findCode,
  findSession,
  findToken,
  getClientConnection,
  insertClient,
  insertCode,
  insertSession,
  insertToken,
  linkConnection,
  liveClientConnection,
  raiseConnectionAccess,
  revokeFamily,
  revokeTokenById,
  rotateRefreshToken,
  type OAuthClientRow,
  type OAuthConnectionRow,
  type TokenRow,
} from '../store/oauth.js';
import type { Access, Clock, Logger } from './context.js';
import { inputIssues } from './input-limits.js';
import { metadataDocumentUrl, MetadataDocumentError, resolveMetadataClient, type DocumentFetcher } from './oauth-cimd.js';
import { oauthError, UnsafeAuthorizationRequest } from './oauth-errors.js';
import { isLoopbackRedirect, redirectUriProblem } from './oauth-redirects.js';

/**
 * The authorization server's protocol logic (decisions §7, issue 6), free of HTTP: the
 * endpoints in src/oauth parse requests into these calls and render what they return.
 */

export const CODE_TTL_MS = 60_000;
export const ACCESS_TOKEN_TTL_MS = 3_600_000;
export const REFRESH_TOKEN_TTL_MS = 30 * 86_400_000;
export const SESSION_MAX_TTL_MS = 8 * 3_600_000;
export const SCOPES = ['read', 'act'] as const;

export interface OAuthDeps {
  db: Db;
  clock: Clock;
  log: Logger;
  /** PUBLIC_BASE_URL: the issuer, served at /.well-known/oauth-authorization-server. */
  issuer: string;
  /** `${PUBLIC_BASE_URL}/mcp`: the only resource (RFC 8707) tokens are issued for. */
  resource: string;
  fetchClientDocument: DocumentFetcher;
  /** OAUTH_CIMD_ALLOW_LOOPBACK: test-only, admits http loopback document URLs. */
  cimdAllowLoopback: boolean;
}

export interface OwnerSession {
  workspaceId: string;
  subject: string;
}

// Scopes: a ceiling only (decisions §3); `act` implies `read`.

/** Parses a scope string into the access it asks for; empty means `read`. */
export function parseScope(scope: string | undefined): Access {
  const names = (scope ?? '').split(' ').filter((s) => s !== '');
  for (const name of names) {
    if (!(SCOPES as readonly string[]).includes(name)) throw oauthError('invalid_scope', `Unknown scope "${name}". Scopes are read and act.`);
  }
  return names.includes('act') ? 'act' : 'read';
}

export const scopeString = (access: Access): string => (access === 'act' ? 'read act' : 'read');
export const scopesOf = (access: Access): Access[] => (access === 'act' ? ['read', 'act'] : ['read']);
export const lowerAccess = (a: Access, b: Access): Access => (a === 'act' && b === 'act' ? 'act' : 'read');

// Clients.

/** `oauth:<client id>` (decisions §3), or by application id when the client id is too long for a principal. */
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
    return await resolveMetadataClient({ db: deps.db, now: deps.clock.now(), fetchDocument: deps.fetchClientDocument }, url);
  } catch (error) {
    deps.log.info({ msg: 'client metadata document refused', clientId, reason: error instanceof Error ? error.message : String(error) });
    if (error instanceof MetadataDocumentError) throw new UnsafeAuthorizationRequest(`The client's metadata document was refused: ${error.message}.`);
    throw new UnsafeAuthorizationRequest(`The client's metadata document could not be fetched: ${error instanceof Error ? error.message : 'error'}.`);
  }
}

// Authorization requests (RFC 6749 §4.1.1 with PKCE, RFC 8707, RFC 9207).

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
const PKCE_VERIFIER = /^[A-Za-z0-9._~-]{43,128}$/;

/**
 * Checks an authorization request. Client or redirect URI problems throw
 * UnsafeAuthorizationRequest (shown as a page, never redirected); every later problem throws
 * an OAuthProtocolError together with the destination it may be reported to.
 */
export async function checkAuthorizationRequest(
  deps: OAuthDeps,
  params: AuthorizationParams,
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
  const fail = (error: ReturnType<typeof oauthError>) => ({ ok: false as const, error, to });
  if (repeated.length > 0) return fail(oauthError('invalid_request', `Parameter ${repeated[0]} is repeated.`));
  if (params.response_type !== 'code') return fail(oauthError('unsupported_response_type', 'Only response_type=code is supported.'));
  if (!params.code_challenge) return fail(oauthError('invalid_request', 'PKCE is required: code_challenge is missing.'));
  if (params.code_challenge_method !== 'S256') return fail(oauthError('invalid_request', 'code_challenge_method must be S256.'));
  if (!PKCE_CHALLENGE.test(params.code_challenge)) return fail(oauthError('invalid_request', 'code_challenge is not a base64url SHA-256 digest.'));
  if (!params.resource) return fail(oauthError('invalid_target', `The resource parameter is required; use ${deps.resource}.`));
  if (params.resource !== deps.resource) return fail(oauthError('invalid_target', `This server issues tokens for ${deps.resource} only.`));
  let requested: Access;
  try {
    requested = parseScope(params.scope);
  } catch (error) {
    return fail(error as ReturnType<typeof oauthError>);
  }
  return {
    ok: true,
    value: { client, redirectUri: params.redirect_uri, state: params.state, codeChallenge: params.code_challenge, requested, resource: params.resource },
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
}

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

// The token endpoint (RFC 6749 §3.2, §4.1.3, §6; RFC 7636 §4.6).

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
  } catch {
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
  await insertToken(tx, { id: randomUUID(), tokenHash: access.hash, tokenPrefix: access.displayPrefix, kind: 'access', ...fields, expiresAt: now + ACCESS_TOKEN_TTL_MS, createdAt: now });
  await insertToken(tx, { id: randomUUID(), tokenHash: refresh.hash, tokenPrefix: refresh.displayPrefix, kind: 'refresh', ...fields, expiresAt: now + REFRESH_TOKEN_TTL_MS, createdAt: now });
  return { access_token: access.token, token_type: 'Bearer', expires_in: ACCESS_TOKEN_TTL_MS / 1000, refresh_token: refresh.token, scope: fields.scope };
}

function pkceMatches(verifier: string, challenge: string): boolean {
  if (!PKCE_VERIFIER.test(verifier)) return false;
  const computed = Buffer.from(createHash('sha256').update(verifier).digest('base64url'));
  const expected = Buffer.from(challenge);
  return computed.length === expected.length && timingSafeEqual(computed, expected);
}

/** Outcome of a token request: the answer, or an error after which some writes must still commit. */
type Outcome = { ok: true; tokens: TokenResponse } | { ok: false; error: ReturnType<typeof oauthError> };

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
    if (!code || code.clientId !== client.clientId) return { ok: false, error: oauthError('invalid_grant', 'The code is unknown or was issued to another client.') };
    if (!(await consumeCode(tx, codeHash, now))) {
      // RFC 6749 §4.1.2 / OAuth 2.1 §4.1.3: a code used twice may have been stolen; what it issued is revoked.
      const revoked = await revokeFamily(tx, code.familyId, now);
      deps.log.info({ msg: 'authorization code replayed', clientId: client.clientId, revokedTokens: revoked });
      return { ok: false, error: oauthError('invalid_grant', 'The code was already used; the tokens issued from it are revoked.') };
    }
    if (code.expiresAt <= now) return { ok: false, error: oauthError('invalid_grant', 'The code has expired (codes live 60 seconds).') };
    if (code.redirectUri !== params.redirect_uri) return { ok: false, error: oauthError('invalid_grant', 'redirect_uri does not match the authorization request.') };
    if (!pkceMatches(params.code_verifier!, code.codeChallenge)) return { ok: false, error: oauthError('invalid_grant', 'The code_verifier does not match the code_challenge.') };
    if (params.resource !== undefined && params.resource !== code.resource) {
      return { ok: false, error: oauthError('invalid_target', 'resource differs from the one the code was issued for.') };
    }
    if (!(await connectionIsLive(tx, code.connectionId, now))) return { ok: false, error: oauthError('invalid_grant', 'The client was revoked.') };
    const tokens = await issuePair(
      tx,
      { familyId: code.familyId, connectionId: code.connectionId, workspaceId: code.workspaceId, clientId: code.clientId, scope: code.scope, resource: code.resource },
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
    if (params.resource !== undefined && params.resource !== token.resource) {
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
      if (asked === 'act' && original !== 'act') return { ok: false, error: oauthError('invalid_scope', 'A refresh cannot widen the scope the owner approved.') };
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

// Dynamic client registration (RFC 7591), kept for older MCP clients; deprecated in the docs.

export const registrationRequest = z.looseObject({
  redirect_uris: z.array(z.string()).min(1).max(10),
  client_name: z.string().min(1).max(100).optional(),
  client_uri: z.url().max(512).optional(),
  token_endpoint_auth_method: z.enum(['none', 'client_secret_basic', 'client_secret_post']).default('client_secret_basic'),
  grant_types: z.array(z.string()).default(['authorization_code']),
  response_types: z.array(z.string()).default(['code']),
  scope: z.string().optional(),
});

export async function registerDynamicClient(deps: OAuthDeps, body: unknown): Promise<Record<string, unknown>> {
  // Text that cannot be stored as sent (NUL, lone surrogates) or nesting past the limit, as invoke refuses it on /v1.
  const unsafe = inputIssues(body)[0];
  if (unsafe) throw oauthError('invalid_client_metadata', `${unsafe.path || 'body'}: ${unsafe.message}`);
  const parsed = registrationRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const code = issue.path[0] === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata';
    throw oauthError(code, `${issue.path.join('.') || 'body'}: ${issue.message}`);
  }
  const request = parsed.data;
  for (const uri of request.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw oauthError('invalid_redirect_uri', `${uri} ${problem}.`);
  }
  const unsupportedGrant = request.grant_types.find((g) => g !== 'authorization_code' && g !== 'refresh_token');
  if (unsupportedGrant) throw oauthError('invalid_client_metadata', `grant type ${unsupportedGrant} is not supported.`);
  if (request.response_types.some((r) => r !== 'code')) throw oauthError('invalid_client_metadata', 'only response type code is supported.');
  if (request.scope !== undefined) parseScopeForMetadata(request.scope);

  const now = deps.clock.now();
  const isPublic = request.token_endpoint_auth_method === 'none';
  const secret = isPublic ? undefined : issueToken('clientSecret');
  const clientId = randomUUID();
  await insertClient(deps.db, {
    id: randomUUID(),
    clientId,
    source: 'dynamic',
    workspaceId: null,
    name: request.client_name ?? 'Unnamed client',
    clientUri: request.client_uri ?? null,
    redirectUris: request.redirect_uris,
    public: isPublic,
    secretHash: secret?.hash ?? null,
    secretPrefix: secret?.displayPrefix ?? null,
    freshUntil: null,
    createdAt: now,
    updatedAt: now,
  });
  return {
    client_id: clientId,
    client_id_issued_at: Math.floor(now / 1000),
    ...(secret ? { client_secret: secret.token, client_secret_expires_at: 0 } : {}),
    client_name: request.client_name ?? 'Unnamed client',
    ...(request.client_uri ? { client_uri: request.client_uri } : {}),
    redirect_uris: request.redirect_uris,
    token_endpoint_auth_method: request.token_endpoint_auth_method,
    grant_types: request.grant_types,
    response_types: request.response_types,
    ...(request.scope !== undefined ? { scope: request.scope } : {}),
  };
}

function parseScopeForMetadata(scope: string): void {
  try {
    parseScope(scope);
  } catch {
    throw oauthError('invalid_client_metadata', 'scope may only name read and act.');
  }
}

// Owner sessions of the consent page.

export async function createOwnerSession(deps: OAuthDeps, owner: OwnerSession, notAfter: number | undefined): Promise<{ token: string; expiresAt: number }> {
  const now = deps.clock.now();
  const session = issueToken('session');
  // A session never outlives the owner JWT it was made from, nor eight hours.
  const expiresAt = Math.min(now + SESSION_MAX_TTL_MS, notAfter ?? Number.POSITIVE_INFINITY);
  await insertSession(deps.db, { tokenHash: session.hash, workspaceId: owner.workspaceId, subject: owner.subject, expiresAt, createdAt: now });
  return { token: session.token, expiresAt };
}

export async function ownerSession(deps: OAuthDeps, token: string | undefined): Promise<OwnerSession | undefined> {
  if (!token) return undefined;
  const row = await findSession(deps.db, hashToken(token));
  if (!row || row.expiresAt <= deps.clock.now()) return undefined;
  return { workspaceId: row.workspaceId, subject: row.subject };
}

export async function endOwnerSession(deps: OAuthDeps, token: string | undefined): Promise<void> {
  if (token) await deleteSession(deps.db, hashToken(token));
}

/** The CSRF token of a session: derived from the session secret, so it is bound to it and needs no storage. */
export function csrfToken(sessionToken: string): string {
  return createHmac('sha256', sessionToken).update('dfc consent csrf').digest('base64url');
}

export function csrfMatches(sessionToken: string, presented: string | undefined): boolean {
  if (!presented) return false;
  const a = Buffer.from(csrfToken(sessionToken));
  const b = Buffer.from(presented);
  return a.length === b.length && timingSafeEqual(a, b);
}

import fs from 'node:fs';
import path from 'node:path';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  errors as joseErrors,
  importJWK,
  jwtVerify,
  SignJWT,
  type JWK,
  type JWTVerifyGetKey,
} from 'jose';
import type { Config } from '../config.js';
import type { Logger } from '../domain/context.js';
import { DomainError, oneLine } from '../domain/errors.js';

/** Asymmetric algorithms only: a shared-secret (HS*) token could be forged by anyone holding the JWKS. */
export const OWNER_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface OwnerIdentity {
  subject: string;
  /** The value of the workspace claim: names the owner's workspace. */
  workspaceKey: string;
  /** When the token stops authenticating, in milliseconds: its `exp` and the clock tolerance the verification allows. */
  expiresAt?: number;
}

export interface OwnerVerifier {
  /** Resolves the identity, or undefined when the token is not a valid owner session. */
  verify(token: string): Promise<OwnerIdentity | undefined>;
  /**
   * Whether the token could be a session at all, judged without cryptography or a key fetch:
   * an allowed algorithm, the configured `iss` and `aud`, an `exp` not passed. An address over
   * its failure budget gets a signature check only for such a token (docs/reference/rules.md "Errors and
   * limits"), so a flood of junk from it costs a decode, not a verification or a JWKS fetch.
   */
  plausible(token: string): boolean;
  /** Whether owner sessions can be verified now (docs/operators/identity-provider.md "Identity provider health"). */
  health(): IdentityProviderHealth;
}

/**
 * The identity provider as this instance sees it: `development` (the embedded key) and
 * `jwks-file` cannot fail once started; `jwks-url` fails while its key set cannot be fetched.
 * Shaped for a readiness probe to name the provider and why it fails.
 */
export interface IdentityProviderHealth {
  provider: 'development' | 'jwks-file' | 'jwks-url';
  ok: boolean;
  /** Unix ms of the first failed fetch of the current failure streak. */
  failingSince?: number;
  /** Failed fetches in the current streak. */
  failures?: number;
  /** The last failure, in one line. */
  error?: string;
}

export interface OwnerVerifierDeps {
  log: Logger;
  /** Told each failed fetch of OWNER_JWKS_URL (the `dfc_owner_jwks_fetch_failures_total` metric). */
  onKeySetFailure?: () => void;
}

/** The owner key set cannot be had at start: `variable` is the setting to fix (src/main.ts prints it). */
export class KeySetStartError extends Error {
  constructor(
    readonly variable: 'OWNER_JWKS_FILE' | 'OWNER_JWKS_URL',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'KeySetStartError';
  }
}

/** Thrown by the key lookup when the key set itself could not be had (not: the token names no key in it). */
class KeySetUnavailable extends Error {}

/**
 * How long after a failed key-set fetch the next fetch waits: the `Retry-After` of the 503.
 * Tokens naming an unknown key cost no failure budget (the provider's fault, not theirs), so
 * without the hold every such request would make the service call a failing provider again.
 */
const FETCH_HOLD_SECONDS = 5;

const unavailable = () =>
  new DomainError('unavailable', "The identity provider's key set cannot be fetched, so owner sessions cannot be verified now. Retry later.", {
    retryAfterSeconds: FETCH_HOLD_SECONDS,
  });

const CLOCK_TOLERANCE_SECONDS = 5;

/**
 * The owner a verified token names: `sub` is the subject, the claim OWNER_WORKSPACE_CLAIM names
 * the workspace. Owner JWTs and the console's OpenID Connect ID tokens are read by this one rule.
 */
export function ownerIdentityFromClaims(claims: Record<string, unknown>, workspaceClaim: string): OwnerIdentity | undefined {
  const workspaceKey = claims[workspaceClaim];
  if (typeof claims.sub !== 'string' || claims.sub === '') return undefined;
  if (typeof workspaceKey !== 'string' || workspaceKey === '' || workspaceKey.length > 256) return undefined;
  return { subject: claims.sub, workspaceKey, ...(typeof claims.exp === 'number' ? { expiresAt: (claims.exp + CLOCK_TOLERANCE_SECONDS) * 1000 } : {}) };
}
/** The development identity provider's signing key, in the folder of the embedded database (`npm run backup` copies it too). */
export const DEV_KEY_FILE = 'development-identity-provider.jwk.json';
const DEV_KEY_ID = 'dfc-development';

function verifierFor(keys: JWTVerifyGetKey, owner: Config['owner'], health: () => IdentityProviderHealth): OwnerVerifier {
  return {
    health,
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, keys, {
          issuer: owner.issuer,
          audience: owner.audience,
          algorithms: OWNER_ALGORITHMS,
          requiredClaims: ['exp', 'sub'],
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
        });
        return ownerIdentityFromClaims(payload, owner.workspaceClaim);
      } catch (error) {
        // Not the token's fault: the caller gets 503, and it costs no failed-authentication budget.
        if (error instanceof KeySetUnavailable) throw unavailable();
        return undefined;
      }
    },
    plausible(token) {
      try {
        const { alg } = decodeProtectedHeader(token);
        const claims = decodeJwt(token);
        const audiences = Array.isArray(claims.aud) ? claims.aud : [claims.aud];
        return (
          typeof alg === 'string' &&
          OWNER_ALGORITHMS.includes(alg) &&
          claims.iss === owner.issuer &&
          audiences.includes(owner.audience) &&
          typeof claims.exp === 'number' &&
          // The clock jwtVerify judges `exp` by.
          claims.exp + CLOCK_TOLERANCE_SECONDS > Date.now() / 1000
        );
      } catch {
        return false;
      }
    },
  };
}

/**
 * The embedded default's identity provider: an ES256 key created in the data folder on first
 * start. `npm run owner-token` signs sessions with the same key.
 */
export async function loadDevelopmentKey(dataDir: string): Promise<JWK> {
  const file = path.join(dataDir, DEV_KEY_FILE);
  if (fs.existsSync(file)) return JSON.parse(fs.readFileSync(file, 'utf8')) as JWK;
  fs.mkdirSync(dataDir, { recursive: true });
  const { privateKey } = await generateKeyPair('ES256', { extractable: true });
  const jwk = { ...(await exportJWK(privateKey)), kid: DEV_KEY_ID, alg: 'ES256', use: 'sig' };
  // `wx` fails if another process created the file meanwhile; then its key wins.
  try {
    fs.writeFileSync(file, JSON.stringify(jwk), { mode: 0o600, flag: 'wx' });
    return jwk;
  } catch {
    return JSON.parse(fs.readFileSync(file, 'utf8')) as JWK;
  }
}

function publicPart(jwk: JWK): JWK {
  const { d: _private, ...rest } = jwk;
  return rest;
}

/**
 * Why a key set cannot verify any owner session, or undefined when one of its keys can: an
 * asymmetric key (RSA, EC, OKP) meant for signatures, of an allowed algorithm. A set with none
 * parses and loads fine, then refuses every owner with 401; better to say so at start.
 */
function noSigningKey(jwks: { keys?: JWK[] } | undefined): string | undefined {
  const keys = jwks?.keys ?? [];
  const usable = keys.filter(
    (key) =>
      ['RSA', 'EC', 'OKP'].includes(key.kty ?? '') &&
      (key.use === undefined || key.use === 'sig') &&
      (key.alg === undefined || OWNER_ALGORITHMS.includes(key.alg)),
  );
  if (usable.length > 0) return undefined;
  return keys.length === 0
    ? 'the key set has no keys'
    : `none of its ${keys.length} keys can verify an owner session (an RSA, EC or OKP signing key, algorithm ${OWNER_ALGORITHMS.join(', ')})`;
}

/** OWNER_JWKS_FILE, read once at start; a file that is missing, unreadable or not a JWKS stops the start. */
function keysFromFile(file: string): JWTVerifyGetKey {
  let text;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (error) {
    throw new KeySetStartError('OWNER_JWKS_FILE', `cannot read the owner key set file ${file}: ${oneLine(error)}`, { cause: error });
  }
  let keys: JWTVerifyGetKey;
  let jwks: { keys: JWK[] };
  try {
    jwks = JSON.parse(text) as { keys: JWK[] };
    keys = createLocalJWKSet(jwks);
  } catch (error) {
    throw new KeySetStartError('OWNER_JWKS_FILE', `${file} is not a JSON Web Key Set ({"keys": [...]}): ${oneLine(error)}`, { cause: error });
  }
  const unusable = noSigningKey(jwks);
  if (unusable) throw new KeySetStartError('OWNER_JWKS_FILE', `${file} cannot verify owner sessions: ${unusable}`);
  return keys;
}

/** Where a URL points, without credentials or query (either may carry a secret). */
const displayUrl = (url: URL) => `${url.protocol}//${url.host}${url.pathname}`;

/**
 * OWNER_JWKS_URL: fetched once at start (unreachable: the start fails), then by jose as keys
 * rotate and its cache ages. A failed fetch is the identity provider's fault, not the
 * token's: it is counted every time, logged once per failure streak (a warn line when the
 * streak starts, an info line when a fetch succeeds again) rather than once per request, and
 * the request gets 503 `unavailable`. For `FETCH_HOLD_SECONDS` after a failure nothing is
 * fetched: a session whose key is in the still-fresh cached set verifies, any other gets 503.
 */
async function keysFromUrl(jwksUrl: string, deps: OwnerVerifierDeps): Promise<{ keys: JWTVerifyGetKey; health: () => IdentityProviderHealth }> {
  const url = new URL(jwksUrl);
  const remote = createRemoteJWKSet(url);
  try {
    await remote.reload();
  } catch (error) {
    throw new KeySetStartError('OWNER_JWKS_URL', `cannot fetch the owner key set from ${displayUrl(url)}: ${oneLine(error)}`, { cause: error });
  }
  const unusable = noSigningKey(remote.jwks());
  if (unusable) throw new KeySetStartError('OWNER_JWKS_URL', `the owner key set at ${displayUrl(url)} cannot verify owner sessions: ${unusable}`);
  let streak: { since: number; failures: number; error: string; heldUntil: number } | undefined;
  const fromCache: JWTVerifyGetKey = async (header, token) => {
    const cached = remote.jwks();
    if (!cached || !remote.fresh) throw new KeySetUnavailable(streak!.error);
    try {
      return await createLocalJWKSet(cached)(header, token);
    } catch (error) {
      // The provider is failing: a key missing from what it served last may be a rotation.
      if (error instanceof joseErrors.JWKSNoMatchingKey) throw new KeySetUnavailable(streak!.error);
      throw error;
    }
  };
  const keys: JWTVerifyGetKey = async (header, token) => {
    if (streak && Date.now() < streak.heldUntil) return fromCache(header, token);
    try {
      const key = await remote(header, token);
      // Only a fetch ends the streak: a key found in the cached set says nothing of the
      // provider. jose's cooldown runs from its last successful fetch, and every failure in a
      // streak happened outside it, so `coolingDown` here means a fetch succeeded since.
      if (streak && remote.coolingDown) {
        deps.log.info({
          msg: 'identity provider key set fetched again',
          variable: 'OWNER_JWKS_URL',
          url: displayUrl(url),
          failures: streak.failures,
          failedForMs: Date.now() - streak.since,
        });
        streak = undefined;
      }
      return key;
    } catch (error) {
      // No key (or several) for the token's `kid` in a key set that was fetched: the token's fault.
      if (error instanceof joseErrors.JWKSNoMatchingKey || error instanceof joseErrors.JWKSMultipleMatchingKeys) throw error;
      deps.onKeySetFailure?.();
      const heldUntil = Date.now() + FETCH_HOLD_SECONDS * 1000;
      if (streak) {
        streak.failures++;
        streak.error = oneLine(error);
        streak.heldUntil = heldUntil;
      } else {
        streak = { since: Date.now(), failures: 1, error: oneLine(error), heldUntil };
        deps.log.warn({ msg: 'identity provider key set unavailable', variable: 'OWNER_JWKS_URL', url: displayUrl(url), error: streak.error });
      }
      throw new KeySetUnavailable(streak.error);
    }
  };
  const health = (): IdentityProviderHealth =>
    streak
      ? { provider: 'jwks-url', ok: false, failingSince: streak.since, failures: streak.failures, error: streak.error }
      : { provider: 'jwks-url', ok: true };
  return { keys, health };
}

export async function createOwnerVerifier(config: Config, deps: OwnerVerifierDeps): Promise<OwnerVerifier> {
  const owner = config.owner;
  if (owner.mode === 'external') {
    if (owner.jwksUrl) {
      const { keys, health } = await keysFromUrl(owner.jwksUrl, deps);
      return verifierFor(keys, owner, health);
    }
    return verifierFor(keysFromFile(owner.jwksFile!), owner, () => ({ provider: 'jwks-file', ok: true }));
  }
  const key = await loadDevelopmentKey(config.dataDir);
  return verifierFor(createLocalJWKSet({ keys: [publicPart(key)] }), owner, () => ({ provider: 'development', ok: true }));
}

/** Signs a development owner session (the embedded identity provider). */
export async function signDevelopmentSession(config: Config, subject: string, options: { workspace?: string; ttlSeconds?: number } = {}): Promise<string> {
  if (config.owner.mode !== 'development') {
    throw new Error('owner sessions come from the external identity provider when OWNER_JWKS_* is set');
  }
  const jwk = await loadDevelopmentKey(config.dataDir);
  const key = await importJWK(jwk, 'ES256');
  const claims: Record<string, string> = {};
  if (config.owner.workspaceClaim !== 'sub') claims[config.owner.workspaceClaim] = options.workspace ?? subject;
  return new SignJWT(claims)
    .setProtectedHeader({ alg: 'ES256', kid: DEV_KEY_ID })
    .setSubject(subject)
    .setIssuer(config.owner.issuer)
    .setAudience(config.owner.audience)
    .setIssuedAt()
    .setExpirationTime(`${options.ttlSeconds ?? 3600}s`)
    .sign(key);
}

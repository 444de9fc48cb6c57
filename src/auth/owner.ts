import fs from 'node:fs';
import path from 'node:path';
import {
  createLocalJWKSet,
  createRemoteJWKSet,
  decodeJwt,
  decodeProtectedHeader,
  exportJWK,
  generateKeyPair,
  importJWK,
  jwtVerify,
  SignJWT,
  type JWK,
  type JWTVerifyGetKey,
} from 'jose';
import type { Config } from '../config.js';

/** Asymmetric algorithms only: a shared-secret (HS*) token could be forged by anyone holding the JWKS. */
export const OWNER_ALGORITHMS = ['RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512', 'ES256', 'ES384', 'ES512', 'EdDSA'];

export interface OwnerIdentity {
  subject: string;
  /** The value of the workspace claim: names the owner's workspace. */
  workspaceKey: string;
}

export interface OwnerVerifier {
  /** Resolves the identity, or undefined when the token is not a valid owner session. */
  verify(token: string): Promise<OwnerIdentity | undefined>;
  /**
   * Whether the token could be a session at all, judged without cryptography or a key fetch:
   * an allowed algorithm, the configured `iss` and `aud`, an `exp` not passed. An address over
   * its failure budget gets a signature check only for such a token (docs/rules.md "Errors and
   * limits"), so a flood of junk from it costs a decode, not a verification or a JWKS fetch.
   */
  plausible(token: string): boolean;
}

const CLOCK_TOLERANCE_SECONDS = 5;
const DEV_KEY_FILE = 'development-identity-provider.jwk.json';
const DEV_KEY_ID = 'dfc-development';

function verifierFor(keys: JWTVerifyGetKey, owner: Config['owner']): OwnerVerifier {
  return {
    async verify(token) {
      try {
        const { payload } = await jwtVerify(token, keys, {
          issuer: owner.issuer,
          audience: owner.audience,
          algorithms: OWNER_ALGORITHMS,
          requiredClaims: ['exp', 'sub'],
          clockTolerance: CLOCK_TOLERANCE_SECONDS,
        });
        const workspaceKey = payload[owner.workspaceClaim];
        if (typeof payload.sub !== 'string' || payload.sub === '') return undefined;
        if (typeof workspaceKey !== 'string' || workspaceKey === '' || workspaceKey.length > 256) return undefined;
        return { subject: payload.sub, workspaceKey };
      } catch {
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

export async function createOwnerVerifier(config: Config): Promise<OwnerVerifier> {
  const owner = config.owner;
  if (owner.mode === 'external') {
    const keys = owner.jwksUrl
      ? createRemoteJWKSet(new URL(owner.jwksUrl))
      : createLocalJWKSet(JSON.parse(fs.readFileSync(owner.jwksFile!, 'utf8')) as { keys: JWK[] });
    return verifierFor(keys, owner);
  }
  const key = await loadDevelopmentKey(config.dataDir);
  return verifierFor(createLocalJWKSet({ keys: [publicPart(key)] }), owner);
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

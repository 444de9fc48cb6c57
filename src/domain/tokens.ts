import { hash, randomBytes } from 'node:crypto';

/** Kinds of opaque credential, each with a readable prefix (docs/reference/rules.md "Credentials"). */
export const tokenKinds = {
  agent: 'dfc_agent_',
  setup: 'dfc_setup_',
  device: 'dfc_device_',
  enrollment: 'dfc_enroll_',
  /** One-use wake-channel ticket; never a bearer credential (src/domain/device-wake-socket.ts). */
  ticket: 'dfc_ticket_',
  /** OAuth access token: a bearer credential resolving to an agent credential (src/auth/oauth-tokens.ts). */
  oauth: 'dfc_oauth_',
  /** OAuth refresh token, authorization code, client secret, consent-page session: never bearer credentials. */
  refresh: 'dfc_refresh_',
  code: 'dfc_code_',
  clientSecret: 'dfc_secret_',
  session: 'dfc_session_',
} as const;

export type TokenKind = keyof typeof tokenKinds;

export interface IssuedToken {
  /** The plain token: returned once in the creation response, never stored or logged. */
  token: string;
  /** SHA-256 hex of the token: the only form kept at rest. */
  hash: string;
  /** The kind prefix and four characters, enough to tell tokens apart in a list. */
  displayPrefix: string;
}

/** One-shot `crypto.hash`: every authenticated request hashes its token, and it costs half of a `createHash` chain. */
export function hashToken(token: string): string {
  return hash('sha256', token, 'hex');
}

export function issueToken(kind: TokenKind): IssuedToken {
  const token = tokenKinds[kind] + randomBytes(32).toString('base64url');
  return { token, hash: hashToken(token), displayPrefix: token.slice(0, tokenKinds[kind].length + 4) };
}

export function tokenKindOf(token: string): TokenKind | undefined {
  return (Object.keys(tokenKinds) as TokenKind[]).find((kind) => token.startsWith(tokenKinds[kind]));
}

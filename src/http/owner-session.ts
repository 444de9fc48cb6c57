import type { Context } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { decodeJwt } from 'jose';
import type { Credential } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { createOwnerSession, type SessionStoreDeps } from '../domain/owner-sessions.js';
import { clientAddress } from './request.js';

/**
 * The owner's browser session, shared by the two surfaces a browser signs in to: the consent
 * page (src/oauth) and the owner console (src/console). One cookie, one sign-in for both
 * (docs/agents/oauth.md "Consent page, sign-in and cookies", "Owner console").
 */

/** Cookies are Secure when the service's public address is https. */
export const secureCookies = (publicBaseUrl: string) => publicBaseUrl.startsWith('https://');

/** `__Host-` binds the cookie to this exact origin, but browsers accept it only when Secure. */
export const ownerSessionCookie = (publicBaseUrl: string) => (secureCookies(publicBaseUrl) ? '__Host-dfc_session' : 'dfc_session');

export const readOwnerSessionCookie = (c: Context, publicBaseUrl: string) => getCookie(c, ownerSessionCookie(publicBaseUrl));

/** Which origins may post the browser forms (docs/owners/console.md "Signing in"). */
export interface FormOrigins {
  publicBaseUrl: string;
  /** PUBLIC_BASE_URL was set: it is the only origin, whatever the request's Host. */
  publicBaseUrlSet: boolean;
}

/**
 * Host names that no one else can hold in public DNS: an IP address, `localhost`, a name of one
 * label (a container or a machine on the LAN) or one under a special-use or local-network suffix.
 * A web page cannot re-point such a name at this service (DNS rebinding), so in the unconfigured
 * mode a form posted from a page served under one of them is this service's own page.
 */
const PRIVATE_NAME = /^(?:\[[0-9a-f:.]+\]|[0-9.]+|[^.]+|.+\.(?:localhost|local|lan|home|internal|home\.arpa))$/i;

const CROSS_SITE = "This form can only be posted from this service's own pages.";

/** The request's own origin: its scheme and its `Host` header. */
function requestOrigin(c: Context): URL | undefined {
  const host = c.req.header('host');
  if (!host) return undefined;
  try {
    return new URL(`${new URL(c.req.url).protocol}//${host}`);
  } catch {
    return undefined;
  }
}

/**
 * A form post from a browser must come from this service's pages: a cross-site-post and
 * login-CSRF guard besides SameSite=Strict. The answer is undefined when the post may go on, or
 * the refusal's message, which names the cause and the setting that fixes it.
 *
 * With PUBLIC_BASE_URL set, its origin is the only one. Without it, the service is reached under
 * whatever address the newcomer typed (127.0.0.1, localhost, a LAN address, a container's name),
 * and the default `http://localhost:PORT` is only a guess: the request's own origin is trusted
 * when it matches its `Host` and that host is a private name (PRIVATE_NAME).
 *
 * A browser that sends no Origin (an old one, or a same-origin GET turned POST by a user agent
 * that omits it) is let through: SameSite and the form's token hold.
 */
export function formOriginRefusal(c: Context, origins: FormOrigins): string | undefined {
  const origin = c.req.header('origin');
  if (origin === undefined) return undefined;
  const expected = new URL(origins.publicBaseUrl).origin;
  if (origin === expected) return undefined;
  if (origins.publicBaseUrlSet) {
    return `${CROSS_SITE} It came from ${origin}, and PUBLIC_BASE_URL is ${expected}: open the console at ${expected}, or set PUBLIC_BASE_URL to the address you use.`;
  }
  const own = requestOrigin(c);
  if (own === undefined || origin !== own.origin) return CROSS_SITE;
  if (PRIVATE_NAME.test(own.hostname)) return undefined;
  return `${CROSS_SITE} ${own.host} is a public name, and without PUBLIC_BASE_URL this service cannot tell its own pages under it from another site's: set PUBLIC_BASE_URL=${own.origin} and restart.`;
}

/** Sets the session cookie: HttpOnly, SameSite=Strict, never outliving the session. */
export function setOwnerSessionCookie(c: Context, publicBaseUrl: string, session: { token: string; expiresAt: number }, now: number): void {
  setCookie(c, ownerSessionCookie(publicBaseUrl), session.token, {
    httpOnly: true,
    secure: secureCookies(publicBaseUrl),
    sameSite: 'Strict',
    path: '/',
    maxAge: Math.max(1, Math.floor((session.expiresAt - now) / 1000)),
  });
}

export function clearOwnerSessionCookie(c: Context, publicBaseUrl: string): void {
  deleteCookie(c, ownerSessionCookie(publicBaseUrl), { path: '/', secure: secureCookies(publicBaseUrl) });
}

export type SignInRefusal = { error: string; code: 'unauthorized' | 'rate_limited' | 'unavailable'; retryAfterSeconds?: number };

export const SIGN_IN_STATUS = { unauthorized: 401, rate_limited: 429, unavailable: 503 } as const;

export interface SignInDeps extends SessionStoreDeps {
  /** The rate-limited authenticator (src/auth): a failed sign-in costs the address's failure budget. */
  authenticate(bearer: string, clientAddress?: string): Promise<Credential | null>;
  publicBaseUrl: string;
}

/**
 * Trades an owner JWT for a session and sets its cookie. With the client address, a failed
 * sign-in costs that address a token of the failure bucket the bearer-token endpoints use, and
 * an address over its limit is refused.
 */
export async function startOwnerSession(c: Context, deps: SignInDeps, jwt: string): Promise<{ subject: string } | SignInRefusal> {
  let credential;
  try {
    credential = await deps.authenticate(jwt, clientAddress(c));
  } catch (error) {
    if (error instanceof DomainError && error.code === 'rate_limited') {
      return {
        code: 'rate_limited',
        error: 'Too many failed sign-ins from this address; wait a minute.',
        retryAfterSeconds: error.details.retryAfterSeconds ?? 60,
      };
    }
    // docs/operators/identity-provider.md "Identity provider health": the token may be fine; the key set to check it is not.
    if (error instanceof DomainError && error.code === 'unavailable') {
      return {
        code: 'unavailable',
        error: 'The identity provider cannot be reached to check this token; try again shortly.',
        retryAfterSeconds: error.details.retryAfterSeconds ?? 5,
      };
    }
    return { code: 'unauthorized', error: 'That is not a valid owner session token.' };
  }
  if (credential?.kind !== 'owner') return { code: 'unauthorized', error: 'That is not an owner session token.' };
  const exp = decodeJwt(jwt).exp;
  const session = await createOwnerSession(deps, credential, typeof exp === 'number' ? exp * 1000 : undefined);
  setOwnerSessionCookie(c, deps.publicBaseUrl, session, deps.clock.now());
  return { subject: credential.subject };
}

import type { Context as HonoContext } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { decodeJwt } from 'jose';
import type { Credential } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { createOwnerSession, type SessionStoreDeps } from '../domain/oauth/sessions.js';
import { clientAddress } from './request.js';

/**
 * The owner's browser session, shared by the two surfaces a browser signs in to: the consent
 * page (src/oauth) and the owner console (src/console). One cookie, one sign-in for both
 * (README "Consent page, sign-in and cookies", "Owner console").
 */

/** Cookies are Secure when the service's public address is https. */
export const secureCookies = (publicBaseUrl: string) => publicBaseUrl.startsWith('https://');

/** `__Host-` binds the cookie to this exact origin, but browsers accept it only when Secure. */
export const ownerSessionCookie = (publicBaseUrl: string) => (secureCookies(publicBaseUrl) ? '__Host-dfc_session' : 'dfc_session');

export const readOwnerSessionCookie = (c: HonoContext, publicBaseUrl: string) => getCookie(c, ownerSessionCookie(publicBaseUrl));

/**
 * A form post from a browser must come from this origin: a cross-site-post and login-CSRF guard
 * besides SameSite=Strict. A browser that sends no Origin (an old one, or a same-origin GET
 * turned POST by a user agent that omits it) is let through: SameSite and the form's token hold.
 */
export const sameOrigin = (c: HonoContext, publicBaseUrl: string) => {
  const origin = c.req.header('origin');
  return origin === undefined || origin === new URL(publicBaseUrl).origin;
};

/** Sets the session cookie: HttpOnly, SameSite=Strict, never outliving the session. */
export function setOwnerSessionCookie(c: HonoContext, publicBaseUrl: string, session: { token: string; expiresAt: number }, now: number): void {
  setCookie(c, ownerSessionCookie(publicBaseUrl), session.token, {
    httpOnly: true,
    secure: secureCookies(publicBaseUrl),
    sameSite: 'Strict',
    path: '/',
    maxAge: Math.max(1, Math.floor((session.expiresAt - now) / 1000)),
  });
}

export function clearOwnerSessionCookie(c: HonoContext, publicBaseUrl: string): void {
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
export async function startOwnerSession(c: HonoContext, deps: SignInDeps, jwt: string): Promise<{ subject: string } | SignInRefusal> {
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
    // README "Identity provider health": the token may be fine; the key set to check it is not.
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

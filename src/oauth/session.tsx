import type { Hono, Context as HonoContext } from 'hono';
import { setCookie, deleteCookie } from 'hono/cookie';
import { decodeJwt } from 'jose';
import { DomainError } from '../domain/errors.js';
import { createOwnerSession, endOwnerSession } from '../domain/oauth/sessions.js';
import { bearerToken, clientAddress } from '../http/request.js';
import { pageForm, sameOrigin, sessionToken } from './browser.js';
import type { OAuthEndpointDeps } from './deps.js';
import { ErrorPage, SignedInPage, SignInPage } from './pages.js';

/**
 * Sessions of the consent page: the owner signs in with an owner JWT (the sign-in page, or
 * /oauth/session for an identity provider's front end) and gets a session cookie the
 * authorization endpoint (authorize.tsx) recognises; sign-out ends it.
 */

/** Only a path back into the authorization endpoint may follow a sign-in (no open redirect). */
const safeNext = (next: string | undefined) => (next && /^\/oauth\/authorize\?[^\\]*$/.test(next) && !next.startsWith('//') ? next : undefined);

export function mountSessionEndpoints(app: Hono, deps: OAuthEndpointDeps): void {
  const { config, authenticator, clock, oauth, secureCookies, sessionCookie } = deps;

  type Refusal = { error: string; code: 'unauthorized' | 'rate_limited' | 'unavailable'; retryAfterSeconds?: number };
  const STATUS = { unauthorized: 401, rate_limited: 429, unavailable: 503 } as const;
  const startSession = async (c: HonoContext, jwt: string): Promise<{ subject: string } | Refusal> => {
    let credential;
    try {
      // With the client address, a failed sign-in costs that address a token of the failure
      // bucket the bearer-token endpoints use, and an address over its limit is refused.
      credential = await authenticator.authenticate(jwt, clientAddress(c));
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
    const session = await createOwnerSession(oauth, credential, typeof exp === 'number' ? exp * 1000 : undefined);
    setCookie(c, sessionCookie, session.token, {
      httpOnly: true,
      secure: secureCookies,
      sameSite: 'Strict',
      path: '/',
      maxAge: Math.max(1, Math.floor((session.expiresAt - clock.now()) / 1000)),
    });
    return { subject: credential.subject };
  };

  app.get('/oauth/sign-in', (c) => c.html(<SignInPage next={safeNext(c.req.query('next'))} mode={config.owner.mode} />));

  app.post('/oauth/sign-in', async (c) => {
    if (!sameOrigin(deps, c)) return c.html(<ErrorPage title="Refused" message="This form can only be posted from this service's own pages." />, 403);
    const form = await pageForm(c);
    if (form instanceof Response) return form;
    const next = safeNext(form.get('next') ?? undefined);
    const outcome = await startSession(c, (form.get('token') ?? '').trim());
    if ('error' in outcome) {
      if (outcome.retryAfterSeconds !== undefined) c.header('Retry-After', String(outcome.retryAfterSeconds));
      return c.html(<SignInPage next={next} mode={config.owner.mode} error={outcome.error} />, STATUS[outcome.code]);
    }
    if (next) return c.redirect(next, 303);
    return c.html(<SignedInPage subject={outcome.subject} />);
  });

  // For an external identity provider's front end: trade the owner JWT for the session cookie.
  app.post('/oauth/session', async (c) => {
    const token = bearerToken(c.req.header('authorization'));
    if (!token) return c.json({ error: { code: 'unauthorized', message: 'Send the owner session as a bearer token.' } }, 401, { 'WWW-Authenticate': 'Bearer' });
    const outcome = await startSession(c, token);
    if ('error' in outcome && outcome.retryAfterSeconds !== undefined) {
      return c.json({ error: { code: outcome.code, message: outcome.error } }, STATUS[outcome.code], { 'Retry-After': String(outcome.retryAfterSeconds) });
    }
    if ('error' in outcome) return c.json({ error: { code: outcome.code, message: outcome.error } }, STATUS[outcome.code], { 'WWW-Authenticate': 'Bearer' });
    return c.body(null, 204);
  });

  app.post('/oauth/sign-out', async (c) => {
    if (!sameOrigin(deps, c)) return c.html(<ErrorPage title="Refused" message="This form can only be posted from this service's own pages." />, 403);
    await endOwnerSession(oauth, sessionToken(deps, c));
    deleteCookie(c, sessionCookie, { path: '/', secure: secureCookies });
    return c.body(null, 204);
  });
}

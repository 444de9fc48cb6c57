import type { Hono, Context } from 'hono';
import { endOwnerSession } from '../domain/owner-sessions.js';
import { clearOwnerSessionCookie, SIGN_IN_STATUS, startOwnerSession } from '../http/owner-session.js';
import { bearerToken } from '../http/request.js';
import { originRefusal, pageForm, sessionToken } from './browser.js';
import type { OAuthEndpointDeps } from './deps.js';
import { ErrorPage, SignedInPage, SignInPage, type SignInMode } from './pages.js';
import { signDevelopmentSession } from '../auth/owner.js';

/**
 * Sessions of the consent page: the owner signs in with an owner JWT (the sign-in page, or
 * /oauth/session for an identity provider's front end) and gets a session cookie the
 * authorization endpoint (authorize.tsx) recognises, and the owner console too
 * (src/http/owner-session.ts); sign-out ends it.
 */

/** Only a path back into the authorization endpoint may follow a sign-in (no open redirect). */
const safeNext = (next: string | undefined) => (next && /^\/oauth\/authorize\?[^\\]*$/.test(next) && !next.startsWith('//') ? next : undefined);

/** A development subject: what `npm run owner-token -- --sub` accepts, as the console's form does. */
const SUBJECT = /^[A-Za-z0-9._@:-]{1,128}$/;

export function mountSessionEndpoints(app: Hono, deps: OAuthEndpointDeps): void {
  const { config, authenticator, clock, oauth } = deps;

  const signIn = {
    db: oauth.db,
    clock,
    publicBaseUrl: oauth.issuer,
    authenticate: (jwt: string, address?: string) => authenticator.authenticate(jwt, address),
  };
  const startSession = (c: Context, jwt: string) => startOwnerSession(c, signIn, jwt);
  const STATUS = SIGN_IN_STATUS;
  const mode: SignInMode = config.owner.mode === 'external' ? 'external' : config.owner.signIn === 'code' ? 'development-code' : 'development';

  app.get('/oauth/sign-in', (c) => c.html(<SignInPage next={safeNext(c.req.query('next'))} mode={mode} />));

  app.post('/oauth/sign-in', async (c) => {
    const refusal = originRefusal(deps, c);
    if (refusal) return c.html(<ErrorPage title="Refused" message={refusal} />, 403);
    const form = await pageForm(c);
    if (form instanceof Response) return form;
    const next = safeNext(form.get('next') ?? undefined);
    const outcome = await startSession(c, (form.get('token') ?? '').trim());
    if ('error' in outcome) {
      if (outcome.retryAfterSeconds !== undefined) c.header('Retry-After', String(outcome.retryAfterSeconds));
      return c.html(<SignInPage next={next} mode={mode} error={outcome.error} />, STATUS[outcome.code]);
    }
    if (next) return c.redirect(next, 303);
    return c.html(<SignedInPage subject={outcome.subject} />);
  });

  // The development identity provider's form, as on the console (src/console/sign-in.tsx): a
  // name, signed into the same token `npm run owner-token` prints, through the same sign-in.
  if (mode === 'development') {
    app.post('/oauth/sign-in/development', async (c) => {
      const refusal = originRefusal(deps, c);
      if (refusal) return c.html(<ErrorPage title="Refused" message={refusal} />, 403);
      const form = await pageForm(c);
      if (form instanceof Response) return form;
      const next = safeNext(form.get('next') ?? undefined);
      const subject = (form.get('sub') ?? '').trim();
      if (!SUBJECT.test(subject)) return c.html(<SignInPage next={next} mode={mode} error="Name the owner with 1 to 128 letters, digits or . _ @ : -" />, 400);
      const outcome = await startSession(c, await signDevelopmentSession(config, subject));
      if ('error' in outcome) return c.html(<SignInPage next={next} mode={mode} error={outcome.error} />, STATUS[outcome.code]);
      if (next) return c.redirect(next, 303);
      return c.html(<SignedInPage subject={outcome.subject} />);
    });
  }

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
    const refusal = originRefusal(deps, c);
    if (refusal) return c.html(<ErrorPage title="Refused" message={refusal} />, 403);
    await endOwnerSession(oauth, sessionToken(deps, c));
    clearOwnerSessionCookie(c, oauth.issuer);
    return c.body(null, 204);
  });
}

import type { Context, Hono } from 'hono';
import { deleteCookie, getCookie, setCookie } from 'hono/cookie';
import { ownerIdentityFromClaims, signDevelopmentSession } from '../auth/owner.js';
import { createOwnerSessionForIdentity, endOwnerSession, ownerSession } from '../domain/owner-sessions.js';
import { authFailureKey } from '../domain/rate-limits.js';
import { readForm } from '../http/form.js';
import {
  clearOwnerSessionCookie,
  formOriginRefusal,
  readOwnerSessionCookie,
  secureCookies,
  setOwnerSessionCookie,
  SIGN_IN_STATUS,
  startOwnerSession,
} from '../http/owner-session.js';
import { clientAddress, type HttpEnv } from '../http/request.js';
import type { ConsoleDeps } from './deps.js';
import type { Guards } from './guards.js';
import { Page } from './layout.js';
import { createOidcClient, oidcSettings, type PendingSignIn } from './oidc.js';
import { createSignInCode } from './sign-in-code.js';

/**
 * Signing in to the console: the consent page's owner session (docs/owners/console.md "Owner console"). Three
 * ways in, by how the service is configured: the development identity provider's local form
 * (development only; with DEVELOPMENT_SIGN_IN=code it asks for the one-time code the log
 * prints), OpenID Connect against OWNER_ISSUER (OWNER_OIDC_CLIENT_ID set), and pasting an
 * owner session token (always). Each ends with the same session cookie.
 */

type C = Context<HttpEnv>;

/** A development subject: what `npm run owner-token -- --sub` accepts, kept short and printable. */
const SUBJECT = /^[A-Za-z0-9._@:-]{1,128}$/;
/** What a `?code=` may carry into the form: the code's own letters, dashes and spaces. */
const CODE_SHAPE = /^[A-Za-z0-9 -]{1,64}$/;

// eslint-disable-next-line max-lines-per-function -- the sign-in routes (token, development, OIDC, sign-out) share the session-cookie helpers of this closure
export function mountSignIn(app: Hono<HttpEnv>, deps: ConsoleDeps, guards: Guards): void {
  const { config, db, clock, log, authenticator, limiter } = deps;
  const base = config.publicBaseUrl;
  const development = config.owner.mode === 'development';
  // A warn line, so that LOG_LEVEL=warn still shows it; the code is used up by the sign-in it lets through.
  const code =
    config.owner.mode === 'development' && config.owner.signIn === 'code'
      ? createSignInCode((value, reason) =>
          log.warn({
            msg: 'development sign-in code',
            code: value,
            signIn: `${base}/console/sign-in?code=${value}`,
            note: reason === 'start' ? 'single use: a new code is printed after each sign-in' : 'the previous code was used: this one replaces it',
          }),
        )
      : undefined;
  const settings = oidcSettings(config, log);
  const oidc = settings ? createOidcClient(settings) : undefined;
  // The sign-in's state rides in its own cookie: SameSite=Lax, because the provider sends the
  // browser back with a cross-site navigation, which a Strict cookie would not accompany.
  const pendingCookie = secureCookies(base) ? '__Host-dfc_console_oidc' : 'dfc_console_oidc';
  const signIn = { db, clock, publicBaseUrl: base, authenticate: (jwt: string, address?: string) => authenticator.authenticate(jwt, address) };

  const SignInPage = (props: { error?: string; code?: string | undefined }) => (
    <Page title="Sign in">
      {props.error ? (
        <p class="error" role="alert" id="error">
          {props.error}
        </p>
      ) : null}
      {oidc ? (
        <section>
          <h2>With your identity provider</h2>
          <p>
            <a class="button primary" href="/console/oidc/start" id="oidc-sign-in">
              Sign in with {new URL(settings!.issuer).host}
            </a>
          </p>
        </section>
      ) : null}
      {development ? <DevelopmentSignIn withCode={code !== undefined} code={props.code} /> : null}
      <section>
        <h2>With an owner session token</h2>
        <p class="muted">
          {development ? (
            <>
              Create one with <code>npm run owner-token -- --sub YOUR-NAME</code> and paste it here.
            </>
          ) : (
            'Paste an owner session token (a JWT) from your identity provider.'
          )}
        </p>
        <form method="post" action="/console/sign-in/token" class="fields">
          <div>
            <label for="token">Owner session token</label>
            <textarea id="token" name="token" rows={4} required autocomplete="off" spellcheck={false}></textarea>
          </div>
          <div>
            <button type="submit" id="token-sign-in">
              Sign in
            </button>
          </div>
        </form>
      </section>
    </Page>
  );

  const refusedPost = (c: C) => {
    const refusal = formOriginRefusal(c, config);
    return refusal === undefined ? undefined : guards.errorPage(c, 'Refused', refusal, 403);
  };
  const readSignInForm = (c: C) => readForm(c.req.raw, (message, status) => guards.errorPage(c, 'This form cannot be read', message, status));

  app.get('/console/sign-in', async (c) => {
    if (await ownerSession({ db, clock }, readOwnerSessionCookie(c, base))) return c.redirect('/console', 302);
    // `?code=` fills the code in, as the link the log prints does; it is checked only when the form is posted.
    const given = c.req.query('code');
    return c.html(<SignInPage code={code && given !== undefined && CODE_SHAPE.test(given) ? given : undefined} />);
  });

  app.post('/console/sign-in/token', async (c) => {
    const refused = refusedPost(c);
    if (refused) return refused;
    const form = await readSignInForm(c);
    if (form instanceof Response) return form;
    const outcome = await startOwnerSession(c, signIn, (form.get('token') ?? '').trim());
    if ('error' in outcome) {
      if (outcome.retryAfterSeconds !== undefined) c.header('Retry-After', String(outcome.retryAfterSeconds));
      return c.html(<SignInPage error={outcome.error} />, SIGN_IN_STATUS[outcome.code]);
    }
    return c.redirect('/console', 303);
  });

  if (development) {
    app.post('/console/sign-in/development', async (c) => {
      const refused = refusedPost(c);
      if (refused) return refused;
      const form = await readSignInForm(c);
      if (form instanceof Response) return form;
      const subject = (form.get('sub') ?? '').trim();
      if (!SUBJECT.test(subject)) return c.html(<SignInPage error="Name the owner with 1 to 128 letters, digits or . _ @ : -" />, 400);
      if (code) {
        // The failed-authentication budget of the address, as a wrong token draws from it; over it, no code is even compared.
        const failures = authFailureKey(clientAddress(c) ?? 'unknown');
        const standing = await limiter.peek(failures, config.rateLimits.authFailures, clock.now());
        const refusal = (result: typeof standing) => {
          c.header('Retry-After', String(result.retryAfterSeconds));
          return c.html(<SignInPage error="Too many failed sign-ins from this address; wait a minute." />, 429);
        };
        if (!standing.allowed) return refusal(standing);
        if (!code.redeem(form.get('code') ?? '')) {
          const taken = await limiter.take(failures, config.rateLimits.authFailures, clock.now());
          if (!taken.allowed) return refusal(taken);
          return c.html(<SignInPage error="That is not the current sign-in code. Take the latest from the service's log; each code works once." />, 401);
        }
      }
      // The same token `npm run owner-token` prints, through the same sign-in as a pasted one.
      const outcome = await startOwnerSession(c, signIn, await signDevelopmentSession(config, subject));
      if ('error' in outcome) return c.html(<SignInPage error={outcome.error} />, SIGN_IN_STATUS[outcome.code]);
      return c.redirect('/console', 303);
    });
  }

  if (oidc) {
    app.get('/console/oidc/start', async (c) => {
      let started;
      try {
        started = await oidc.start();
      } catch {
        c.header('Retry-After', '5');
        return c.html(<SignInPage error="The identity provider cannot be reached; try again shortly." />, 503);
      }
      setCookie(c, pendingCookie, Buffer.from(JSON.stringify(started.pending)).toString('base64url'), {
        httpOnly: true,
        secure: secureCookies(base),
        sameSite: 'Lax',
        path: '/',
        maxAge: 600,
      });
      return c.redirect(started.url, 302);
    });

    app.get('/console/oidc/callback', async (c) => {
      const pending = readPending(getCookie(c, pendingCookie));
      deleteCookie(c, pendingCookie, { path: '/', secure: secureCookies(base) });
      if (!pending) return c.html(<SignInPage error="This sign-in was not started here, or took longer than 10 minutes. Start again." />, 400);
      let claims;
      try {
        claims = await oidc.finish(new URL(c.req.url).search, pending);
      } catch (error) {
        log.info({ msg: 'console sign-in refused', error: error instanceof Error ? error.message : String(error) });
        return c.html(<SignInPage error="The identity provider's answer could not be accepted. Start again." />, 400);
      }
      const identity = ownerIdentityFromClaims(claims, config.owner.workspaceClaim);
      if (!identity) {
        return c.html(<SignInPage error={`The identity provider's ID token names no owner (it needs sub and ${config.owner.workspaceClaim}).`} />, 403);
      }
      // A session never outlives what it was made from, here the ID token (nor eight hours).
      const session = await createOwnerSessionForIdentity({ db, clock }, identity, typeof claims.exp === 'number' ? claims.exp * 1000 : undefined);
      setOwnerSessionCookie(c, base, session, clock.now());
      // Not a redirect: the browser arrived here from another site, and a redirect would keep
      // that cross-site context, so the SameSite=Strict cookie just set would not be sent with
      // it. A page of this origin moving on makes the next request same-site.
      return c.html(
        <Page title="Signed in" refreshTo="/console">
          <p>
            Signed in as <strong>{identity.subject}</strong>. <a href="/console">Continue to the console</a>.
          </p>
        </Page>,
      );
    });
  }

  app.post('/console/sign-out', async (c) => {
    // No CSRF token needed to end one's own session, but a cross-site page may not do it either.
    const refused = refusedPost(c);
    if (refused) return refused;
    await endOwnerSession({ db, clock }, readOwnerSessionCookie(c, base));
    clearOwnerSessionCookie(c, base);
    return c.redirect('/console/sign-in', 303);
  });
}

/** The development identity provider's form; with DEVELOPMENT_SIGN_IN=code it asks for the one-time code too. */
function DevelopmentSignIn(props: { withCode: boolean; code: string | undefined }) {
  return (
    <section class="warning" aria-labelledby="development-heading">
      <h2 id="development-heading">Development sign-in</h2>
      {props.withCode ? (
        <p>
          <strong>Development only.</strong> This service runs its development identity provider: whoever has the one-time sign-in code can sign in as any
          owner. The code is in the service's log (<code>development sign-in code</code>); each code works once, and the next one is printed then.
        </p>
      ) : (
        <p>
          <strong>Development only.</strong> This service runs its development identity provider: anyone who can open this page can sign in as any owner. It is
          offered only in that mode; with an external identity provider this form does not exist.
        </p>
      )}
      <form method="post" action="/console/sign-in/development" class="fields">
        <div>
          <label for="sub">Owner (subject)</label>
          <input type="text" id="sub" name="sub" required maxlength={128} autocomplete="username" placeholder="alice" />
        </div>
        {props.withCode ? (
          <div>
            <label for="code">Sign-in code (from the log)</label>
            <input
              type="text"
              id="code"
              name="code"
              required
              maxlength={64}
              autocomplete="one-time-code"
              spellcheck={false}
              placeholder="xxxxx-xxxxx-xxxxx-xxxxx"
              value={props.code}
            />
          </div>
        ) : null}
        <div>
          <button type="submit" id="development-sign-in">
            Sign in as this owner
          </button>
        </div>
      </form>
    </section>
  );
}

function readPending(cookie: string | undefined): PendingSignIn | undefined {
  if (!cookie) return undefined;
  try {
    const value = JSON.parse(Buffer.from(cookie, 'base64url').toString('utf8')) as Partial<PendingSignIn>;
    if (typeof value.state !== 'string' || typeof value.nonce !== 'string' || typeof value.verifier !== 'string') return undefined;
    return { state: value.state, nonce: value.nonce, verifier: value.verifier };
  } catch {
    return undefined;
  }
}

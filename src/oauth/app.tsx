import { Hono, type Context as HonoContext } from 'hono';
import { getCookie, setCookie, deleteCookie } from 'hono/cookie';
import { decodeJwt } from 'jose';
import type { Authenticator } from '../auth/authenticate.js';
import type { Config } from '../config.js';
import type { Clock, Logger } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { approveAuthorization, checkAuthorizationRequest, consentView, type AuthorizationParams } from '../domain/oauth/authorize.js';
import { authenticateClient, type ClientCredentials } from '../domain/oauth/clients.js';
import type { OAuthDeps } from '../domain/oauth/deps.js';
import { OAuthProtocolError, UnsafeAuthorizationRequest, type OAuthErrorCode } from '../domain/oauth/errors.js';
import { registerDynamicClient } from '../domain/oauth/registration.js';
import { revokeToken } from '../domain/oauth/revoke.js';
import { SCOPES } from '../domain/oauth/scopes.js';
import { createOwnerSession, csrfMatches, csrfToken, endOwnerSession, ownerSession } from '../domain/oauth/sessions.js';
import { exchangeCode, refreshTokens } from '../domain/oauth/token.js';
import { authFailureKey, registrationKey, type BucketRule, type RateLimiter } from '../domain/rate-limits.js';
import { clientAddress } from '../http/request.js';
import { MAX_BODY_BYTES, readLimitedBody } from '../http/body.js';
import type { Db } from '../store/driver.js';
import { createDocumentFetcher } from './cimd-fetch.js';
import { ConsentPage, ErrorPage, SignedInPage, SignInPage } from './pages.js';

/**
 * The authorization server's HTTP surface (decisions §7): RFC 8414 metadata, the
 * authorization endpoint with its consent page, token (RFC 6749, PKCE), revocation
 * (RFC 7009), dynamic registration (RFC 7591, deprecated), and the owner's sign-in. These
 * endpoints speak OAuth's own wire formats, so they live here rather than in the registry;
 * their logic is in src/domain/oauth/.
 */

export interface OAuthAppDeps {
  config: Config;
  db: Db;
  authenticator: Authenticator;
  /** The authenticator's limiter (src/service.ts): failures here and there fill one bucket per address. */
  limiter: RateLimiter;
  clock: Clock;
  log: Logger;
}

const AUTHORIZATION_PARAMS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'state', 'scope', 'resource'] as const;

const PAGE_CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export function createOAuthApp(deps: OAuthAppDeps): Hono {
  const { config, db, authenticator, limiter, clock, log } = deps;
  const issuer = config.publicBaseUrl;
  const secureCookies = issuer.startsWith('https://');
  // `__Host-` binds the cookie to this exact origin, but browsers accept it only when Secure.
  const sessionCookie = secureCookies ? '__Host-dfc_session' : 'dfc_session';
  const oauth: OAuthDeps = {
    db,
    clock,
    log,
    issuer,
    resource: `${issuer}/mcp`,
    fetchClientDocument: createDocumentFetcher({ allowLoopback: config.oauthCimdAllowLoopback }),
    cimdAllowLoopback: config.oauthCimdAllowLoopback,
  };
  const app = new Hono();

  // Every page and answer of the authorization server: never framed (clickjacking on the
  // consent page), never cached, no referrer to other sites (authorization URLs carry state
  // and codes). `same-origin`, not `no-referrer`: with the latter browsers send `Origin: null`
  // on form posts, and the posts below check their Origin.
  app.use('/oauth/*', async (c, next) => {
    await next();
    if (!c.res.headers.has('Content-Security-Policy')) c.header('Content-Security-Policy', PAGE_CSP);
    c.header('X-Frame-Options', 'DENY');
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'same-origin');
    c.header('Cache-Control', 'no-store');
  });

  app.get('/.well-known/oauth-authorization-server', (c) => {
    c.header('Cache-Control', 'max-age=300');
    return c.json({
      issuer,
      authorization_endpoint: `${issuer}/oauth/authorize`,
      token_endpoint: `${issuer}/oauth/token`,
      revocation_endpoint: `${issuer}/oauth/revoke`,
      registration_endpoint: `${issuer}/oauth/register`,
      scopes_supported: [...SCOPES],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
      service_documentation: `${issuer}/docs`,
    });
  });

  // Sessions of the consent page.

  const sessionToken = (c: HonoContext) => getCookie(c, sessionCookie);

  const startSession = async (c: HonoContext, jwt: string): Promise<{ subject: string } | { error: string; retryAfterSeconds?: number }> => {
    let credential;
    try {
      // With the client address, a failed sign-in costs that address a token of the failure
      // bucket the bearer-token endpoints use, and an address over its limit is refused.
      credential = await authenticator.authenticate(jwt, clientAddress(c));
    } catch (error) {
      if (error instanceof DomainError && error.code === 'rate_limited') {
        return { error: 'Too many failed sign-ins from this address; wait a minute.', retryAfterSeconds: error.details.retryAfterSeconds ?? 60 };
      }
      return { error: 'That is not a valid owner session token.' };
    }
    if (credential?.kind !== 'owner') return { error: 'That is not an owner session token.' };
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

  /** Form posts must come from this origin: a login-CSRF and cross-site-post guard besides SameSite. */
  const sameOrigin = (c: HonoContext) => {
    const origin = c.req.header('origin');
    return origin === undefined || origin === new URL(issuer).origin;
  };

  /** A form post the browser's pages make: a refusal is an HTML page, like every other answer there. */
  const pageForm = (c: HonoContext) =>
    readForm(c.req.raw, (message, status) => c.html(<ErrorPage title="This form cannot be read" message={message} />, status));

  /** A form post of the token and revocation endpoints: a refusal is RFC 6749 JSON, never cached. */
  const protocolForm = (c: HonoContext) =>
    readForm(c.req.raw, (description, status) =>
      c.json({ error: 'invalid_request', error_description: description }, status, { 'Cache-Control': 'no-store', Pragma: 'no-cache' }),
    );

  /** Only a path back into the authorization endpoint may follow a sign-in (no open redirect). */
  const safeNext = (next: string | undefined) => (next && /^\/oauth\/authorize\?[^\\]*$/.test(next) && !next.startsWith('//') ? next : undefined);

  app.get('/oauth/sign-in', (c) => c.html(<SignInPage next={safeNext(c.req.query('next'))} mode={config.owner.mode} />));

  app.post('/oauth/sign-in', async (c) => {
    if (!sameOrigin(c)) return c.html(<ErrorPage title="Refused" message="This form can only be posted from this service's own pages." />, 403);
    const form = await pageForm(c);
    if (form instanceof Response) return form;
    const next = safeNext(form.get('next') ?? undefined);
    const outcome = await startSession(c, (form.get('token') ?? '').trim());
    if ('error' in outcome) {
      if (outcome.retryAfterSeconds !== undefined) c.header('Retry-After', String(outcome.retryAfterSeconds));
      return c.html(<SignInPage next={next} mode={config.owner.mode} error={outcome.error} />, outcome.retryAfterSeconds !== undefined ? 429 : 401);
    }
    if (next) return c.redirect(next, 303);
    return c.html(<SignedInPage subject={outcome.subject} />);
  });

  // For an external identity provider's front end: trade the owner JWT for the session cookie.
  app.post('/oauth/session', async (c) => {
    const match = /^Bearer[ ]+(\S+)\s*$/i.exec(c.req.header('authorization') ?? '');
    if (!match) return c.json({ error: { code: 'unauthorized', message: 'Send the owner session as a bearer token.' } }, 401, { 'WWW-Authenticate': 'Bearer' });
    const outcome = await startSession(c, match[1]!);
    if ('error' in outcome && outcome.retryAfterSeconds !== undefined) {
      return c.json({ error: { code: 'rate_limited', message: outcome.error } }, 429, { 'Retry-After': String(outcome.retryAfterSeconds) });
    }
    if ('error' in outcome) return c.json({ error: { code: 'unauthorized', message: outcome.error } }, 401, { 'WWW-Authenticate': 'Bearer' });
    return c.body(null, 204);
  });

  app.post('/oauth/sign-out', async (c) => {
    if (!sameOrigin(c)) return c.html(<ErrorPage title="Refused" message="This form can only be posted from this service's own pages." />, 403);
    await endOwnerSession(oauth, sessionToken(c));
    deleteCookie(c, sessionCookie, { path: '/', secure: secureCookies });
    return c.body(null, 204);
  });

  // The authorization endpoint and its consent page.

  /** RFC 6749 §4.1.2 / RFC 9207: back to the client, with state echoed and iss on every answer. */
  const redirectBack = (c: HonoContext, to: { redirectUri: string; state: string | undefined }, params: Record<string, string>, status: 302 | 303) => {
    const url = new URL(to.redirectUri);
    for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
    if (to.state !== undefined) url.searchParams.set('state', to.state);
    url.searchParams.set('iss', issuer);
    return c.redirect(url.toString(), status);
  };

  const errorPage = (c: HonoContext, message: string, status: 400 | 403 = 400) =>
    c.html(<ErrorPage title="This authorization request cannot be completed" message={message} />, status);

  const authorizationParams = (get: (name: string) => string | undefined, repeated: readonly string[] = []): AuthorizationParams => ({
    ...(Object.fromEntries(AUTHORIZATION_PARAMS.map((name) => [name, get(name)])) as AuthorizationParams),
    repeated,
  });

  app.get('/oauth/authorize', async (c) => {
    const params = authorizationParams(
      (name) => c.req.query(name),
      AUTHORIZATION_PARAMS.filter((name) => (c.req.queries(name)?.length ?? 0) > 1),
    );
    try {
      const checked = await checkAuthorizationRequest(oauth, params);
      if (!checked.ok) return redirectBack(c, checked.to, { error: checked.error.code, error_description: checked.error.description }, 302);
      const token = sessionToken(c);
      const owner = await ownerSession(oauth, token);
      if (!owner || !token) {
        const here = new URL(c.req.url);
        return c.redirect(`/oauth/sign-in?next=${encodeURIComponent(`/oauth/authorize${here.search}`)}`, 302);
      }
      const view = await consentView(oauth, owner, checked.value);
      const fields = Object.fromEntries(AUTHORIZATION_PARAMS.flatMap((name) => (params[name] === undefined ? [] : [[name, params[name]]])));
      // The approve/deny post answers with a redirect to the client: form-action must allow its origin.
      c.header('Content-Security-Policy', `${PAGE_CSP.replace("form-action 'self'", `form-action 'self' ${new URL(view.redirectUri).origin}`)}`);
      return c.html(<ConsentPage view={view} subject={owner.subject} csrf={csrfToken(token)} fields={fields} />);
    } catch (error) {
      if (error instanceof UnsafeAuthorizationRequest) return errorPage(c, error.message);
      throw error;
    }
  });

  app.post('/oauth/authorize', async (c) => {
    if (!sameOrigin(c)) return errorPage(c, "The decision can only be posted from this service's consent page.", 403);
    const form = await pageForm(c);
    if (form instanceof Response) return form;
    const token = sessionToken(c);
    const owner = await ownerSession(oauth, token);
    if (!owner || !token) return errorPage(c, 'Your sign-in has ended. Start again from the application.', 403);
    if (!csrfMatches(token, form.get('csrf') ?? undefined)) return errorPage(c, 'The form is stale or was not sent by this page. Start again from the application.', 403);
    const params = authorizationParams((name) => form.get(name) ?? undefined);
    try {
      const checked = await checkAuthorizationRequest(oauth, params);
      if (!checked.ok) return redirectBack(c, checked.to, { error: checked.error.code, error_description: checked.error.description }, 303);
      const to = { redirectUri: checked.value.redirectUri, state: checked.value.state };
      const decision = form.get('decision');
      if (decision !== 'approve' && decision !== 'approve-read') {
        log.info({ msg: 'authorization denied', clientId: checked.value.client.clientId });
        return redirectBack(c, to, { error: 'access_denied', error_description: 'The owner denied the request.' }, 303);
      }
      const { code } = await approveAuthorization(oauth, owner, checked.value, decision === 'approve-read' ? 'read' : checked.value.requested);
      log.info({ msg: 'authorization approved', clientId: checked.value.client.clientId });
      return redirectBack(c, to, { code }, 303);
    } catch (error) {
      if (error instanceof UnsafeAuthorizationRequest) return errorPage(c, error.message);
      throw error;
    }
  });

  // The token, revocation and registration endpoints: JSON answers, never cached.

  const protocolError = (c: HonoContext, error: OAuthProtocolError) => {
    const status = error.retryAfterSeconds !== undefined ? 429 : STATUS[error.code];
    const headers: Record<string, string> = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
    if (status === 401) headers['WWW-Authenticate'] = 'Basic realm="dfc-oauth"';
    if (error.retryAfterSeconds !== undefined) headers['Retry-After'] = String(error.retryAfterSeconds);
    return c.json({ error: error.code, error_description: error.description }, status, headers);
  };

  /**
   * Decisions §8 on the protocol endpoints. RFC 6749 has no rate-limit error, and `slow_down`
   * belongs to the device flow (RFC 8628), so a refusal is HTTP 429 with Retry-After and the
   * closest standard code, `temporarily_unavailable`, in the usual JSON.
   */
  const refuseOverLimit = (key: string, rule: BucketRule, what: string) => {
    const standing = limiter.peek(key, rule, clock.now());
    if (!standing.allowed) {
      throw new OAuthProtocolError('temporarily_unavailable', `Too many ${what} from this address; retry after ${standing.retryAfterSeconds} s.`, standing.retryAfterSeconds);
    }
  };

  /**
   * Runs a protocol endpoint. With `failures`, an address over its failed-authentication limit
   * is refused before anything is looked at, and each answer with one of those codes (a wrong
   * client secret, an unknown code or refresh token: guesses) costs the address a token.
   */
  const handle = async (c: HonoContext, fn: () => Promise<Response>, failures?: readonly OAuthErrorCode[]) => {
    const address = clientAddress(c);
    const key = failures && address !== undefined ? authFailureKey(address) : undefined;
    try {
      if (key) refuseOverLimit(key, config.rateLimits.authFailures, 'failed authentications');
      return await fn();
    } catch (error) {
      if (error instanceof OAuthProtocolError) {
        if (key && failures!.includes(error.code) && error.retryAfterSeconds === undefined) limiter.take(key, config.rateLimits.authFailures, clock.now());
        return protocolError(c, error);
      }
      throw error;
    }
  };

  app.post('/oauth/token', (c) =>
    handle(c, async () => {
      const form = await protocolForm(c);
      if (form instanceof Response) return form;
      const client = await authenticateClient(oauth, clientCredentials(c.req.header('authorization'), form));
      const grantType = form.get('grant_type');
      const field = (name: string) => form.get(name) ?? undefined;
      let tokens;
      if (grantType === 'authorization_code') {
        tokens = await exchangeCode(oauth, client, { code: field('code'), redirect_uri: field('redirect_uri'), code_verifier: field('code_verifier'), resource: field('resource') });
      } else if (grantType === 'refresh_token') {
        tokens = await refreshTokens(oauth, client, { refresh_token: field('refresh_token'), scope: field('scope'), resource: field('resource') });
      } else {
        throw new OAuthProtocolError('unsupported_grant_type', 'grant_type must be authorization_code or refresh_token.');
      }
      return c.json(tokens, 200, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
    }, ['invalid_client', 'invalid_grant']),
  );

  app.post('/oauth/revoke', (c) =>
    handle(c, async () => {
      const form = await protocolForm(c);
      if (form instanceof Response) return form;
      const client = await authenticateClient(oauth, clientCredentials(c.req.header('authorization'), form));
      await revokeToken(oauth, client, form.get('token') ?? undefined);
      return c.body(null, 200, { 'Cache-Control': 'no-store' });
    }, ['invalid_client']),
  );

  app.post('/oauth/register', (c) =>
    handle(c, async () => {
      // Every registration attempt takes a token: each success stores a client for good.
      const address = clientAddress(c);
      if (address !== undefined) {
        const taken = limiter.take(registrationKey(address), config.rateLimits.registrations, clock.now());
        if (!taken.allowed) {
          throw new OAuthProtocolError('temporarily_unavailable', `Too many client registrations from this address; retry after ${taken.retryAfterSeconds} s.`, taken.retryAfterSeconds);
        }
      }
      let body: unknown;
      try {
        body = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(await readLimitedBody(c.req.raw)));
      } catch (error) {
        if (error instanceof DomainError) throw new OAuthProtocolError('invalid_client_metadata', `The body exceeds ${MAX_BODY_BYTES} bytes.`);
        throw new OAuthProtocolError('invalid_client_metadata', 'The body must be a JSON object.');
      }
      const registered = await registerDynamicClient(oauth, body);
      log.info({ msg: 'client registered dynamically', clientId: registered.client_id });
      return c.json(registered, 201, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
    }),
  );

  return app;
}

const STATUS: Record<OAuthErrorCode, 400 | 401 | 403 | 500 | 503> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_response_type: 400,
  unsupported_token_type: 400,
  invalid_scope: 400,
  invalid_target: 400,
  access_denied: 403,
  invalid_redirect_uri: 400,
  invalid_client_metadata: 400,
  server_error: 500,
  temporarily_unavailable: 503,
};

/**
 * Reads an application/x-www-form-urlencoded body (16 KiB limit). A repeated parameter is
 * refused (RFC 6749 §3.1: "MUST NOT be included more than once"). `answer` renders a refusal
 * in the endpoint's own format: RFC 6749 JSON on the protocol endpoints, an HTML page on the
 * browser's forms.
 */
async function readForm(
  request: Request,
  answer: (description: string, status: 400 | 413) => Response | Promise<Response>,
): Promise<URLSearchParams | Response> {
  const fail = (description: string, status: 400 | 413 = 400) => answer(description, status);
  const type = request.headers.get('content-type') ?? '';
  if (!/^application\/x-www-form-urlencoded\b/i.test(type)) return fail('The body must be application/x-www-form-urlencoded.');
  let bytes: Uint8Array;
  try {
    bytes = await readLimitedBody(request);
  } catch {
    return fail(`The body exceeds ${MAX_BODY_BYTES} bytes.`, 413);
  }
  const form = new URLSearchParams(new TextDecoder().decode(bytes));
  const seen = new Set<string>();
  for (const key of form.keys()) {
    if (seen.has(key)) return fail(`Parameter ${key} is repeated.`);
    seen.add(key);
  }
  return form;
}

/** Client authentication: HTTP Basic (RFC 6749 §2.3.1, form-encoded parts) or the body, not both. */
function clientCredentials(authorization: string | undefined, form: URLSearchParams): ClientCredentials {
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (basic) {
    if (form.has('client_secret')) throw new OAuthProtocolError('invalid_request', 'Use one client authentication method, not two.');
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new OAuthProtocolError('invalid_client', 'Malformed Basic credentials.');
    try {
      const clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
      const clientSecret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
      const bodyClientId = form.get('client_id');
      if (bodyClientId !== null && bodyClientId !== clientId) throw new OAuthProtocolError('invalid_request', 'client_id differs from the authenticated client.');
      return { clientId, clientSecret };
    } catch (error) {
      if (error instanceof OAuthProtocolError) throw error;
      throw new OAuthProtocolError('invalid_client', 'Malformed Basic credentials.');
    }
  }
  return { clientId: form.get('client_id') ?? undefined, clientSecret: form.get('client_secret') ?? undefined };
}

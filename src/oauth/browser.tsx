import type { Context } from 'hono';
import { getCookie } from 'hono/cookie';
import { formOriginRefusal } from '../http/owner-session.js';
import type { OAuthEndpointDeps } from './deps.js';
import { readForm } from '../http/form.js';
import { ErrorPage } from './pages.js';

/**
 * What the pages a browser sees (sign-in in session.tsx, consent in authorize.tsx) share:
 * their Content-Security-Policy, the owner's session cookie, the same-origin rule on form
 * posts, and form refusals rendered as pages.
 */

export const PAGE_CSP = "default-src 'none'; style-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export const sessionToken = (deps: OAuthEndpointDeps, c: Context) => getCookie(c, deps.sessionCookie);

/** Form posts must come from this service's pages: a login-CSRF and cross-site-post guard besides SameSite. */
export const originRefusal = (deps: OAuthEndpointDeps, c: Context) =>
  formOriginRefusal(c, { publicBaseUrl: deps.oauth.issuer, publicBaseUrlSet: deps.config.publicBaseUrlSet });

/** A form post the browser's pages make: a refusal is an HTML page, like every other answer there. */
export const pageForm = (c: Context) =>
  readForm(c.req.raw, (message, status) => c.html(<ErrorPage title="This form cannot be read" message={message} />, status));

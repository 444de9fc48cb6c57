import { Hono } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Config } from '../config.js';
import type { Clock, Logger } from '../domain/context.js';
import type { OAuthDeps } from '../domain/oauth/deps.js';
import type { RateLimiter } from '../domain/rate-limits.js';
import type { Db } from '../store/driver.js';
import { mountAuthorizationEndpoint } from './authorize.js';
import { limitUnreadBody } from './body-limit.js';
import { PAGE_CSP } from './browser.js';
import { MetadataDocumentCache } from '../domain/oauth/metadata-documents.js';
import { requestBaseUrl, sameServiceUrl } from '../http/base-url.js';
import { ownerSessionCookie } from '../http/owner-session.js';
import { clientAddress } from '../http/request.js';
import { createDocumentFetcher } from './cimd-fetch.js';
import { createFetchBudget } from './cimd-limits.js';
import type { OAuthEndpointDeps } from './deps.js';
import { mountMetadataEndpoint } from './metadata.js';
import { mountRegistrationEndpoint } from './registration.js';
import { mountRevocationEndpoint } from './revoke.js';
import { mountSessionEndpoints } from './session.js';
import { mountTokenEndpoint } from './token.js';

/**
 * The authorization server's HTTP surface (docs/reference/rules.md "OAuth"): RFC 8414 metadata (metadata.ts),
 * the authorization endpoint with its consent page (authorize.tsx), token (RFC 6749, PKCE;
 * token.ts), revocation (RFC 7009; revoke.ts), dynamic registration (RFC 7591, deprecated;
 * registration.ts), and the owner's sign-in (session.tsx). These endpoints speak OAuth's own
 * wire formats, so they live here rather than in the registry; their logic is in
 * src/domain/oauth/. This file builds the sub-app: the headers every answer carries, and
 * each endpoint group mounted in turn.
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

export function createOAuthApp(deps: OAuthAppDeps): Hono {
  const { config, db, authenticator, limiter, clock, log } = deps;
  const issuer = config.publicBaseUrl;
  const sessionCookie = ownerSessionCookie(issuer);
  const budget = createFetchBudget({ fetch: createDocumentFetcher({ allowLoopback: config.oauthCimdAllowLoopback }), limiter, clock });
  const oauth: OAuthDeps = {
    db,
    clock,
    log,
    issuer,
    resource: `${issuer}/mcp`,
    isResource: (name) => sameServiceUrl(name, `${issuer}/mcp`, config),
    fetchClientDocument: budget.forAddress(undefined),
    clientDocuments: new MetadataDocumentCache(),
    cimdAllowLoopback: config.oauthCimdAllowLoopback,
    capacity: config.capacity,
  };
  const oauthFor = (c: Parameters<OAuthEndpointDeps['oauthFor']>[0]): OAuthDeps => ({
    ...oauth,
    issuer: requestBaseUrl(c, config),
    fetchClientDocument: budget.forAddress(clientAddress(c)),
  });
  const endpoints: OAuthEndpointDeps = { config, authenticator, limiter, clock, log, oauth, oauthFor, sessionCookie };
  const app = new Hono();

  // Every page and answer of the authorization server: never framed (clickjacking on the
  // consent page), never cached, no referrer to other sites (authorization URLs carry state
  // and codes). `same-origin`, not `no-referrer`: with the latter browsers send `Origin: null`
  // on form posts, and the posts check their Origin (browser.tsx, originRefusal).
  app.use('/oauth/*', async (c, next) => {
    await next();
    if (!c.res.headers.has('Content-Security-Policy')) c.header('Content-Security-Policy', PAGE_CSP);
    c.header('X-Frame-Options', 'DENY');
    c.header('X-Content-Type-Options', 'nosniff');
    c.header('Referrer-Policy', 'same-origin');
    c.header('Cache-Control', 'no-store');
  });

  // Any method, any path, one none serves included: bodies no endpoint reads are held to 16 KiB.
  app.use('/oauth/*', limitUnreadBody);

  mountMetadataEndpoint(app, endpoints);
  mountSessionEndpoints(app, endpoints);
  mountAuthorizationEndpoint(app, endpoints);
  mountTokenEndpoint(app, endpoints);
  mountRevocationEndpoint(app, endpoints);
  mountRegistrationEndpoint(app, endpoints);

  return app;
}

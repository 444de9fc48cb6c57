import type { Context } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Config } from '../config.js';
import type { Clock, Logger } from '../domain/context.js';
import type { OAuthDeps } from '../domain/oauth/deps.js';
import type { RateLimiter } from '../domain/rate-limits.js';

/** What each endpoint group of the authorization server is handed; createOAuthApp (app.ts) builds it once. */
export interface OAuthEndpointDeps {
  config: Config;
  authenticator: Authenticator;
  /** The authenticator's limiter (src/service.ts): failures here and there fill one bucket per address. */
  limiter: RateLimiter;
  clock: Clock;
  log: Logger;
  /** What the protocol logic in src/domain/oauth is handed; its issuer is PUBLIC_BASE_URL. */
  oauth: OAuthDeps;
  /** The same for one request: its metadata-document fetches draw from its address's budget (cimd-limits.ts). */
  oauthFor(c: Context): OAuthDeps;
  /** The name of the owner's session cookie (src/http/owner-session.ts, shared with the owner console). */
  sessionCookie: string;
}

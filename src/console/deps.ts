import type { Authenticator } from '../auth/authenticate.js';
import type { Config } from '../config.js';
import type { Clock, CredentialOf, Logger } from '../domain/context.js';
import type { RateLimiter } from '../domain/rate-limits.js';
import type { Db } from '../store/driver.js';

/** What the console is handed by the composition root (src/app.ts); mountConsole (app.ts) passes it on. */
export interface ConsoleDeps {
  config: Config;
  db: Db;
  /** The rate-limited authenticator: a pasted or development sign-in goes through it like a bearer token. */
  authenticator: Authenticator;
  /** The same limiter: console requests draw from the owner's bucket. */
  limiter: RateLimiter;
  clock: Clock;
  log: Logger;
}

export type Owner = CredentialOf<'owner'>;

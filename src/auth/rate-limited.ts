import { DomainError } from '../domain/errors.js';
import { authFailureKey, credentialBucket, rateLimited, type RateLimiter, type RateLimitSettings } from '../domain/rate-limits.js';
import type { Authenticator } from './authenticate.js';

/**
 * Wraps an authenticator with the limits of docs/rules.md "Errors and limits", so every transport that
 * authenticates is limited the same way: an address that failed authentication too often
 * is refused before its token is even looked at, a failure costs that address a token, and
 * each agent and device credential draws from its own bucket.
 */
export function withRateLimits(inner: Authenticator, deps: { limiter: RateLimiter; settings: RateLimitSettings; now: () => number }): Authenticator {
  const { limiter, settings, now } = deps;
  return {
    async authenticate(bearer, clientAddress) {
      const failureKey = clientAddress !== undefined ? authFailureKey(clientAddress) : undefined;
      if (failureKey && bearer !== null) {
        const standing = limiter.peek(failureKey, settings.authFailures, now());
        if (!standing.allowed) throw rateLimited(standing, 'client address after failed authentications');
      }
      let credential;
      try {
        credential = await inner.authenticate(bearer, clientAddress);
      } catch (error) {
        if (failureKey && error instanceof DomainError && error.code === 'unauthorized') limiter.take(failureKey, settings.authFailures, now());
        throw error;
      }
      const bucket = credentialBucket(credential, settings);
      if (bucket) {
        const taken = limiter.take(bucket.key, bucket.rule, now());
        if (!taken.allowed) throw rateLimited(taken, `${credential!.kind} credential`);
      }
      return credential;
    },
  };
}

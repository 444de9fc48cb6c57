import { DomainError } from '../domain/errors.js';
import { authFailureKey, credentialBucket, rateLimited, type RateLimiter, type RateLimitSettings } from '../domain/rate-limits.js';
import type { Authenticator, CredentialResolver } from './authenticate.js';

/**
 * Wraps an authenticator with the limits of docs/reference/rules.md "Errors and limits", so every transport
 * that authenticates is limited the same way. Failed authentications draw from a bucket per
 * client address; once it is empty, that address's further failures are 429 instead of 401 —
 * but a valid credential from it is still served, so one bad client behind a shared address
 * (a NAT, an office proxy) locks out nobody but itself. What an address over its budget may
 * still make the service do is bounded by `plausible`: a token that cannot be valid is refused
 * before any lookup; an opaque token of the right shape costs one hash and one indexed read, an
 * owner JWT whose unverified claims fit costs one signature check (a remote JWKS is refetched
 * for an unknown key at most once per 30 s, whoever asks: jose's cooldown), the same work a
 * valid request costs.
 * Each agent and device credential, and each owner, then draws from its own bucket.
 */
export function withRateLimits(inner: CredentialResolver, deps: { limiter: RateLimiter; settings: RateLimitSettings; now: () => number }): Authenticator {
  const { limiter, settings, now } = deps;
  return {
    async authenticate(bearer, clientAddress) {
      const failureKey = clientAddress !== undefined && bearer !== null ? authFailureKey(clientAddress) : undefined;
      if (failureKey) {
        const standing = await limiter.peek(failureKey, settings.authFailures, now());
        if (!standing.allowed && !inner.plausible(bearer!)) throw rateLimited(standing, 'client address after failed authentications');
      }
      let credential;
      try {
        credential = await inner.authenticate(bearer, clientAddress);
      } catch (error) {
        if (failureKey && error instanceof DomainError && error.code === 'unauthorized') {
          const taken = await limiter.take(failureKey, settings.authFailures, now());
          if (!taken.allowed) throw rateLimited(taken, 'client address after failed authentications');
        }
        throw error;
      }
      const bucket = credentialBucket(credential, settings);
      if (bucket) {
        const taken = await limiter.take(bucket.key, bucket.rule, now());
        if (!taken.allowed) throw rateLimited(taken, `${credential!.kind} credential`);
      }
      return credential;
    },
  };
}

import type { Clock } from '../domain/context.js';
import { FetchBudgetExceeded, type DocumentFetcher } from '../domain/oauth/metadata-documents.js';
import { addressNetwork, type BucketRule, type RateLimiter } from '../domain/rate-limits.js';

/**
 * The budget of Client ID Metadata Document fetches. Any anonymous request to the
 * authorization, token or revocation endpoint can name a document URL, and each one not
 * cached makes this server connect somewhere, so fetches are limited twice: per client
 * address (a token bucket in the service's limiter) and overall (at most a few in flight at
 * once; one over that is refused at once rather than queued, so a flood holds no requests
 * open). A fetch served from a cache costs nothing.
 */

export interface CimdFetchLimits {
  /** Fetches per client address; an IPv6 address counts by its /64, which one host usually has whole. */
  perAddress: BucketRule;
  /** Fetches in flight at once, from every address together. */
  maxConcurrent: number;
}

export const CIMD_FETCH_LIMITS: CimdFetchLimits = {
  // 10 at once, then one every 6 s: a client needs one fetch per document per max-age.
  perAddress: { ratePerSecond: 10 / 60, burst: 10 },
  maxConcurrent: 4,
};

/** The limiter key of an address's fetch bucket. */
export function cimdFetchKey(address: string | undefined): string {
  return `oauth-cimd-fetches:${address === undefined ? 'unknown' : addressNetwork(address)}`;
}

/** Wraps the fetcher: `forAddress(address)` is the fetcher one request may use. */
export function createFetchBudget(deps: { fetch: DocumentFetcher; limiter: RateLimiter; clock: Clock; limits?: CimdFetchLimits }) {
  const limits = deps.limits ?? CIMD_FETCH_LIMITS;
  let inFlight = 0;
  return {
    forAddress(address: string | undefined): DocumentFetcher {
      return async (url) => {
        // Checked before the address's bucket, so a refusal for being busy costs the address nothing.
        if (inFlight >= limits.maxConcurrent) throw new FetchBudgetExceeded(1);
        // The slot is held while the bucket answers (a Redis round trip with REDIS_URL), so
        // requests arriving meanwhile see it taken.
        inFlight += 1;
        try {
          const taken = await deps.limiter.take(cimdFetchKey(address), limits.perAddress, deps.clock.now());
          if (!taken.allowed) throw new FetchBudgetExceeded(taken.retryAfterSeconds);
          return await deps.fetch(url);
        } finally {
          inFlight -= 1;
        }
      };
    },
  };
}

import type { Credential } from './context.js';
import { DomainError } from './errors.js';

export interface BucketRule {
  /** Tokens added per second. */
  ratePerSecond: number;
  /** Bucket size: how many requests may come at once after a quiet spell. */
  burst: number;
}

export interface TakeResult {
  allowed: boolean;
  limit: number;
  remaining: number;
  /** Seconds until one more request would be allowed (0 when allowed now). */
  retryAfterSeconds: number;
}

/**
 * Token buckets keyed by string. In one process the state is a Map (below); with `REDIS_URL`
 * every instance draws from one bucket per key in Redis (src/bus/rate-limits.ts), so the
 * answers are promises.
 */
export interface RateLimiter {
  /**
   * Takes one token, or `count` at once (all or none): one request that carries several
   * messages, such as an MCP batch, costs what they would cost one by one.
   */
  take(key: string, rule: BucketRule, now: number, count?: number): Promise<TakeResult>;
  /** Looks without taking: used to refuse an address that already failed too often. */
  peek(key: string, rule: BucketRule, now: number): Promise<TakeResult>;
}

/**
 * What a bucket holding `tokens` answers for a request of `count`: shared by the in-memory
 * buckets and the Redis ones, so both answer alike.
 */
export function bucketAnswer(tokens: number, rule: BucketRule, allowed: boolean, count = 1): TakeResult {
  return {
    allowed,
    limit: rule.burst,
    remaining: Math.max(0, Math.floor(tokens)),
    retryAfterSeconds: allowed ? 0 : Math.max(1, Math.ceil((count - tokens) / rule.ratePerSecond)),
  };
}

interface Bucket {
  tokens: number;
  updatedAt: number;
}

export function createMemoryRateLimiter(options: { maxKeys?: number } = {}): RateLimiter {
  const buckets = new Map<string, Bucket>();
  const maxKeys = options.maxKeys ?? 100_000;

  const refill = (key: string, rule: BucketRule, now: number): Bucket => {
    const bucket = buckets.get(key);
    if (!bucket) return { tokens: rule.burst, updatedAt: now };
    // A clock that steps backwards (NTP, a test's clock) must not drain the bucket.
    const elapsed = Math.max(0, now - bucket.updatedAt);
    const tokens = Math.min(rule.burst, bucket.tokens + (elapsed / 1000) * rule.ratePerSecond);
    return { tokens, updatedAt: Math.max(now, bucket.updatedAt) };
  };
  return {
    async take(key, rule, now, count = 1) {
      const bucket = refill(key, rule, now);
      const allowed = bucket.tokens >= count;
      if (allowed) bucket.tokens -= count;
      // Bounded memory under a flood of distinct keys: a full bucket carries no state, so
      // dropping the oldest entries loses nothing but partial refills.
      if (!buckets.has(key) && buckets.size >= maxKeys) buckets.delete(buckets.keys().next().value!);
      buckets.delete(key);
      buckets.set(key, bucket);
      return bucketAnswer(bucket.tokens, rule, allowed, count);
    },
    async peek(key, rule, now) {
      const bucket = refill(key, rule, now);
      return bucketAnswer(bucket.tokens, rule, bucket.tokens >= 1);
    },
  };
}

export interface RateLimitSettings {
  agent: BucketRule;
  device: BucketRule;
  /** Per owner (subject in its workspace), whichever session they use. */
  owner: BucketRule;
  /** Failed authentications per client address. */
  authFailures: BucketRule;
  /** OAuth dynamic client registrations per client address (each one stores a client). */
  registrations: BucketRule;
}

/**
 * The per-address bucket of failed authentications (docs/reference/rules.md "Errors and limits"). One key for every place
 * that authenticates — bearer tokens on /v1 and /mcp, the consent page's sign-in, OAuth client
 * authentication and grants at /oauth/token and /oauth/revoke — so that guessing in one place
 * is not free in another.
 */
export const authFailureKey = (clientAddress: string): string => `auth-failures:${clientAddress}`;

export const registrationKey = (clientAddress: string): string => `oauth-registrations:${clientAddress}`;

/** The bucket a credential draws from, or undefined for kinds that are not limited per credential. */
export function credentialBucket(credential: Credential | null, settings: RateLimitSettings): { key: string; rule: BucketRule } | undefined {
  if (credential?.kind === 'agent') return { key: `agent:${credential.connectionId}`, rule: settings.agent };
  if (credential?.kind === 'device') return { key: `device:${credential.deviceId}`, rule: settings.device };
  // Keyed by the owner, not the session: signing in again must not buy a fresh bucket.
  if (credential?.kind === 'owner') return { key: `owner:${credential.workspaceId}:${credential.subject}`, rule: settings.owner };
  return undefined;
}

export function rateLimited(result: TakeResult, what: string): DomainError {
  return new DomainError('rate_limited', `Too many requests for this ${what}; retry after ${result.retryAfterSeconds} s.`, {
    retryAfterSeconds: result.retryAfterSeconds,
    rateLimit: { limit: result.limit, remaining: result.remaining },
  });
}

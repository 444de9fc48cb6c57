import { isIP } from 'node:net';
import type { Credential } from './context.js';
import { DomainError } from './errors.js';
import { FairCache, type FairBounds } from './fair-cache.js';

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

/**
 * The in-memory buckets' bounds (docs/operators/security.md "Memory every tenant shares"): a
 * workspace keeps up to 4,096 buckets, room for its 1,000 agent connections, 1,000 devices and
 * their owners by default, and so does each client address; 100,000 in all.
 */
export const BUCKET_BOUNDS: FairBounds = { perPartition: 4096, total: 100_000 };

/**
 * Whose a bucket is, from its key: the workspace of a credential's bucket (`credentialBucket`),
 * the network of a client address's (an IPv6 address by its /64, which one host usually has
 * whole). One workspace's or one address's keys then evict only its own.
 */
export function bucketPartition(key: string): string {
  const colon = key.indexOf(':');
  const kind = key.slice(0, colon);
  const rest = key.slice(colon + 1);
  if (kind === 'agent' || kind === 'device' || kind === 'owner') return `workspace:${rest.slice(0, rest.indexOf(':'))}`;
  return `address:${addressNetwork(rest)}`;
}

/** An IPv4 address as it is (an IPv4-mapped IPv6 one unwrapped); an IPv6 address as its /64. */
export function addressNetwork(address: string): string {
  if (isIP(address) !== 6 || /^::ffff:/i.test(address)) return address.replace(/^::ffff:/i, '');
  const groups = address.replace(/%.*$/, '').split('::');
  const head = groups[0] === '' ? [] : groups[0]!.split(':');
  const tail = groups.length > 1 && groups[1] !== '' ? groups[1]!.split(':') : [];
  const full = [...head, ...Array<string>(8 - head.length - tail.length).fill('0'), ...tail];
  return `${full
    .slice(0, 4)
    .map((group) => parseInt(group, 16).toString(16))
    .join(':')}::/64`;
}

export function createMemoryRateLimiter(options: { bounds?: FairBounds } = {}): RateLimiter {
  // Bounded memory under a flood of distinct keys: a full bucket carries no state, so an
  // evicted one loses nothing but a partial refill, and only its own partition's load evicts it.
  const buckets = new FairCache<Bucket>(options.bounds ?? BUCKET_BOUNDS);

  const refill = (key: string, rule: BucketRule, now: number): Bucket => {
    const bucket = buckets.peek(bucketPartition(key), key);
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
      buckets.set(bucketPartition(key), key, bucket);
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
 * is not free in another. An IPv6 address counts by its /64 (`addressNetwork`): rotating the
 * address within the network its host holds buys no fresh bucket.
 */
export const authFailureKey = (clientAddress: string): string => `auth-failures:${addressNetwork(clientAddress)}`;

// Keyed by the address's network, as the failures are: one host usually holds a whole IPv6 /64,
// so a bucket per address would give it 2^64 fresh buckets.
export const registrationKey = (clientAddress: string): string => `oauth-registrations:${addressNetwork(clientAddress)}`;

/** The bucket a credential draws from, or undefined for kinds that are not limited per credential. */
export function credentialBucket(credential: Credential | null, settings: RateLimitSettings): { key: string; rule: BucketRule } | undefined {
  // The workspace comes second (`bucketPartition`), with any `:` of it escaped.
  const workspace = credential ? encodeURIComponent(credential.workspaceId) : '';
  if (credential?.kind === 'agent') return { key: `agent:${workspace}:${credential.connectionId}`, rule: settings.agent };
  if (credential?.kind === 'device') return { key: `device:${workspace}:${credential.deviceId}`, rule: settings.device };
  // Keyed by the owner, not the session: signing in again must not buy a fresh bucket.
  if (credential?.kind === 'owner') return { key: `owner:${workspace}:${credential.subject}`, rule: settings.owner };
  return undefined;
}

export function rateLimited(result: TakeResult, what: string): DomainError {
  return new DomainError('rate_limited', `Too many requests for this ${what}; retry after ${result.retryAfterSeconds} s.`, {
    retryAfterSeconds: result.retryAfterSeconds,
    rateLimit: { limit: result.limit, remaining: result.remaining },
  });
}

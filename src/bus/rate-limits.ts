import { bucketAnswer, type BucketRule, type RateLimiter } from '../domain/rate-limits.js';
import type { RedisConnection } from './redis.js';

/**
 * One token bucket per key for the whole service (docs/reference/rules.md "Errors and limits", docs/operators/scale-out.md
 * "What instances share"): the same bucket as the in-memory limiter's, kept in a Redis hash
 * and updated by one Lua script, which Redis runs atomically, so two instances can never
 * both spend the last token. Refill uses Redis's clock (TIME), one clock for every instance.
 * A key expires once its bucket would be full again: a full bucket carries no state.
 *
 * ARGV: rate per second, burst, tokens to take (0 = look only). Returns [allowed, tokens].
 */
const TOKEN_BUCKET = `
local rate = tonumber(ARGV[1])
local burst = tonumber(ARGV[2])
local count = tonumber(ARGV[3])
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local state = redis.call('HMGET', KEYS[1], 'tokens', 'at')
local tokens = tonumber(state[1])
local at = tonumber(state[2])
if tokens == nil or at == nil then
  tokens = burst
  at = now
end
tokens = math.min(burst, tokens + math.max(0, now - at) / 1000 * rate)
at = math.max(now, at)
local allowed = 0
if count == 0 then
  if tokens >= 1 then allowed = 1 end
  return { allowed, tostring(tokens) }
end
if tokens >= count then
  allowed = 1
  tokens = tokens - count
end
redis.call('HSET', KEYS[1], 'tokens', tostring(tokens), 'at', tostring(at))
redis.call('PEXPIRE', KEYS[1], math.ceil((burst - tokens) / rate * 1000) + 1000)
return { allowed, tostring(tokens) }
`;

type BucketCommand = (key: string, rate: number, burst: number, count: number) => Promise<[number, string]>;

/**
 * After a bucket command fails (Redis down, or slower than the 500 ms command timeout), this
 * long passes before the next one is sent: a Redis that hangs with its connection open would
 * otherwise cost every request the whole timeout (docs/operators/scale-out.md "What instances share").
 */
const PAUSE_AFTER_FAILURE_MS = 1000;

/**
 * The shared limiter. While Redis is down (or slower than the command timeout) each call is
 * answered by `fallback`, this instance's in-memory buckets, and counted with `onFallback`:
 * the limits then hold per instance, as without Redis, and requests go on. After a failed
 * command the limiter asks Redis again only PAUSE_AFTER_FAILURE_MS later, and then with one
 * request at a time until a command succeeds (the others fall back meanwhile), so at most one
 * request per pause waits on a hung Redis, however many arrive together.
 */
export function createRedisRateLimiter(redis: RedisConnection, deps: { fallback: RateLimiter; onFallback: () => void }): RateLimiter {
  // defineCommand sends EVALSHA and the script itself on NOSCRIPT (a restarted Redis has forgotten it).
  redis.commands.defineCommand('dfcTokenBucket', { numberOfKeys: 1, lua: TOKEN_BUCKET });
  // The command is added at run time, so ioredis's types cannot name it.
  const bucket = (redis.commands as unknown as { dfcTokenBucket: BucketCommand }).dfcTokenBucket.bind(redis.commands);
  /** Set by a failed command: until then, no command; after it, one at a time until one succeeds. */
  let pausedUntil: number | null = null;
  let probing = false;

  const ask = async (key: string, rule: BucketRule, count: number) => {
    if (!redis.canSend()) return undefined;
    const probe = pausedUntil !== null;
    if (probe && (performance.now() < pausedUntil! || probing)) return undefined;
    if (probe) probing = true;
    try {
      const [allowed, tokens] = await bucket(`${redis.prefix}bucket:${key}`, rule.ratePerSecond, rule.burst, count);
      if (probe) pausedUntil = null;
      return { allowed: allowed === 1, tokens: Number(tokens) };
    } catch {
      pausedUntil = performance.now() + PAUSE_AFTER_FAILURE_MS;
      return undefined;
    } finally {
      if (probe) probing = false;
    }
  };

  return {
    async take(key, rule, now, count = 1) {
      const shared = await ask(key, rule, count);
      if (shared) return bucketAnswer(shared.tokens, rule, shared.allowed, count);
      deps.onFallback();
      return deps.fallback.take(key, rule, now, count);
    },
    async peek(key, rule, now) {
      const shared = await ask(key, rule, 0);
      if (shared) return bucketAnswer(shared.tokens, rule, shared.allowed);
      deps.onFallback();
      return deps.fallback.peek(key, rule, now);
    },
  };
}

import type { Context } from 'hono';
import type { CredentialOf } from '../domain/context.js';
import { credentialBucket, rateLimited, type RateLimiter } from '../domain/rate-limits.js';
import type { Config } from '../config.js';
import { requestBody, type HttpEnv } from '../http/request.js';
import { envelope, rpcError } from './refusals.js';

/**
 * The most messages one 2025-era JSON-RPC batch may carry (the SDK's own bound is 100). Each
 * one also counts against the caller's rate limit: 40 requests of 100 calls each used to run
 * 4,000 tool calls within a budget of 40.
 */
export const MAX_BATCH_MESSAGES = 10;

export interface RpcMessage {
  method?: unknown;
  id?: unknown;
  params?: { name?: unknown; requestId?: unknown; capabilities?: unknown } | null;
}

/** A request's body as read once by the gate: its bytes (for the SDK) and what they parse to. */
export interface RequestMessages {
  bytes: Uint8Array;
  /** The parsed JSON, when `parsedOk`. */
  parsed: unknown;
  parsedOk: boolean;
  /** The messages of the request (one, or a batch's), objects only. */
  messages: RpcMessage[];
}

/** Reads the body (16 KiB, 413 past it) and bounds a batch (400); a body that is not JSON is the SDK's to answer (-32700). */
export async function readMessages(c: Context<HttpEnv>): Promise<RequestMessages | { response: Response }> {
  const bytes = await requestBody(c);
  let parsed: unknown;
  let parsedOk = false;
  try {
    parsed = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
    parsedOk = true;
  } catch {
    // Not JSON: the SDK answers it with the protocol's -32700 parse error.
  }
  if (Array.isArray(parsed) && parsed.length > MAX_BATCH_MESSAGES) {
    // The SDK's answer to a batch over its own bound, with this server's bound.
    return { response: rpcError(400, `Invalid Request: Batch must not exceed ${MAX_BATCH_MESSAGES} messages`, -32600) };
  }
  const messages = (parsedOk ? (Array.isArray(parsed) ? parsed : [parsed]) : []).filter((m): m is RpcMessage => typeof m === 'object' && m !== null);
  return { bytes, parsed, parsedOk, messages };
}

/** Authentication drew one token for the request; each further message of a batch draws its own (429 when they run out). */
export async function batchRefusal(
  c: Context<HttpEnv>,
  body: RequestMessages,
  credential: CredentialOf<'agent'>,
  limits: { limiter: RateLimiter; rateLimits: Config['rateLimits']; now: () => number },
): Promise<Response | undefined> {
  const extra = Array.isArray(body.parsed) ? body.parsed.length - 1 : 0;
  const bucket = extra > 0 ? credentialBucket(credential, limits.rateLimits) : undefined;
  if (!bucket) return undefined;
  const taken = await limits.limiter.take(bucket.key, bucket.rule, limits.now(), extra);
  return taken.allowed ? undefined : envelope(c, rateLimited(taken, 'agent credential (each message of a batch counts)'));
}

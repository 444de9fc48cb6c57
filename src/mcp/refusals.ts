import type { Context } from 'hono';
import type { DomainError } from '../domain/errors.js';
import { toHttpError } from '../http/errors.js';
import type { HttpEnv } from '../http/request.js';

/**
 * The two shapes in which the gate refuses a request over HTTP before the SDK sees it: the
 * service's error envelope (401, 403, 405, 413, 429, 503: the statuses the contract defines)
 * and a JSON-RPC error body (400, 406, 415: the statuses the contract leaves to MCP).
 */
export function envelope(c: Context<HttpEnv>, error: DomainError, headers: Record<string, string> = {}): Response {
  const mapped = toHttpError(error, c.get('requestId'));
  c.set('errorCode', error.code);
  return c.json(mapped.body, mapped.status, { ...mapped.headers, ...headers });
}

/** JSON-RPC error body, for the statuses the contract leaves to MCP (400, 406, 415). */
export function rpcError(status: 400 | 406 | 415, message: string, code = -32000): Response {
  return Response.json({ jsonrpc: '2.0', error: { code, message }, id: null }, { status });
}

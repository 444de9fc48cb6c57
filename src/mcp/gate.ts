import type { Context } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Config } from '../config.js';
import type { CredentialOf } from '../domain/context.js';
import type { RateLimiter } from '../domain/rate-limits.js';
import type { HttpEnv } from '../http/request.js';
import { authenticateAgent } from './authentication.js';
import type { HostPolicy } from './hosts.js';
import { batchRefusal, readMessages, type RequestMessages } from './request-messages.js';
import { mediaRefusal, streamRefusal, transportRefusal } from './transport-rules.js';

export interface HttpGateDeps {
  config: Config;
  authenticator: Authenticator;
  limiter: RateLimiter;
  now: () => number;
  hosts: HostPolicy;
  /** The protected-resource metadata a 401 points at, as this request names the service. */
  metadataUrl(c: Context<HttpEnv>): string;
}

/** A GET of a 2025-era session's stream the gate let through: its caller (the session id is checked next, client-sessions.ts). */
export interface StreamAdmitted {
  stream: true;
  credential: CredentialOf<'agent'>;
}

/** A request the gate let through: its caller and its messages, read once. */
export interface Admitted extends RequestMessages {
  credential: CredentialOf<'agent'>;
}

/**
 * The HTTP gate of POST /mcp, in this order (docs/reference/rules.md "MCP"):
 *   Host/Origin (403) → method (405) → bearer (401, or 403 for another credential kind)
 *   → Content-Type (415) → Accept (406) → 16 KiB body (413) → batch size (400)
 *   → each further message of a batch on the rate limit (429).
 * What is left for tools/call (the live grant, the ceiling, the kill switch) is
 * tool-call-gate.ts, once the request's context exists. A GET with a session id (let through by
 * the method rule) is authenticated alike, then needs only to accept an event stream (406).
 */
export function createHttpGate(deps: HttpGateDeps): (c: Context<HttpEnv>) => Promise<Admitted | StreamAdmitted | { response: Response }> {
  const limits = { limiter: deps.limiter, rateLimits: deps.config.rateLimits, now: deps.now };
  return async (c) => {
    const transport = transportRefusal(c, deps.hosts);
    if (transport) return { response: transport };
    const auth = await authenticateAgent(c, deps.authenticator, deps.metadataUrl(c));
    if ('response' in auth) return auth;
    if (c.req.method === 'GET') {
      const refused = streamRefusal(c);
      return refused ? { response: refused } : { stream: true, credential: auth.credential };
    }
    const media = mediaRefusal(c);
    if (media) return { response: media };
    const body = await readMessages(c);
    if ('response' in body) return body;
    const batch = await batchRefusal(c, body, auth.credential, limits);
    if (batch) return { response: batch };
    return { ...body, credential: auth.credential };
  };
}

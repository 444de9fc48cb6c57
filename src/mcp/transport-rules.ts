import type { HttpBindings } from '@hono/node-server';
import type { Context } from 'hono';
import { DomainError } from '../domain/errors.js';
import type { HttpEnv } from '../http/request.js';
import type { HostPolicy } from './hosts.js';
import { SESSION_HEADER } from './client-sessions.js';
import { envelope, rpcError } from './refusals.js';

/**
 * The Streamable HTTP rules the SDK does not check, or answers in a shape other than the
 * service's: Host/Origin (403, DNS rebinding), the method (405) before authentication; the
 * Content-Type (415) and Accept (406) after it.
 */
export function transportRefusal(c: Context<HttpEnv>, hosts: HostPolicy): Response | undefined {
  const localPort = (c.env as Partial<HttpBindings> | undefined)?.incoming?.socket.localPort;
  const refusal = hosts.refusal(c.req.header('host'), c.req.header('origin'), localPort);
  if (refusal) return envelope(c, new DomainError('forbidden', refusal));

  // A GET with a 2025-era session id opens the session's stream (subscriptions/session-stream.ts).
  if (c.req.method === 'GET' && c.req.header(SESSION_HEADER) !== undefined) return undefined;
  if (c.req.method !== 'POST') return methodNotAllowed(c);
  return undefined;
}

function mediaTypes(header: string | undefined): string[] {
  return (header ?? '').split(',').map((part) => part.split(';')[0]!.trim().toLowerCase());
}

/**
 * No standalone GET stream without a 2025-era session; a session id holds no server state
 * (what it subscribed to is the database's), so there is nothing to DELETE (MCP Streamable
 * HTTP allows 405 for both).
 */
export function methodNotAllowed(c: Context<HttpEnv>): Response {
  return envelope(
    c,
    new DomainError(
      'method_not_allowed',
      'POST /mcp, and GET /mcp with the Mcp-Session-Id of a 2025-era session (its resources/subscribe notifications): 2026-07-28 clients listen with subscriptions/listen, and a 2025-era session needs no DELETE: its Mcp-Session-Id holds no server state, so dropping it ends it.',
    ),
    { Allow: 'GET, POST' },
  );
}

/** A session's GET stream is an event stream: a client that does not accept one is 406. */
export function streamRefusal(c: Context<HttpEnv>): Response | undefined {
  if (mediaTypes(c.req.header('accept')).includes('text/event-stream')) return undefined;
  return rpcError(406, 'Not Acceptable: Accept must include text/event-stream');
}

/** The SDK checks neither the Content-Type nor (on the modern path) the Accept header. */
export function mediaRefusal(c: Context<HttpEnv>): Response | undefined {
  if (!mediaTypes(c.req.header('content-type')).includes('application/json')) {
    return rpcError(415, 'Unsupported Media Type: Content-Type must be application/json');
  }
  const accepted = mediaTypes(c.req.header('accept'));
  if (!accepted.includes('application/json') || !accepted.includes('text/event-stream')) {
    return rpcError(406, 'Not Acceptable: Accept must include both application/json and text/event-stream');
  }
  return undefined;
}

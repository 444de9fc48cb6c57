import type { HttpBindings } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { RESPONSE_ALREADY_SENT } from '@hono/node-server/utils/response';
import type { Context } from 'hono';
import type { OperationContext, Surface } from '../domain/context.js';
import { MAX_BODY_BYTES, readLimitedBody, readLimitedNodeBody } from './body.js';

/** What every surface's handlers find on the Hono context (set by src/http/observe.ts). */
export interface HttpEnv {
  Variables: {
    requestId: string;
    /** Who the request authenticated as (null: no credential), for the request line's actor fields. */
    credential: OperationContext['credential'] | undefined;
    /** The error code of a failed request's envelope, for the request line. */
    errorCode: string | undefined;
    /** Where the request came from, for the per-address limits (TRUST_PROXY_HOPS); resolved on first call. */
    clientAddress: () => string | undefined;
    /** Builds the domain context for this request once the credential is known. */
    context: (credential: OperationContext['credential'], surface: Surface) => OperationContext;
  };
}

export function bearerToken(header: string | undefined): string | null {
  if (header === undefined) return null;
  const match = /^Bearer[ ]+([^\s]+)\s*$/i.exec(header);
  // A malformed Authorization header is a credential that cannot be valid, not an absent one.
  return match ? match[1]! : '';
}

/**
 * The address a request came from, as the rate limits count it: the socket's peer, or, with
 * `trustedProxyHops` reverse proxies in front (TRUST_PROXY_HOPS), the address the outermost
 * of them saw. Each proxy appends the address it saw to X-Forwarded-For, so that one is
 * `hops` entries from the right; anything further left was written by the client and is
 * not believed. Without trusted proxies the header is ignored, so rotating it evades nothing.
 */
export function peerAddress(c: Context, trustedProxyHops: number): string | undefined {
  let socket: string | undefined;
  try {
    socket = getConnInfo(c).remote.address;
  } catch {
    socket = undefined;
  }
  if (trustedProxyHops === 0) return socket;
  const forwarded = (c.req.header('x-forwarded-for') ?? '')
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean);
  return forwarded.length >= trustedProxyHops ? forwarded[forwarded.length - trustedProxyHops] : socket;
}

/** The Node request and response under this request, when it runs on @hono/node-server; undefined elsewhere. */
function nodeBindings(c: Context): Partial<HttpBindings> | undefined {
  return c.env as Partial<HttpBindings> | undefined;
}

/** The request's client address, resolved once per request (see `peerAddress`). */
export function clientAddress(c: Context): string | undefined {
  return (c as Context<HttpEnv>).get('clientAddress')?.();
}

/**
 * A `Response` a handler builds itself (the MCP SDK's answer, a cached tools/list) skips the
 * headers set on the Hono context, the request id among them: this adds it. On Node the
 * middleware has put the id on the ServerResponse (src/http/observe.ts), which every answer
 * is written through, so the answer is left as it is: reading the headers of
 * @hono/node-server's lightweight responses would make it build them in full.
 */
export function withRequestId(c: Context<HttpEnv>, response: Response): Response {
  if (nodeBindings(c)?.outgoing) return response;
  if (!response.headers.has('x-request-id')) response.headers.set('X-Request-Id', c.get('requestId'));
  return response;
}

/**
 * A 200 answer whose body is already bytes in parts (a cached tools/list: a large cached
 * buffer between two small ones). On Node the parts are written to the ServerResponse as they
 * are — one system call, no copy of the large part — and @hono/node-server is told the answer
 * is sent; elsewhere they are joined into one `Response`.
 */
export function answerInParts(c: Context, headers: Record<string, string>, parts: Buffer[]): Response {
  const outgoing = nodeBindings(c)?.outgoing;
  if (!outgoing) return new Response(Buffer.concat(parts), { status: 200, headers });
  let length = 0;
  for (const part of parts) length += part.length;
  outgoing.writeHead(200, { ...headers, 'content-length': String(length) });
  // Corked: the head and the parts leave together when `end` uncorks.
  outgoing.cork();
  for (const part of parts.slice(0, -1)) outgoing.write(part);
  outgoing.end(parts.at(-1));
  return RESPONSE_ALREADY_SENT;
}

/** Calls `listener` once if the client goes away before this request's answer is written; the returned function stops that. */
export type ClientGone = (listener: () => void) => () => void;

/**
 * The client went away before the answer was written: on Node, the `ServerResponse` closed
 * unfinished (what @hono/node-server's request signal aborts on, without the AbortController
 * and EventTarget it builds for that signal: ~0.8 % of an MCP round trip, docs/contributors/performance-history.md
 * "Three costs every MCP request paid"); elsewhere the request's own signal.
 */
export function whenClientGone(c: Context): ClientGone {
  const outgoing = nodeBindings(c)?.outgoing;
  if (outgoing) {
    return (listener) => {
      const closed = () => {
        if (!outgoing.writableFinished) listener();
      };
      if (outgoing.closed) closed();
      else outgoing.once('close', closed);
      return () => outgoing.off('close', closed);
    };
  }
  const signal = c.req.raw.signal;
  return (listener) => {
    if (signal.aborted) listener();
    else signal.addEventListener('abort', listener, { once: true });
    return () => signal.removeEventListener('abort', listener);
  };
}

/**
 * Calls `listener` once the answer has let go of its connection: on Node, when the
 * ServerResponse closes (its last byte taken by the kernel, or the connection closed, at the
 * write deadline for a client that stopped reading); elsewhere when `streamOver` is called.
 * What an answer holds (a stream's place among its limits) is freed here, not when its last
 * byte is queued. Returns what the stream calls when it is over.
 */
export function onAnswerClosed(c: Context, listener: () => void): () => void {
  const outgoing = nodeBindings(c)?.outgoing;
  if (!outgoing) return listener;
  if (outgoing.closed) listener();
  else outgoing.once('close', listener);
  return () => {};
}

/** The body bytes (16 KiB at most, unless the route says otherwise), from the Node request when the app runs on @hono/node-server. */
export function requestBody(c: Context, limit = MAX_BODY_BYTES): Promise<Uint8Array> {
  const incoming = nodeBindings(c)?.incoming;
  return incoming ? readLimitedNodeBody(incoming, limit) : readLimitedBody(c.req.raw, limit);
}

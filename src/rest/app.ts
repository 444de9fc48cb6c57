import type { HttpBindings } from '@hono/node-server';
import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import type { Context as HonoContext } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Context } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { invoke } from '../domain/invoke.js';
import { parseJsonObject, readLimitedBody, readLimitedNodeBody } from './body.js';
import type { Route } from './routes.js';

export interface RestEnv {
  Variables: {
    requestId: string;
    principalKind: string | undefined;
    /** Where the request came from, for the per-address limits (TRUST_PROXY_HOPS). */
    clientAddress: string | undefined;
    /** Builds the domain context for this request once the credential is known. */
    context: (credential: Context['credential']) => Context;
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
export function peerAddress(c: HonoContext, trustedProxyHops: number): string | undefined {
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

/** The request's client address, resolved once per request by the app (see `peerAddress`). */
export function clientAddress(c: HonoContext): string | undefined {
  return (c as HonoContext<RestEnv>).get('clientAddress');
}

/** The body bytes, from the Node request when the app runs on @hono/node-server. */
export function requestBody(c: HonoContext): Promise<Uint8Array> {
  const incoming = (c.env as Partial<HttpBindings> | undefined)?.incoming;
  return incoming ? readLimitedNodeBody(incoming) : readLimitedBody(c.req.raw);
}

function honoPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

function firstQueryValues(c: HonoContext): Record<string, string> {
  const values: Record<string, string> = {};
  for (const [key, list] of Object.entries(c.req.queries())) if (list[0] !== undefined) values[key] = list[0];
  return values;
}

/** Mounts every route of the table: authenticate, assemble input, invoke, answer. */
export function mountRoutes(app: Hono<RestEnv>, routes: Route[], authenticator: Authenticator): void {
  for (const route of routes) {
    const handler = async (c: HonoContext<RestEnv>) => {
      // A public operation (health, board enrollment) ignores any Authorization header: a
      // stale token in a client's default headers must not turn it into a 401.
      const credential = route.operation.credentials.includes('public')
        ? null
        : await authenticator.authenticate(bearerToken(c.req.header('authorization')), clientAddress(c));
      c.set('principalKind', credential?.kind);
      // service-api.md "Authentication": an OAuth access token serves the shared (owner and
      // agent) endpoints and MCP; the agent-only REST endpoints want an agent token.
      if (credential?.kind === 'agent' && credential.oauth && !route.operation.credentials.includes('owner')) {
        throw new DomainError('forbidden', 'OAuth access tokens are accepted on shared endpoints and MCP, not on agent-only endpoints.');
      }
      const body = route.method === 'POST' ? parseJsonObject(await requestBody(c)) : {};
      const fromHeaders: Record<string, string | undefined> = {};
      for (const [header, field] of Object.entries(route.headers ?? {})) fromHeaders[field] = c.req.header(header);
      // Path parameters win over body fields of the same name: the URL names the resource.
      const input = { ...firstQueryValues(c), ...body, ...fromHeaders, ...c.req.param() };
      const data = await invoke(route.operation, c.get('context')(credential), input);
      return c.json(route.unwrapped ? data : { data }, route.status ?? 200);
    };
    if (route.method === 'GET') app.get(honoPath(route.path), handler);
    else app.post(honoPath(route.path), handler);
  }
}

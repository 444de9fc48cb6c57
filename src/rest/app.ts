import { getConnInfo } from '@hono/node-server/conninfo';
import { Hono } from 'hono';
import type { Context as HonoContext } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Context } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { invoke } from '../domain/invoke.js';
import { parseJsonObject, readLimitedBody } from './body.js';
import type { Route } from './routes.js';

export interface RestEnv {
  Variables: {
    requestId: string;
    principalKind: string | undefined;
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

/** The peer address of the connection (a proxy in front would need X-Forwarded-For handling). */
export function clientAddress(c: HonoContext): string | undefined {
  try {
    return getConnInfo(c).remote.address;
  } catch {
    return undefined;
  }
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
      const body = route.method === 'POST' ? parseJsonObject(await readLimitedBody(c.req.raw)) : {};
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

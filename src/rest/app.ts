import type { Context, Hono } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import { assertOAuthSurface, call } from '../domain/invoke.js';
import { parseJsonObject } from '../http/body.js';
import { bearerToken, clientAddress, onAnswerClosed, requestBody, type HttpEnv } from '../http/request.js';
import type { Route } from './routes.js';
import { documentStream, EVENT_STREAM, eventStream, NDJSON } from '../http/document-stream.js';

function honoPath(path: string): string {
  return path.replace(/\{(\w+)\}/g, ':$1');
}

function firstQueryValues(c: Context): Record<string, string> {
  const values: Record<string, string> = {};
  // Most requests have no query string: nothing to parse then.
  if (!c.req.url.includes('?')) return values;
  for (const [key, list] of Object.entries(c.req.queries())) if (list[0] !== undefined) values[key] = list[0];
  return values;
}

/**
 * RFC 8288: the next page is the same request with the cursor the list answered. A relative
 * reference (path and query), resolved against the request's own URL, so it stays right
 * behind a proxy that rewrites the host.
 */
function nextLink(requestUrl: string, cursor: string): string {
  const url = new URL(requestUrl);
  url.searchParams.set('cursor', cursor);
  return `<${url.pathname}${url.search}>; rel="next"`;
}

/** Mounts every route of the table: authenticate, assemble input, invoke, answer. */
export function mountRoutes(app: Hono<HttpEnv>, routes: Route[], authenticator: Authenticator): void {
  for (const route of routes) {
    const headerFields = Object.entries(route.headers ?? {});
    const handler = async (c: Context<HttpEnv>) => {
      // A public operation (health, board enrollment) ignores any Authorization header: a
      // stale token in a client's default headers must not turn it into a 401.
      const credential = route.operation.credentials.includes('public')
        ? null
        : await authenticator.authenticate(bearerToken(c.req.header('authorization')), clientAddress(c));
      c.set('credential', credential);
      const ctx = c.get('context')(credential, 'rest');
      // An OAuth token on an endpoint that takes none (an owner's) is refused before the body is read; the
      // credential kind is judged by invoke, after the body (413 and 400 come first there).
      assertOAuthSurface(route.operation, ctx);
      const body = route.method === 'POST' ? parseJsonObject(await requestBody(c, route.maxBodyBytes)) : {};
      const fromHeaders: Record<string, string | undefined> = {};
      for (const [header, field] of headerFields) {
        const value = c.req.header(header);
        if (value !== undefined) fromHeaders[field] = value;
      }
      // Path parameters win over body fields of the same name: the URL names the resource.
      const query = firstQueryValues(c);
      const fromQuery: Record<string, string> = {};
      for (const field of route.query ?? []) if (query[field] !== undefined) fromQuery[field] = query[field];
      const input = { ...query, ...body, ...fromQuery, ...fromHeaders, ...c.req.param() };
      // A live feed ends when the client goes away, or the service shuts down (src/domain/owner-event-stream.ts).
      const feed = route.operation.live ? new AbortController() : undefined;
      if (feed) c.req.raw.signal.addEventListener('abort', () => feed.abort(), { once: true });
      // A held poll stops waiting once its client is gone, so nothing is handed to nobody. Only
      // a request that may hold watches its client: a plain `next` (the hot path) does not.
      const holds = route.operation.holds !== undefined && (input as Record<string, unknown>)[route.operation.holds] !== undefined;
      const answer = await call(route.operation, ctx, input, undefined, feed?.signal ?? (holds ? c.req.raw.signal : undefined));
      if (answer.kind === 'page') {
        if (answer.nextCursor !== null) c.header('Link', nextLink(c.req.url, answer.nextCursor));
        return c.json({ data: answer.data });
      }
      if (answer.kind === 'stream') {
        const format = c.req.header('accept')?.includes(NDJSON) ? 'ndjson' : 'json';
        return c.body(documentStream(answer, format, ctx.log, ctx.requestId), 200, {
          'Content-Type': format === 'ndjson' ? NDJSON : 'application/json',
        });
      }
      if (answer.kind === 'live') {
        return c.body(
          // The feed's place is given back once the answer has let go of its connection.
          eventStream(
            answer,
            onAnswerClosed(c, () => feed?.abort()),
            ctx.log,
            ctx.requestId,
          ),
          200,
          {
            'Content-Type': `${EVENT_STREAM}; charset=utf-8`,
            'Cache-Control': 'no-store',
            // Proxies that buffer responses (nginx) would hold the events back.
            'X-Accel-Buffering': 'no',
          },
        );
      }
      // The probes' bare documents end with a newline, as text a person reads with curl does.
      if (route.unwrapped) return c.body(`${JSON.stringify(answer.data)}\n`, route.status ?? 200, { 'Content-Type': 'application/json' });
      return c.json({ data: answer.data }, route.status ?? 200);
    };
    if (route.method === 'GET') app.get(honoPath(route.path), handler);
    else app.post(honoPath(route.path), handler);
  }
}

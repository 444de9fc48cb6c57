import type { Hono } from 'hono';
import { requestId } from 'hono/request-id';
import type { Context, Logger, Surface } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { toHttpError } from './errors.js';
import { peerAddress, type HttpEnv } from './request.js';

export interface ObserveDeps {
  /** Reverse proxies in front whose X-Forwarded-For entries are believed (TRUST_PROXY_HOPS). */
  trustProxyHops: number;
  log: Logger;
  /** Told every answered request: the metrics histogram. */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** The domain context of a request, from its credential and request id. */
  context(credential: Context['credential'], surface: Surface, requestId: string): Context;
}

/**
 * What every request on every surface gets, installed once on the app: a request id (taken
 * from a well-formed `X-Request-Id` or made, and echoed on every answer, raw `Response`s
 * included), the client address, the domain context factory, one JSON log line and the
 * metrics; plus the error envelope for unknown routes and for anything a handler throws.
 */
export function observe(app: Hono<HttpEnv>, deps: ObserveDeps): void {
  const { trustProxyHops, log } = deps;
  app.use('*', requestId());
  app.use('*', async (c, next) => {
    const started = performance.now();
    const id = c.get('requestId');
    c.set('clientAddress', peerAddress(c, trustProxyHops));
    c.set('context', (credential, surface) => deps.context(credential, surface, id));
    await next();
    // A handler that returns a Response of its own (the MCP SDK's, a cached tools/list)
    // skips the headers set on the context: add the request id to it here.
    if (!c.res.headers.has('x-request-id')) {
      try {
        c.res.headers.set('X-Request-Id', id);
      } catch {
        // Immutable headers (a Response from fetch): copy it into one whose headers can change.
        c.res = new Response(c.res.body, c.res);
        c.res.headers.set('X-Request-Id', id);
      }
    }
    const seconds = (performance.now() - started) / 1000;
    deps.observeRequest(c.req.method, c.req.routePath, c.res.status, seconds);
    log.info({
      msg: 'request',
      requestId: id,
      method: c.req.method,
      route: c.req.routePath,
      status: c.res.status,
      durationMs: Math.round(seconds * 100_000) / 100,
      principalKind: c.get('principalKind') ?? null,
    });
  });

  app.notFound((c) => {
    const { status, body } = toHttpError(new DomainError('not_found', `No route for ${c.req.method} ${c.req.path}.`), c.get('requestId'));
    return c.json(body, status);
  });
  app.onError((error, c) => {
    const mapped = toHttpError(error, c.get('requestId'));
    if (mapped.internal) {
      log.error({ msg: 'internal error', requestId: c.get('requestId'), route: c.req.routePath, error: error.stack ?? String(error) });
    }
    return c.json(mapped.body, mapped.status, mapped.headers);
  });
}

import { randomUUID } from 'node:crypto';
import type { Hono } from 'hono';
import type { Context, Logger, Surface } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { toHttpError } from './errors.js';
import { peerAddress, type HttpEnv } from './request.js';

/**
 * The request id of a request: the caller's own `X-Request-Id` when it is a plausible one
 * (at most 255 of `A-Z a-z 0-9 _ - =`, so it cannot inject anything into a header or a log
 * line), otherwise a new UUID.
 */
export function requestIdFrom(header: string | undefined): string {
  return header !== undefined && header.length > 0 && header.length <= 255 && /^[\w\-=]+$/.test(header) ? header : randomUUID();
}

/** The one JSON log line of an answered request, on every surface. */
export function requestLine(fields: { requestId: string; method: string; route: string; status: number; seconds: number; principalKind: string | null }) {
  const { seconds, ...rest } = fields;
  return { msg: 'request', ...rest, durationMs: Math.round(seconds * 100_000) / 100 };
}

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
 * What every request on every surface gets, installed once on the app: a request id
 * (`requestIdFrom`, echoed on every answer made through the context; a handler that builds
 * its own `Response` stamps it with `withRequestId`), the client address, the domain context factory, one JSON log line and the
 * metrics; plus the error envelope for unknown routes and for anything a handler throws.
 */
export function observe(app: Hono<HttpEnv>, deps: ObserveDeps): void {
  const { trustProxyHops, log } = deps;
  app.use('*', async (c, next) => {
    const started = performance.now();
    const id = requestIdFrom(c.req.header('x-request-id'));
    c.set('requestId', id);
    c.header('X-Request-Id', id);
    c.set('clientAddress', peerAddress(c, trustProxyHops));
    c.set('context', (credential, surface) => deps.context(credential, surface, id));
    await next();
    const seconds = (performance.now() - started) / 1000;
    deps.observeRequest(c.req.method, c.req.routePath, c.res.status, seconds);
    log.info(
      requestLine({
        requestId: id,
        method: c.req.method,
        route: c.req.routePath,
        status: c.res.status,
        seconds,
        principalKind: c.get('principalKind') ?? null,
      }),
    );
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

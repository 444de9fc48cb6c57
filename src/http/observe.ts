import { createHash, randomUUID } from 'node:crypto';
import type { HttpBindings } from '@hono/node-server';
import type { Context, Hono } from 'hono';
import type { OperationContext, Logger, Surface } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { bearerChallenge, toHttpError } from './errors.js';
import { peerAddress, requestBody, type HttpEnv } from './request.js';

/**
 * The request id of a request: the caller's own `X-Request-Id` when it is a plausible one
 * (at most 255 of `A-Z a-z 0-9 _ - =`, so it cannot inject anything into a header or a log
 * line), otherwise a new UUID.
 */
export function requestIdFrom(header: string | undefined): string {
  return header !== undefined && header.length > 0 && header.length <= 255 && /^[\w\-=]+$/.test(header) ? header : randomUUID();
}

/**
 * Who acted, as the request line names them (docs/operators/logs-and-metrics.md "Logs"): the credential kind and an id an
 * operator can look up — the agent or setup connection id (and the agent's principal, which
 * grants name), the device id — plus the workspace. Never a token. An owner's `sub` comes
 * from the identity provider and may be an e-mail address, so it is logged as a pseudonym:
 * the first 16 hex characters of its SHA-256, which an operator can compute from a known
 * subject (`printf %s "$SUB" | sha256sum | cut -c1-16`) to find that owner's lines.
 */
export function actorFields(credential: OperationContext['credential'] | undefined): Record<string, string | null> {
  if (!credential) return { principalKind: null };
  switch (credential.kind) {
    case 'owner':
      return { principalKind: 'owner', principalId: ownerPseudonym(credential.subject), workspaceId: credential.workspaceId };
    case 'agent':
      return {
        principalKind: 'agent',
        principalId: credential.connectionId,
        principal: credential.principal,
        ...(credential.oauth ? { oauthClientId: credential.oauth.clientId } : {}),
        workspaceId: credential.workspaceId,
      };
    case 'setup':
      return { principalKind: 'setup', principalId: credential.connectionId, workspaceId: credential.workspaceId };
    case 'device':
      return { principalKind: 'device', principalId: credential.deviceId, workspaceId: credential.workspaceId };
  }
}

export const ownerPseudonym = (subject: string) => createHash('sha256').update(subject).digest('hex').slice(0, 16);

/**
 * The one JSON log line of an answered request, on every surface: method, route pattern,
 * status, duration, the actor (`actorFields`) and, when the request failed, its error code.
 */
export function requestLine(fields: {
  requestId: string;
  method: string;
  route: string;
  status: number;
  seconds: number;
  actor: Record<string, string | null>;
  errorCode?: string | undefined;
}) {
  const { seconds, actor, errorCode, ...rest } = fields;
  return { msg: 'request', ...rest, durationMs: Math.round(seconds * 100_000) / 100, ...actor, ...(errorCode ? { errorCode } : {}) };
}

const isOAuth = (path: string) => path.startsWith('/oauth/');

/**
 * Whether this request's body is over to this layer to hold to 16 KiB (docs/reference/rules.md "Errors and
 * limits": any method, any path). A POST's body is read, with the limit, by the handler that
 * serves it — the REST routes after a bad token has been refused, the MCP gate after its
 * protocol checks — or by `notFound` when none does. Nothing reads a body sent with another
 * method, so it is read (and dropped) here before any handler runs: a GET with 20 KiB is 413.
 * `/oauth/*` is left to the authorization server (src/oauth/body-limit.tsx), which holds every
 * method and path there to the limit, in its own formats (RFC 6749 JSON, HTML pages). A request with neither Content-Length nor Transfer-Encoding has no body (RFC 9112
 * §6.3), so the usual GET costs two header lookups.
 */
function unreadBody(method: string, path: string, contentLength: string | undefined, transferEncoding: string | undefined): boolean {
  if (method === 'POST' || isOAuth(path)) return false;
  return transferEncoding !== undefined || (contentLength !== undefined && contentLength !== '0');
}

export interface ObserveDeps {
  /** Reverse proxies in front whose X-Forwarded-For entries are believed (TRUST_PROXY_HOPS). */
  trustProxyHops: number;
  log: Logger;
  /** Told every answered request: the metrics histogram. */
  observeRequest(method: string, route: string, status: number, seconds: number): void;
  /** The domain context of a request, from its credential and request id. */
  context(credential: OperationContext['credential'], surface: Surface, requestId: string): OperationContext;
  /** The protected-resource metadata (RFC 9728) a 401 or an `insufficient_scope` 403 points at. */
  resourceMetadataUrl(c: Context): string;
}

/**
 * What every request on every surface gets, installed once on the app: a request id
 * (`requestIdFrom`, echoed on every answer: on Node it is set on the ServerResponse; elsewhere
 * a handler that builds its own `Response` stamps it with `withRequestId`), the client address, the domain context factory, one JSON log line and the
 * metrics; plus the error envelope for unknown routes and for anything a handler throws.
 */
export function observe(app: Hono<HttpEnv>, deps: ObserveDeps): void {
  const { trustProxyHops, log } = deps;
  app.use('*', async (c, next) => {
    const started = performance.now();
    const id = requestIdFrom(c.req.header('x-request-id'));
    c.set('requestId', id);
    // On Node the id goes on the ServerResponse itself: Node merges it into whatever headers
    // the answer is written with, so every answer carries it — a handler's own `Response` too —
    // and a JSON answer keeps @hono/node-server's plain-object header path instead of building
    // a Fetch `Headers` for one header (found in a profile of /healthz).
    const outgoing = (c.env as Partial<HttpBindings> | undefined)?.outgoing;
    if (outgoing) outgoing.setHeader('X-Request-Id', id);
    else c.header('X-Request-Id', id);
    // Resolved when a limit first asks for it (most requests never do), once.
    let address: { value: string | undefined } | undefined;
    c.set('clientAddress', () => (address ??= { value: peerAddress(c, trustProxyHops) }).value);
    c.set('context', (credential, surface) => deps.context(credential, surface, id));
    if (unreadBody(c.req.method, c.req.path, c.req.header('content-length'), c.req.header('transfer-encoding'))) await requestBody(c);
    await next();
    const seconds = (performance.now() - started) / 1000;
    const status = c.res.status;
    deps.observeRequest(c.req.method, c.req.routePath, status, seconds);
    // The line's fields are gathered only when it will be written (LOG_LEVEL at info or below).
    if (log.enabled?.('info') === false) return;
    log.info(
      requestLine({
        requestId: id,
        method: c.req.method,
        route: c.req.routePath,
        status,
        seconds,
        actor: actorFields(c.get('credential')),
        errorCode: status >= 400 ? c.get('errorCode') : undefined,
      }),
    );
  });

  app.notFound(async (c) => {
    // No handler reads this request's body, so the limit is applied here (`unreadBody`); under
    // /oauth/* the authorization server's middleware has applied it already (body-limit.tsx).
    if (!isOAuth(c.req.path)) await requestBody(c);
    const { status, body } = toHttpError(new DomainError('not_found', `No route for ${c.req.method} ${c.req.path}.`), c.get('requestId'));
    c.set('errorCode', body.error.code);
    return c.json(body, status);
  });
  app.onError((error, c) => {
    const mapped = toHttpError(error, c.get('requestId'));
    c.set('errorCode', mapped.body.error.code);
    if (mapped.internal) {
      log.error({ msg: 'internal error', requestId: c.get('requestId'), route: c.req.routePath, error: error.stack ?? String(error) });
    }
    // docs/operators/logs-and-metrics.md "Logs": a dependency out of reach degrades the service (warn), it is not a bug.
    if (mapped.dependencyFailure)
      log.warn({ msg: 'dependency unavailable', requestId: c.get('requestId'), route: c.req.routePath, error: mapped.dependencyFailure });
    const challenge = bearerChallenge(error, deps.resourceMetadataUrl(c), c.req.header('authorization') !== undefined);
    return c.json(mapped.body, mapped.status, challenge ? { ...mapped.headers, 'WWW-Authenticate': challenge } : mapped.headers);
  });
}

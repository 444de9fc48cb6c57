import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { DomainError, fromStoreError, oneLine, type ErrorCode, type ErrorDetails, type ErrorIssue } from '../domain/errors.js';

/** The one table from domain error to HTTP status (docs/reference/rules.md "Errors and limits"). */
export const httpStatus: Record<ErrorCode, ContentfulStatusCode> = {
  invalid_request: 400,
  validation_failed: 400,
  unauthorized: 401,
  forbidden: 403,
  insufficient_access: 403,
  grant_required: 403,
  arguments_not_allowed: 403,
  outside_schedule: 403,
  grant_budget_exhausted: 429,
  device_limit_reached: 403,
  not_found: 404,
  method_not_allowed: 405,
  conflict: 409,
  idempotency_key_reused: 409,
  confirmation_required: 403,
  confirmation_declined: 403,
  confirmation_invalid: 400,
  payload_too_large: 413,
  rate_limited: 429,
  capacity_exceeded: 429,
  quota_exceeded: 429,
  internal: 500,
  device_controls_disabled: 503,
  not_configured: 503,
  unavailable: 503,
};

/**
 * When each code is answered, in the words docs/reference/errors.md shows (generated from this
 * table by `npm run docs:generate`).
 */
export const errorMeanings: Record<ErrorCode, string> = {
  invalid_request: 'The body is not a UTF-8 JSON object (malformed JSON, an array, …).',
  validation_failed: 'The input breaks a schema or rule; `issues` say where.',
  unauthorized:
    'No credential, or one that is unknown, expired, revoked or forged. Carries `WWW-Authenticate: Bearer resource_metadata="…"` (on REST the metadata at `/.well-known/oauth-protected-resource`; `error="invalid_token"` when a token was sent).',
  forbidden: 'A valid credential of the wrong kind (an agent token on an owner endpoint), or a device acting for another device.',
  insufficient_access:
    'The agent\'s ceiling is `read` and the call needs `act`. Carries `WWW-Authenticate: Bearer error="insufficient_scope", scope="act", resource_metadata="…"`.',
  grant_required:
    "An agent asked for a function it may not call now: no live grant for this principal, device and function, or a device it cannot call (an unknown id and another workspace's device alike, a function the device does not publish, a revoked or detached device or gateway). The same code on REST (an action request, a broadcast's per-device result) and on MCP (a device tool call).",
  arguments_not_allowed:
    'An argument is outside the bounds the grant\'s conditions allow (docs/owners/grants.md "Conditions"): `issues` at `arguments.<name>`, `details.allowed` the grant\'s bounds for each refused argument. Nothing was queued. The same code on REST and as an MCP tool error.',
  outside_schedule:
    "The grant's schedule does not allow an action now: `details.nextWindowAt` (Unix ms) says when its next window opens, `details.timeZone` the zone it is read in. Nothing was queued. Also the `cancelReason` of a waiting or queued action the schedule no longer allowed when it would have been approved or handed out.",
  grant_budget_exhausted:
    "The grant's budget is used up: `details` gives `max`, `perSeconds`, `used` and `retryAt` (Unix ms), when one more action is allowed; `Retry-After` in seconds. A refused request does not count.",
  device_limit_reached: 'The setup token already attached `deviceLimit` devices.',
  not_found: "Unknown route, or a resource that does not exist in the caller's workspace.",
  method_not_allowed:
    "A method the path does not serve (`DELETE /mcp`, or `GET /mcp` without a 2025-era session id: the MCP endpoint answers POST, and GET only for a session's resource updates).",
  conflict: 'The state forbids it (e.g. cancelling an action that is no longer queued).',
  idempotency_key_reused: 'The same `idempotencyKey` with a different body.',
  confirmation_required:
    "MCP: the function's grant asks the agent's user to confirm each call, and this client cannot ask (a 2025-era client that declared no elicitation capability; a 2026-07-28 request gets -32021 instead), or the question would be too long to show whole, or the call is a `broadcast`, which never asks (that device's result; call its device tool). The owner can change the grant's `approval`.",
  confirmation_declined: "MCP: the agent's user declined or cancelled the confirmation; nothing was queued.",
  confirmation_invalid:
    "MCP: the confirmation's `requestState` is not one this service made for this principal, tool and arguments, or it expired; nothing was queued.",
  payload_too_large:
    "The body exceeds 16 KiB (a device manifest: 64 KiB), counted on the bytes received (chunked bodies too), on any method and path, a WebSocket upgrade too (`/oauth/*` answers in its own format). Also an action whose arguments alone are larger than the workspace's whole `action_bytes` budget: `details` names the budget as for `quota_exceeded`, with no `Retry-After`, since waiting cannot make room.",
  rate_limited: 'Too many requests; `Retry-After` says when to retry.',
  capacity_exceeded:
    "A workspace capacity limit, or a principal's share of a device's queue (`DEVICE_QUEUE_PER_PRINCIPAL`); `Retry-After` set, the message names the limit.",
  quota_exceeded:
    'A workspace storage budget is used up; `details` names it (`budget`, `limit`, `used`, `retryAfter`): [docs/operators/budgets.md](../operators/budgets.md).',
  internal: 'A bug or an infrastructure fault; quote the request id.',
  device_controls_disabled: '`DEVICE_CONTROLS_ENABLED=false`: no new actions.',
  not_configured: 'A required integration is not configured.',
  unavailable:
    "A dependency is down, not the caller's fault. `Retry-After: 5`. **The database**: a libSQL server refuses connections, gives no answer within 8 s, or drops the stream; a write finds the database locked for longer than it waits (another process holding the embedded file's write lock past 1 s, docs/operators/database.md; a write lock sqld did not free within 5 s); the disk is full or failing (`SQLITE_FULL`, `SQLITE_IOERR`, `SQLITE_CANTOPEN`: retrying later succeeds once an operator frees the disk). The same on every surface: MCP answers it as HTTP 503 with this envelope when the credential cannot be checked, as a tool result with `isError` once the call runs; a wake-socket upgrade is refused with it. The driver's own message goes to a `warn` log line (`msg: \"dependency unavailable\"`), never to the caller; the service serves again by itself once the database answers. **The identity provider**: an owner session cannot be verified because the key set (`OWNER_JWKS_URL`) cannot be fetched; it takes nothing from the failed-authentication budget. `GET /readyz` answers it too, naming the dependency (docs/operators/probes.md).",
};

export interface ErrorEnvelope {
  error: {
    code: ErrorCode;
    message: string;
    issues?: ErrorIssue[];
    /** For `quota_exceeded` (docs/operators/budgets.md); `retryAfter` repeats Retry-After for MCP clients, which see no headers. */
    details?: { budget: string; limit: number; used: number; retryAfter?: number } | NonNullable<ErrorDetails['conditions']>;
    requestId: string;
  };
}

export interface HttpError {
  status: ContentfulStatusCode;
  body: ErrorEnvelope;
  headers: Record<string, string>;
  /** When a dependency (the database) failed: why, in one line, for the log only (a warn line). */
  dependencyFailure?: string;
}

/**
 * Turns anything thrown into the error envelope. A DomainError is the caller's to see; any
 * other error is a bug whose message may carry SQL or parameters, so the caller gets a
 * generic message and the request id, and `internal` is true so the stack is logged.
 */
export function toHttpError(thrown: unknown, requestId: string): HttpError & { internal: boolean } {
  const error = fromStoreError(thrown);
  if (!(error instanceof DomainError)) {
    return {
      status: 500,
      body: { error: { code: 'internal', message: 'Internal error. Quote the request id when reporting it.', requestId } },
      headers: {},
      internal: true,
    };
  }
  const headers: Record<string, string> = {};
  if (error.code === 'unauthorized') headers['WWW-Authenticate'] = 'Bearer';
  if (error.details.retryAfterSeconds !== undefined) headers['Retry-After'] = String(error.details.retryAfterSeconds);
  if (error.details.rateLimit) {
    // RateLimit header fields (draft-ietf-httpapi-ratelimit-headers): bucket size, what is
    // left, and seconds until a request is allowed again.
    headers['RateLimit-Limit'] = String(error.details.rateLimit.limit);
    headers['RateLimit-Remaining'] = String(error.details.rateLimit.remaining);
    headers['RateLimit-Reset'] = String(error.details.retryAfterSeconds ?? 1);
  }
  return {
    status: httpStatus[error.code],
    body: {
      error: {
        code: error.code,
        message: error.message,
        ...(error.details.issues ? { issues: error.details.issues } : {}),
        ...(error.details.action ? { action: error.details.action } : {}),
        ...(error.details.budget
          ? {
              details: {
                budget: error.details.budget.name,
                limit: error.details.budget.limit,
                used: error.details.budget.used,
                ...(error.details.retryAfterSeconds !== undefined ? { retryAfter: error.details.retryAfterSeconds } : {}),
              },
            }
          : {}),
        ...(error.details.conditions ? { details: error.details.conditions } : {}),
        requestId,
      },
    },
    headers,
    internal: false,
    ...(error !== thrown ? { dependencyFailure: oneLine(thrown) } : {}),
  };
}

/**
 * The bearer challenge of a REST refusal (docs/reference/rules.md "OAuth"), the same as MCP's: a 401
 * points at the protected-resource metadata (RFC 9728), with `error="invalid_token"` when a
 * token was sent (RFC 6750 §3.1); a 403 for a ceiling below the function names the scope that
 * would allow it, so an OAuth client can step up. Other answers carry no challenge.
 */
export function bearerChallenge(error: unknown, resourceMetadata: string, tokenSent: boolean): string | undefined {
  if (!(error instanceof DomainError)) return undefined;
  if (error.code === 'unauthorized') return `Bearer ${tokenSent ? 'error="invalid_token", ' : ''}resource_metadata="${resourceMetadata}"`;
  if (error.code === 'insufficient_access') {
    return `Bearer error="insufficient_scope", scope="${error.details.requiredAccess ?? 'act'}", resource_metadata="${resourceMetadata}"`;
  }
  return undefined;
}

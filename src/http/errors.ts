import type { ContentfulStatusCode } from 'hono/utils/http-status';
import { DomainError, fromStoreError, oneLine, type ErrorCode, type ErrorIssue } from '../domain/errors.js';

/** The one table from domain error to HTTP status (docs/reference/rules.md "Errors and limits"). */
export const httpStatus: Record<ErrorCode, ContentfulStatusCode> = {
  invalid_request: 400,
  validation_failed: 400,
  unauthorized: 401,
  forbidden: 403,
  insufficient_access: 403,
  grant_required: 403,
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

export interface ErrorEnvelope {
  error: {
    code: ErrorCode;
    message: string;
    issues?: ErrorIssue[];
    /** For `quota_exceeded` (docs/operators/budgets.md); `retryAfter` repeats Retry-After for MCP clients, which see no headers. */
    details?: { budget: string; limit: number; used: number; retryAfter?: number };
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

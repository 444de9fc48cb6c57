/**
 * Errors of the OAuth protocol endpoints (RFC 6749 §4.1.2.1 and §5.2, RFC 7009, RFC 7591,
 * RFC 8707). They are not DomainErrors on purpose: OAuth clients expect the protocol's own
 * wire format (`{ error, error_description }` or redirect parameters), not this service's
 * error envelope, and their codes (`invalid_grant`, `invalid_target` …) mean nothing to the
 * REST and MCP surfaces.
 */
export type OAuthErrorCode =
  | 'invalid_request'
  | 'invalid_client'
  | 'invalid_grant'
  | 'unauthorized_client'
  | 'unsupported_grant_type'
  | 'unsupported_response_type'
  | 'unsupported_token_type'
  | 'invalid_scope'
  | 'invalid_target'
  | 'access_denied'
  | 'invalid_redirect_uri'
  | 'invalid_client_metadata'
  | 'server_error'
  | 'temporarily_unavailable';

export class OAuthProtocolError extends Error {
  constructor(
    readonly code: OAuthErrorCode,
    readonly description: string,
    /** Set on a rate-limit refusal: answered as HTTP 429 with Retry-After (docs/reference/rules.md "Errors and limits"). */
    readonly retryAfterSeconds?: number,
  ) {
    super(description);
    this.name = 'OAuthProtocolError';
  }
}

/**
 * An authorization request so broken that the user must not be sent back to the client
 * (RFC 6749 §4.1.2.1: unknown client or redirect URI): shown as a page, never redirected.
 */
export class UnsafeAuthorizationRequest extends Error {
  constructor(
    message: string,
    /** Set when the request was refused for a budget, not for what it holds: a 429 page with Retry-After. */
    readonly retryAfterSeconds?: number,
  ) {
    super(message);
    this.name = 'UnsafeAuthorizationRequest';
  }
}

export const oauthError = (code: OAuthErrorCode, description: string) => new OAuthProtocolError(code, description);

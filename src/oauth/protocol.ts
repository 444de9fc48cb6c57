import type { Context } from 'hono';
import { authenticateClient, type ClientCredentials } from '../domain/oauth/clients.js';
import type { OAuthDeps } from '../domain/oauth/deps.js';
import { OAuthProtocolError, type OAuthErrorCode } from '../domain/oauth/errors.js';
import { authFailureKey } from '../domain/rate-limits.js';
import { clientAddress } from '../http/request.js';
import type { OAuthEndpointDeps } from './deps.js';
import { readForm } from '../http/form.js';

/**
 * What the token, revocation and registration endpoints share: they answer in OAuth's own
 * JSON (RFC 6749 §5.2), never cached, count failed client authentications against the
 * address, and read client credentials the same way.
 */

const STATUS: Record<OAuthErrorCode, 400 | 401 | 403 | 500 | 503> = {
  invalid_request: 400,
  invalid_client: 401,
  invalid_grant: 400,
  unauthorized_client: 400,
  unsupported_grant_type: 400,
  unsupported_response_type: 400,
  unsupported_token_type: 400,
  invalid_scope: 400,
  invalid_target: 400,
  access_denied: 403,
  invalid_redirect_uri: 400,
  invalid_client_metadata: 400,
  server_error: 500,
  temporarily_unavailable: 503,
};

/** A form post of the token and revocation endpoints: a refusal is RFC 6749 JSON, never cached. */
export const protocolForm = (c: Context) =>
  readForm(c.req.raw, (description, status) =>
    c.json({ error: 'invalid_request', error_description: description }, status, { 'Cache-Control': 'no-store', Pragma: 'no-cache' }),
  );

const protocolError = (c: Context, error: OAuthProtocolError) => {
  const status = error.retryAfterSeconds !== undefined ? 429 : STATUS[error.code];
  const headers: Record<string, string> = { 'Cache-Control': 'no-store', Pragma: 'no-cache' };
  if (status === 401) headers['WWW-Authenticate'] = 'Basic realm="dfc-oauth"';
  if (error.retryAfterSeconds !== undefined) headers['Retry-After'] = String(error.retryAfterSeconds);
  return c.json({ error: error.code, error_description: error.description }, status, headers);
};

/**
 * Runs a protocol endpoint. With `failures`, each answer with one of those codes (a wrong
 * client secret, an unknown code or refresh token: guesses) costs the address a token of its
 * failed-authentication budget (docs/reference/rules.md "Errors and limits"), and a failure from an
 * address whose budget is spent is answered 429 instead. Failures are throttled, not people:
 * a client that authenticates and presents a good grant is served even from an address over
 * its budget (one bad client behind a NAT must not lock out the others). What a refused
 * address can still make the service do is one client lookup and one hash per request.
 * RFC 6749 has no rate-limit error, and `slow_down` belongs to the device flow (RFC 8628),
 * so the refusal is HTTP 429 with Retry-After and the closest standard code,
 * `temporarily_unavailable`, in the usual JSON.
 */
export const runProtocolEndpoint = async (deps: OAuthEndpointDeps, c: Context, fn: () => Promise<Response>, failures?: readonly OAuthErrorCode[]) => {
  const { config, limiter, clock } = deps;
  const address = clientAddress(c);
  const key = failures && address !== undefined ? authFailureKey(address) : undefined;
  try {
    return await fn();
  } catch (error) {
    if (!(error instanceof OAuthProtocolError)) throw error;
    if (key && failures!.includes(error.code) && error.retryAfterSeconds === undefined) {
      const standing = await limiter.take(key, config.rateLimits.authFailures, clock.now());
      if (!standing.allowed) {
        const refusal = `Too many failed authentications from this address; retry after ${standing.retryAfterSeconds} s.`;
        return protocolError(c, new OAuthProtocolError('temporarily_unavailable', refusal, standing.retryAfterSeconds));
      }
    }
    return protocolError(c, error);
  }
};

/** Client authentication: HTTP Basic (RFC 6749 §2.3.1, form-encoded parts) or the body, not both. */
export function clientCredentials(authorization: string | undefined, form: URLSearchParams): ClientCredentials {
  const basic = /^Basic\s+([A-Za-z0-9+/=]+)\s*$/i.exec(authorization ?? '');
  if (basic) {
    if (form.has('client_secret')) throw new OAuthProtocolError('invalid_request', 'Use one client authentication method, not two.');
    const decoded = Buffer.from(basic[1]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) throw new OAuthProtocolError('invalid_client', 'Malformed Basic credentials.');
    try {
      const clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
      const clientSecret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
      const bodyClientId = form.get('client_id');
      if (bodyClientId !== null && bodyClientId !== clientId)
        throw new OAuthProtocolError('invalid_request', 'client_id differs from the authenticated client.');
      return { clientId, clientSecret };
    } catch (error) {
      if (error instanceof OAuthProtocolError) throw error;
      throw new OAuthProtocolError('invalid_client', 'Malformed Basic credentials.');
    }
  }
  return { clientId: form.get('client_id') ?? undefined, clientSecret: form.get('client_secret') ?? undefined };
}

/**
 * The start the token and revocation endpoints share: the form (or its refusal as an answer)
 * and the client it authenticates, by HTTP Basic or in the body.
 */
export async function authenticatedForm(
  c: Context,
  oauth: OAuthDeps,
): Promise<Response | { form: URLSearchParams; client: Awaited<ReturnType<typeof authenticateClient>> }> {
  const form = await protocolForm(c);
  if (form instanceof Response) return form;
  return { form, client: await authenticateClient(oauth, clientCredentials(c.req.header('authorization'), form)) };
}

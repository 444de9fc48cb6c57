/**
 * The endpoints that are not registry operations — the MCP endpoint, OAuth, metadata, the
 * wake WebSocket, metrics and the reference itself — described by hand so /openapi.json
 * names every route the service answers. Their behaviour is specified in docs/
 * sections named in each description.
 */

type PathItem = Record<string, Record<string, unknown>>;

const errorRef = { content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } };
const rawJson = { content: { 'application/json': { schema: { type: 'object' } } } };
const oauthError = {
  description: 'RFC 6749 error: `{ error, error_description? }` (not the service envelope, so OAuth clients can read it).',
  content: {
    'application/json': { schema: { type: 'object', required: ['error'], properties: { error: { type: 'string' }, error_description: { type: 'string' } } } },
  },
};
const form = (properties: Record<string, unknown>, required: string[]) => ({
  required: true,
  content: { 'application/x-www-form-urlencoded': { schema: { type: 'object', properties, required } } },
});
const str = { type: 'string' };

export function extraPaths(): Record<string, PathItem> {
  return { ...mcpPaths(), ...metadataPaths(), ...oauthProtocolPaths(), ...oauthSessionPaths(), ...servicePaths() };
}

/** The MCP endpoint and the device wake WebSocket. */
function mcpPaths(): Record<string, PathItem> {
  return {
    '/mcp': {
      post: {
        operationId: 'mcp',
        tags: ['mcp'],
        summary: 'The MCP endpoint (protocol 2026-07-28, and 2025 revisions statelessly)',
        description:
          'JSON-RPC over Streamable HTTP. Tools are built per caller from its live grants; a device tool call is re-checked live. Headers, statuses and tools: docs/agents/mcp.md "MCP".',
        security: [{ agentToken: [] }, { oauth: ['read'] }, { oauth: ['read', 'act'] }],
        parameters: [
          { name: 'MCP-Protocol-Version', in: 'header', required: false, schema: str, description: 'Modern requests: must equal the version in params._meta.' },
          { name: 'Mcp-Method', in: 'header', required: false, schema: str, description: 'Modern requests: must equal the JSON-RPC method.' },
          {
            name: 'Mcp-Name',
            in: 'header',
            required: false,
            schema: str,
            description: 'Modern tools/call and resources/read: the tool name or resource URI (=?base64?…?= for Unicode).',
          },
        ],
        requestBody: {
          required: true,
          content: {
            'application/json': {
              schema: {
                type: 'object',
                required: ['jsonrpc', 'method'],
                properties: { jsonrpc: { const: '2.0' }, id: { type: ['integer', 'string'] }, method: str, params: { type: 'object' } },
              },
            },
          },
        },
        responses: {
          '200': {
            description: 'A JSON-RPC response, or an event stream of progress notifications and the response.',
            content: { 'application/json': { schema: { type: 'object' } }, 'text/event-stream': { schema: str } },
          },
          '400': { description: 'JSON-RPC or MCP protocol error (JSON-RPC body).', ...rawJson },
          '401': { description: 'Missing, unknown, expired or revoked token; WWW-Authenticate names the protected-resource metadata.', ...errorRef },
          '403': {
            description:
              'Host/Origin refused, another credential kind, or no live grant / ceiling for the device tool called (insufficient_scope for OAuth step-up).',
            ...errorRef,
          },
          '404': { description: 'Unknown method (-32601), or a 2025-era Mcp-Session-Id not issued to this caller (-32001).', ...rawJson },
          '405': { description: 'Only POST: no GET stream, and a 2025-era session holds no server state to DELETE.', ...errorRef },
          '406': { description: 'Accept must include application/json and text/event-stream (JSON-RPC body).', ...rawJson },
          '409': { description: 'A 2025-era answer to an elicitation that finds no call waiting on this instance (JSON-RPC body).', ...rawJson },
          '413': { description: 'Body over 16 KiB.', ...errorRef },
          '415': { description: 'Content-Type must be application/json (JSON-RPC body).', ...rawJson },
          '429': { description: 'Rate limit.', ...errorRef },
          '503': { description: 'Device controls switched off (device tools and broadcast).', ...errorRef },
        },
      },
    },
    '/v1/device/{deviceId}/events': {
      get: {
        operationId: 'deviceEvents.open',
        tags: ['device'],
        summary: 'Open the device wake WebSocket',
        description:
          'An HTTP upgrade to a WebSocket with a one-use ticket from POST /v1/device/{deviceId}/events-ticket. The server sends `{ "type": "wake", "deviceId", "actionId" }` text frames; results still go over HTTPS. Close codes and pings: docs/devices/wire-protocol.md "Wake channel".',
        security: [],
        parameters: [
          { name: 'deviceId', in: 'path', required: true, schema: { type: 'string', format: 'uuid' } },
          { name: 'ticket', in: 'query', required: true, schema: str },
        ],
        responses: {
          '101': { description: 'Switching protocols: the wake socket is open.' },
          '401': { description: 'Missing, used, expired or foreign ticket, or a revoked device (refused before upgrading).', ...errorRef },
          '404': { description: 'Not an upgrade request.', ...errorRef },
        },
      },
    },
  };
}

/** The well-known metadata documents (RFC 9728, RFC 8414). */
function metadataPaths(): Record<string, PathItem> {
  return {
    '/.well-known/oauth-protected-resource': {
      get: {
        operationId: 'metadata.protectedResource',
        tags: ['oauth'],
        summary: 'Protected-resource metadata (RFC 9728), raw object',
        security: [],
        responses: { '200': { description: 'resource, authorization_servers, scopes_supported, bearer_methods_supported.', ...rawJson } },
      },
    },
    '/.well-known/oauth-protected-resource/mcp': {
      get: {
        operationId: 'metadata.protectedResourceMcp',
        tags: ['oauth'],
        summary: 'Protected-resource metadata, MCP path alias',
        security: [],
        responses: { '200': { description: 'The same document.', ...rawJson } },
      },
    },
    '/.well-known/oauth-authorization-server': {
      get: {
        operationId: 'metadata.authorizationServer',
        tags: ['oauth'],
        summary: 'Authorization-server metadata (RFC 8414), raw object',
        security: [],
        responses: { '200': { description: 'issuer, endpoints, S256 only, scopes read and act.', ...rawJson } },
      },
    },
  };
}

/** The OAuth 2.1 endpoints clients call. */
function oauthProtocolPaths(): Record<string, PathItem> {
  return {
    '/oauth/authorize': {
      get: {
        operationId: 'oauth.authorize',
        tags: ['oauth'],
        summary: 'Authorization request: sign-in, then the consent page',
        description:
          'Authorization code with PKCE S256 only; `resource` must be `${PUBLIC_BASE_URL}/mcp`. Every redirect carries `iss` (RFC 9207). docs/agents/oauth.md "OAuth".',
        security: [],
        parameters: ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'resource', 'scope', 'state'].map((name) => ({
          name,
          in: 'query',
          required: !['scope', 'state'].includes(name),
          schema: str,
        })),
        responses: {
          '200': { description: 'The consent page (HTML).', content: { 'text/html': { schema: str } } },
          '302': { description: 'To sign-in, or back to the client with an error, `state` and `iss`.' },
          '400': { description: 'Unknown client or redirect URI: shown, never redirected (HTML).', content: { 'text/html': { schema: str } } },
        },
      },
      post: {
        operationId: 'oauth.consent',
        tags: ['oauth'],
        summary: "The owner's approve/deny on the consent page (CSRF-protected form)",
        security: [],
        requestBody: form({ csrf: str, decision: str }, ['csrf', 'decision']),
        responses: {
          '303': { description: 'To the redirect URI with `code`, `state` and `iss`, or `error=access_denied`.' },
          '400': { description: 'Bad or expired form (HTML).', content: { 'text/html': { schema: str } } },
        },
      },
    },
    '/oauth/token': {
      post: {
        operationId: 'oauth.token',
        tags: ['oauth'],
        summary: 'Token endpoint: authorization_code (PKCE) and refresh_token (rotating)',
        security: [],
        requestBody: form(
          { grant_type: str, code: str, code_verifier: str, redirect_uri: str, client_id: str, client_secret: str, refresh_token: str, resource: str },
          ['grant_type'],
        ),
        responses: {
          '200': { description: '`{ access_token, token_type, expires_in, refresh_token, scope }`, Cache-Control: no-store.', ...rawJson },
          '400': oauthError,
          '401': oauthError,
          '429': oauthError,
        },
      },
    },
    '/oauth/revoke': {
      post: {
        operationId: 'oauth.revoke',
        tags: ['oauth'],
        summary: 'Token revocation (RFC 7009)',
        security: [],
        requestBody: form({ token: str, token_type_hint: str, client_id: str, client_secret: str }, ['token']),
        responses: { '200': { description: 'Revoked, or nothing to revoke.' }, '400': oauthError, '401': oauthError },
      },
    },
    '/oauth/register': {
      post: {
        operationId: 'oauth.register',
        tags: ['oauth'],
        deprecated: true,
        summary: 'Dynamic client registration (RFC 7591), kept for older clients',
        security: [],
        requestBody: { required: true, ...rawJson },
        responses: { '201': { description: 'The registered client.', ...rawJson }, '400': oauthError },
      },
    },
  };
}

/** The authorization server's owner sign-in pages. */
function oauthSessionPaths(): Record<string, PathItem> {
  return {
    '/oauth/sign-in': {
      get: {
        operationId: 'oauth.signInPage',
        tags: ['oauth'],
        summary: 'Owner sign-in page (HTML)',
        security: [],
        responses: { '200': { description: 'HTML form.', content: { 'text/html': { schema: str } } } },
      },
      post: {
        operationId: 'oauth.signIn',
        tags: ['oauth'],
        summary: 'Sign in with an owner session; sets the strict session cookie',
        security: [],
        requestBody: form({ token: str, next: str }, ['token']),
        responses: {
          '200': { description: 'Signed in (HTML).', content: { 'text/html': { schema: str } } },
          '303': { description: 'Signed in: back to the authorization request.' },
          '401': { description: 'Not a valid owner session (HTML).', content: { 'text/html': { schema: str } } },
          '403': { description: 'Posted from another origin (HTML).', content: { 'text/html': { schema: str } } },
        },
      },
    },
    '/oauth/session': {
      post: {
        operationId: 'oauth.session',
        tags: ['oauth'],
        summary: 'Trade an owner bearer JWT for the consent session cookie',
        security: [{ ownerSession: [] }],
        responses: { '204': { description: 'Cookie set.' }, '401': { description: 'Not a valid owner session.', ...errorRef } },
      },
    },
    '/oauth/sign-out': {
      post: {
        operationId: 'oauth.signOut',
        tags: ['oauth'],
        summary: 'End the consent session',
        security: [],
        responses: {
          '204': { description: 'Signed out.' },
          '403': { description: 'Posted from another origin (HTML).', content: { 'text/html': { schema: str } } },
        },
      },
    },
  };
}

/** Metrics and the API reference itself. */
function servicePaths(): Record<string, PathItem> {
  return {
    '/metrics': {
      get: {
        operationId: 'metrics',
        tags: ['operations'],
        summary: 'Prometheus metrics (Bearer METRICS_TOKEN; 503 when unset)',
        security: [{ metricsToken: [] }],
        responses: {
          '200': { description: 'Prometheus text format.', content: { 'text/plain': { schema: str } } },
          '401': { description: 'Missing or wrong metrics token.', ...errorRef },
          '503': { description: 'METRICS_TOKEN is not set: metrics are off.', ...errorRef },
        },
      },
    },
    '/openapi.json': {
      get: {
        operationId: 'openapi',
        tags: ['operations'],
        summary: 'This document',
        security: [],
        responses: { '200': { description: 'OpenAPI 3.1.', ...rawJson } },
      },
    },
    '/docs': {
      get: {
        operationId: 'docs',
        tags: ['operations'],
        summary: 'The rendered API reference',
        security: [],
        responses: { '200': { description: 'HTML.', content: { 'text/html': { schema: str } } } },
      },
    },
  };
}

import type { Hono } from 'hono';
import { SCOPES } from '../domain/oauth/scopes.js';
import type { OAuthEndpointDeps } from './deps.js';

/** RFC 8414 authorization server metadata: how a client discovers every other endpoint. */
export function mountMetadataEndpoint(app: Hono, deps: OAuthEndpointDeps): void {
  app.get('/.well-known/oauth-authorization-server', (c) => {
    const { issuer } = deps.oauthFor(c);
    c.header('Cache-Control', 'max-age=300');
    if (!deps.config.publicBaseUrlSet) c.header('Vary', 'Host');
    return c.json({
      issuer,
      authorization_endpoint: `${issuer}/oauth/authorize`,
      token_endpoint: `${issuer}/oauth/token`,
      revocation_endpoint: `${issuer}/oauth/revoke`,
      registration_endpoint: `${issuer}/oauth/register`,
      scopes_supported: [...SCOPES],
      response_types_supported: ['code'],
      response_modes_supported: ['query'],
      grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      revocation_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      authorization_response_iss_parameter_supported: true,
      client_id_metadata_document_supported: true,
      service_documentation: `${issuer}/docs`,
    });
  });
}

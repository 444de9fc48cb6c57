import type { Hono } from 'hono';
import { OAuthProtocolError } from '../domain/oauth/errors.js';
import { clientCredentialsToken, exchangeCode, refreshTokens } from '../domain/oauth/token.js';
import type { OAuthEndpointDeps } from './deps.js';
import { authenticatedForm, runProtocolEndpoint } from './protocol.js';

/**
 * The token endpoint (RFC 6749 §3.2): an authorization code or a refresh token for a new
 * token pair, or a confidential client's own credentials for an access token (§4.4). Wrong client secrets and unknown codes or refresh tokens count as failed
 * authentications of the address (protocol.ts).
 */
export function mountTokenEndpoint(app: Hono, deps: OAuthEndpointDeps): void {
  app.post('/oauth/token', (c) =>
    runProtocolEndpoint(
      deps,
      c,
      async () => {
        const oauth = deps.oauthFor(c);
        const started = await authenticatedForm(c, oauth);
        if (started instanceof Response) return started;
        const { form, client } = started;
        const grantType = form.get('grant_type');
        const field = (name: string) => form.get(name) ?? undefined;
        let tokens;
        if (grantType === 'authorization_code') {
          tokens = await exchangeCode(oauth, client, {
            code: field('code'),
            redirect_uri: field('redirect_uri'),
            code_verifier: field('code_verifier'),
            resource: field('resource'),
          });
        } else if (grantType === 'refresh_token') {
          tokens = await refreshTokens(oauth, client, { refresh_token: field('refresh_token'), scope: field('scope'), resource: field('resource') });
        } else if (grantType === 'client_credentials') {
          tokens = await clientCredentialsToken(oauth, client, { scope: field('scope'), resource: field('resource') });
        } else {
          throw new OAuthProtocolError('unsupported_grant_type', 'grant_type must be authorization_code, refresh_token or client_credentials.');
        }
        return c.json(tokens, 200, { 'Cache-Control': 'no-store', Pragma: 'no-cache' });
      },
      ['invalid_client', 'invalid_grant'],
    ),
  );
}

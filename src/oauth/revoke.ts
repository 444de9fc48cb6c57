import type { Hono } from 'hono';
import { revokeToken } from '../domain/oauth/revoke.js';
import type { OAuthEndpointDeps } from './deps.js';
import { authenticatedForm, runProtocolEndpoint } from './protocol.js';

/**
 * The revocation endpoint (RFC 7009): the client authenticates as at the token endpoint and
 * gets 200 whether or not the token was one of its own.
 */
export function mountRevocationEndpoint(app: Hono, deps: OAuthEndpointDeps): void {
  app.post('/oauth/revoke', (c) =>
    runProtocolEndpoint(
      deps,
      c,
      async () => {
        const oauth = deps.oauthFor(c);
        const started = await authenticatedForm(c, oauth);
        if (started instanceof Response) return started;
        const { form, client } = started;
        await revokeToken(oauth, client, form.get('token') ?? undefined);
        return c.body(null, 200, { 'Cache-Control': 'no-store' });
      },
      ['invalid_client'],
    ),
  );
}

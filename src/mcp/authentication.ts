import type { Context } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Credential, CredentialOf } from '../domain/context.js';
import { DomainError } from '../domain/errors.js';
import { credentialName } from '../domain/invoke.js';
import { bearerToken, clientAddress, type HttpEnv } from '../http/request.js';
import { envelope } from './refusals.js';

/**
 * The bearer of a POST /mcp: an agent token or an OAuth access token (both agent
 * credentials). No credential or an invalid one is 401 with a WWW-Authenticate pointing at
 * the protected-resource metadata; a valid credential of another kind is 403.
 */
export async function authenticateAgent(
  c: Context<HttpEnv>,
  authenticator: Authenticator,
  metadataUrl: string,
): Promise<{ credential: CredentialOf<'agent'> } | { response: Response }> {
  const bearer = bearerToken(c.req.header('authorization'));
  let credential: Credential | null;
  try {
    credential = await authenticator.authenticate(bearer, clientAddress(c));
  } catch (error) {
    if (error instanceof DomainError && error.code === 'unauthorized') {
      return { response: envelope(c, error, { 'WWW-Authenticate': `Bearer error="invalid_token", resource_metadata="${metadataUrl}"` }) };
    }
    throw error;
  }
  c.set('credential', credential);
  if (!credential) {
    return {
      response: envelope(c, new DomainError('unauthorized', 'POST /mcp needs an agent token or OAuth access token.'), {
        'WWW-Authenticate': `Bearer resource_metadata="${metadataUrl}"`,
      }),
    };
  }
  if (credential.kind !== 'agent') {
    // docs/reference/rules.md "Credentials": a valid credential of another kind is 403, not 401.
    return {
      response: envelope(
        c,
        new DomainError('forbidden', `/mcp does not accept ${credentialName(credential)}: it wants an agent token or an OAuth access token.`),
      ),
    };
  }
  return { credential };
}

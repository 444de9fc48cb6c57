import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { issueToken } from '../tokens.js';
import { insertClient } from '../../store/oauth.js';
import { inputIssues } from '../input-limits.js';
import type { OAuthDeps } from './deps.js';
import { oauthError } from './errors.js';
import { redirectUriProblem } from './redirects.js';
import { parseScope } from './scopes.js';

/**
 * Dynamic client registration (RFC 7591), kept for older MCP clients; deprecated in the docs.
 * Pre-registered clients are made by the owner in client-operations.ts; metadata-document
 * clients need no registration (metadata-documents.ts).
 */

export const registrationRequest = z.looseObject({
  redirect_uris: z.array(z.string()).min(1).max(10),
  client_name: z.string().min(1).max(100).optional(),
  client_uri: z.url().max(512).optional(),
  token_endpoint_auth_method: z.enum(['none', 'client_secret_basic', 'client_secret_post']).default('client_secret_basic'),
  grant_types: z.array(z.string()).default(['authorization_code']),
  response_types: z.array(z.string()).default(['code']),
  scope: z.string().optional(),
});

export async function registerDynamicClient(deps: OAuthDeps, body: unknown): Promise<Record<string, unknown>> {
  // Text that cannot be stored as sent (NUL, lone surrogates) or nesting past the limit, as invoke refuses it on /v1.
  const unsafe = inputIssues(body)[0];
  if (unsafe) throw oauthError('invalid_client_metadata', `${unsafe.path || 'body'}: ${unsafe.message}`);
  const parsed = registrationRequest.safeParse(body);
  if (!parsed.success) {
    const issue = parsed.error.issues[0]!;
    const code = issue.path[0] === 'redirect_uris' ? 'invalid_redirect_uri' : 'invalid_client_metadata';
    throw oauthError(code, `${issue.path.join('.') || 'body'}: ${issue.message}`);
  }
  const request = parsed.data;
  for (const uri of request.redirect_uris) {
    const problem = redirectUriProblem(uri);
    if (problem) throw oauthError('invalid_redirect_uri', `${uri} ${problem}.`);
  }
  const unsupportedGrant = request.grant_types.find((g) => g !== 'authorization_code' && g !== 'refresh_token');
  if (unsupportedGrant) throw oauthError('invalid_client_metadata', `grant type ${unsupportedGrant} is not supported.`);
  if (request.response_types.some((r) => r !== 'code')) throw oauthError('invalid_client_metadata', 'only response type code is supported.');
  if (request.scope !== undefined) parseScopeForMetadata(request.scope);

  const now = deps.clock.now();
  const isPublic = request.token_endpoint_auth_method === 'none';
  const secret = isPublic ? undefined : issueToken('clientSecret');
  const clientId = randomUUID();
  await insertClient(deps.db, {
    id: randomUUID(),
    clientId,
    source: 'dynamic',
    workspaceId: null,
    name: request.client_name ?? 'Unnamed client',
    clientUri: request.client_uri ?? null,
    redirectUris: request.redirect_uris,
    public: isPublic,
    secretHash: secret?.hash ?? null,
    secretPrefix: secret?.displayPrefix ?? null,
    freshUntil: null,
    createdAt: now,
    updatedAt: now,
  });
  return {
    client_id: clientId,
    client_id_issued_at: Math.floor(now / 1000),
    ...(secret ? { client_secret: secret.token, client_secret_expires_at: 0 } : {}),
    client_name: request.client_name ?? 'Unnamed client',
    ...(request.client_uri ? { client_uri: request.client_uri } : {}),
    redirect_uris: request.redirect_uris,
    token_endpoint_auth_method: request.token_endpoint_auth_method,
    grant_types: request.grant_types,
    response_types: request.response_types,
    ...(request.scope !== undefined ? { scope: request.scope } : {}),
  };
}

function parseScopeForMetadata(scope: string): void {
  try {
    parseScope(scope);
  } catch {
    throw oauthError('invalid_client_metadata', 'scope may only name read and act.');
  }
}

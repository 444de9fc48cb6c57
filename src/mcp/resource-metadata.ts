import type { Context, Hono } from 'hono';
import { requestBaseUrl, type ServiceNaming } from '../http/base-url.js';
import type { HttpEnv } from '../http/request.js';

/** RFC 9728 protected-resource metadata: raw object, served at both well-known paths. */
export function protectedResourceMetadata(publicBaseUrl: string) {
  return {
    resource: `${publicBaseUrl}/mcp`,
    authorization_servers: [publicBaseUrl],
    scopes_supported: ['read', 'act'],
    bearer_methods_supported: ['header'],
  };
}

/** Where a 401 or 403 of /mcp points the client (`resource_metadata` in WWW-Authenticate). */
export function resourceMetadataUrl(publicBaseUrl: string): string {
  return `${publicBaseUrl}/.well-known/oauth-protected-resource/mcp`;
}

/** Served as the request names the service (src/http/base-url.ts): the MCP client compares `resource` with the URL it connected to. */
export function mountResourceMetadata(app: Hono<HttpEnv>, naming: ServiceNaming): void {
  const answer = (c: Context<HttpEnv>) => {
    if (!naming.publicBaseUrlSet) c.header('Vary', 'Host');
    return c.json(protectedResourceMetadata(requestBaseUrl(c, naming)));
  };
  app.get('/.well-known/oauth-protected-resource', answer);
  app.get('/.well-known/oauth-protected-resource/mcp', answer);
}

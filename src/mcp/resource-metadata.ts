import type { Hono } from 'hono';
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

export function mountResourceMetadata(app: Hono<HttpEnv>, publicBaseUrl: string): void {
  const metadata = protectedResourceMetadata(publicBaseUrl);
  app.get('/.well-known/oauth-protected-resource', (c) => c.json(metadata));
  app.get('/.well-known/oauth-protected-resource/mcp', (c) => c.json(metadata));
}

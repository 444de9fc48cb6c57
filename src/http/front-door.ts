import type { Hono } from 'hono';
import type { HttpEnv } from './request.js';

/** Where each part of the service lives, relative to its root (docs/getting-started.md "2. Open the console"). */
export const SERVICE_URLS = {
  console: '/console',
  apiReference: '/docs',
  openapi: '/openapi.json',
  mcp: '/mcp',
  health: '/healthz',
  readiness: '/readyz',
} as const;

/**
 * The root: a browser is sent to the owner console, an API client gets a small index of the
 * service's URLs, so that neither meets a 404 at the address the service prints.
 */
export function mountFrontDoor(app: Hono<HttpEnv>): void {
  app.get('/', (c) => {
    const accept = c.req.header('accept') ?? '';
    c.header('Vary', 'Accept');
    if (accept.includes('text/html')) return c.redirect(SERVICE_URLS.console, 302);
    return c.json({ data: SERVICE_URLS });
  });
  app.get('/console/', (c) => c.redirect(SERVICE_URLS.console, 301));
}

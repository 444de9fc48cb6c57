import fs from 'node:fs';
import { createRequire } from 'node:module';
import { Scalar } from '@scalar/hono-api-reference';
import type { Hono } from 'hono';
import type { HttpEnv } from '../http/request.js';
import { buildOpenApi } from './openapi.js';
import type { Route } from './routes.js';

const require = createRequire(import.meta.url);
const SCALAR_BUNDLE = '/docs/scalar.js';

/**
 * GET /openapi.json (built once from the route table) and a rendered reference at /docs.
 * The reference's script is served from the installed package, so the page loads no CDN.
 */
export function mountDocs(app: Hono<HttpEnv>, routes: Route[], options: { version: string; serverUrl: string }): void {
  const document = JSON.stringify(buildOpenApi(routes, options));
  let bundle: string | undefined;

  app.get('/openapi.json', (c) => c.body(document, 200, { 'content-type': 'application/json; charset=utf-8' }));
  app.get(SCALAR_BUNDLE, (c) => {
    bundle ??= fs.readFileSync(require.resolve('@scalar/api-reference/browser/standalone.js'), 'utf8');
    return c.body(bundle, 200, { 'content-type': 'text/javascript; charset=utf-8', 'cache-control': 'public, max-age=3600' });
  });
  app.get('/docs', Scalar({ url: '/openapi.json', cdn: SCALAR_BUNDLE, pageTitle: 'Device Function Control API', withDefaultFonts: false }));
}

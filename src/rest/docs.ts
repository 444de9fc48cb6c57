import fs from 'node:fs';
import type { Context, Hono } from 'hono';
import { CompressedAsset } from '../http/compressed.js';
import type { HttpEnv } from '../http/request.js';
import { buildOpenApi } from './openapi.js';
import type { Route } from './routes.js';

/**
 * Scalar's standalone API reference, committed with its licence and pinned by version and
 * SHA-256 (vendor/scalar-api-reference/source.json, checked by `npm run vendor:scalar -- --check`):
 * one file instead of the ~290 packages its npm integration installs. The same path from
 * src/rest and dist/rest.
 */
const SCALAR_FILE = new URL('../../vendor/scalar-api-reference/standalone.js', import.meta.url);
const SCALAR_BUNDLE = '/docs/scalar.js';
const SCALAR_START = '/docs/reference.js';
/**
 * Scalar's settings. No web fonts (fonts.scalar.com), no request proxy (proxy.scalar.com: an
 * empty proxyUrl, since an absent one means Scalar's hosted proxy), no telemetry, no AI agent
 * (api.scalar.com): "Test Request" calls this origin directly.
 */
const SCALAR_CONFIG = {
  url: '/openapi.json',
  withDefaultFonts: false,
  proxyUrl: '',
  telemetry: false,
  agent: { disabled: true },
  hideClientButton: true,
  showDeveloperTools: 'never',
};
/**
 * Both scripts are files, so no inline script runs (the settings travel as a JSON data block,
 * which is never executed); Scalar adds its styles at run time, hence inline styles.
 */
const DOCS_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; connect-src 'self'; " +
  "worker-src 'self' blob:; form-action 'none'; frame-ancestors 'none'; base-uri 'none'";
const DOCS_PAGE = `<!doctype html>
<html lang="en">
  <head>
    <meta charset="utf-8" />
    <meta name="viewport" content="width=device-width, initial-scale=1" />
    <title>Device Function Control API</title>
  </head>
  <body>
    <div id="app"></div>
    <script type="application/json" id="scalar-config">${JSON.stringify(SCALAR_CONFIG)}</script>
    <script src="${SCALAR_BUNDLE}"></script>
    <script src="${SCALAR_START}"></script>
  </body>
</html>
`;
/** A host (name, IPv4 or bracketed IPv6) with an optional port: anything else in Host is not echoed. */
const HOST = /^([A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\])(:\d{1,5})?$/;
/** Distinct origins whose document is kept; Host is chosen by the caller, so the cache is bounded. */
const KEPT_ORIGINS = 8;

export interface DocsOptions {
  version: string;
  publicBaseUrl: string;
  /** PUBLIC_BASE_URL was set: it is the server, whatever the request's Host. */
  publicBaseUrlSet: boolean;
  /** Reverse proxies in front (TRUST_PROXY_HOPS): only then are X-Forwarded-Host/-Proto believed. */
  trustProxyHops: number;
}

function firstValue(header: string | undefined): string | undefined {
  return header?.split(',')[0]?.trim() || undefined;
}

/**
 * The origin the caller reached the service at, which the document names as its server so
 * the reference's "Test Request" and generated clients call the same origin the page came
 * from (`localhost` or `127.0.0.1` alike): PUBLIC_BASE_URL when set, else the request's
 * Host, or a trusted proxy's X-Forwarded-Host and -Proto (docs/operators/configuration.md "Configuration").
 */
function serverUrl(c: Context<HttpEnv>, options: DocsOptions): string {
  if (options.publicBaseUrlSet) return options.publicBaseUrl;
  const own = new URL(c.req.url);
  let protocol = own.protocol.slice(0, -1);
  let host = own.host;
  if (options.trustProxyHops > 0) {
    const forwardedProto = firstValue(c.req.header('x-forwarded-proto'));
    host = firstValue(c.req.header('x-forwarded-host')) ?? host;
    if (forwardedProto === 'http' || forwardedProto === 'https') protocol = forwardedProto;
  }
  return HOST.test(host) ? `${protocol}://${host}` : options.publicBaseUrl;
}

/**
 * GET /openapi.json (built once from the route table; the server named per origin) and a
 * rendered reference at /docs. Every asset of the page is served from here, compressed when
 * the client accepts it: the page makes no request to another host.
 */
export function mountDocs(app: Hono<HttpEnv>, routes: Route[], options: DocsOptions): void {
  const document = buildOpenApi(routes, { version: options.version, serverUrl: options.publicBaseUrl });
  const byOrigin = new Map<string, CompressedAsset>();
  let bundle: CompressedAsset | undefined;

  app.get('/openapi.json', (c) => {
    const url = serverUrl(c, options);
    let asset = byOrigin.get(url);
    if (!asset) {
      if (byOrigin.size >= KEPT_ORIGINS) byOrigin.delete(byOrigin.keys().next().value!);
      asset = new CompressedAsset(JSON.stringify({ ...document, servers: [{ url }] }), 'application/json; charset=utf-8');
      byOrigin.set(url, asset);
    }
    return asset.send(c, options.publicBaseUrlSet ? {} : { vary: 'Host, X-Forwarded-Host, X-Forwarded-Proto' });
  });
  app.get(SCALAR_BUNDLE, (c) => {
    bundle ??= new CompressedAsset(fs.readFileSync(SCALAR_FILE, 'utf8'), 'text/javascript; charset=utf-8');
    return bundle.send(c, { 'cache-control': 'public, max-age=3600' });
  });
  app.get(SCALAR_START, (c) => {
    c.header('Content-Type', 'text/javascript; charset=utf-8');
    return c.body(`Scalar.createApiReference('#app', JSON.parse(document.getElementById('scalar-config').textContent));\n`);
  });
  app.get('/docs', (c) => {
    c.header('Content-Security-Policy', DOCS_CSP);
    return c.html(DOCS_PAGE);
  });
}

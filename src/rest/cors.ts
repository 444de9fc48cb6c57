import type { Hono } from 'hono';
import { cors } from 'hono/cors';
import type { HttpEnv } from '../http/request.js';

/**
 * CORS for the REST API and /openapi.json, for browser callers on another origin (a web app,
 * a hosted API editor): only the origins of CORS_ALLOWED_ORIGINS, none by default. The
 * reference at /docs needs none (it calls its own origin); /mcp and the OAuth pages get none
 * (their Host/Origin checks refuse foreign browser origins, docs/agents/mcp.md "MCP").
 */
export function allowCrossOrigin(app: Hono<HttpEnv>, origins: readonly string[]): void {
  if (origins.length === 0) return;
  const policy = cors({
    origin: [...origins],
    allowMethods: ['GET', 'POST'],
    allowHeaders: ['Authorization', 'Content-Type', 'X-Request-Id', 'x-service-workspace'],
    exposeHeaders: ['Link', 'Retry-After', 'x-request-id'],
    maxAge: 600,
  });
  for (const path of ['/v1/*', '/healthz', '/openapi.json']) app.use(path, policy);
}

import type { Hono } from 'hono';
import type { HttpEnv } from '../http/request.js';
import type { Guards } from './guards.js';
import { OWNER_LIVE_SCRIPT } from './pending.js';

/** The pending count's script, and the count it reads again when an approval changes (src/console/pending.tsx). */
export function mountPending(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(OWNER_LIVE_SCRIPT.path, (c) => {
    if (c.req.header('if-none-match') === OWNER_LIVE_SCRIPT.etag) return c.body(null, 304, { ETag: OWNER_LIVE_SCRIPT.etag });
    return c.body(OWNER_LIVE_SCRIPT.body, 200, { 'Content-Type': 'text/javascript; charset=utf-8', ETag: OWNER_LIVE_SCRIPT.etag, 'Cache-Control': 'no-cache' });
  });
  // What the script reads to keep the navigation's count true: the signed-in owner's, as JSON.
  app.get(
    '/console/approvals/count',
    guards.page((c, signed) => c.json({ pending: signed.viewer.pending ?? 0 })),
  );
}

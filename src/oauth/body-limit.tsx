import type { Context as HonoContext, Next } from 'hono';
import { MAX_BODY_BYTES, readLimitedBody } from '../http/body.js';
import { ErrorPage } from './pages.js';

/**
 * The 16 KiB body limit (docs/rules.md "Errors and limits") on the OAuth endpoints that never
 * read their body: GET pages, /oauth/session and /oauth/sign-out. The others read theirs
 * through the same reader and answer 413 in their own format (form.ts, registration.ts).
 * A body is read here only to be counted and dropped.
 */
export async function limitUnreadBody(c: HonoContext, next: Next): Promise<Response | void> {
  try {
    await readLimitedBody(c.req.raw);
  } catch {
    const message = `The request body exceeds ${MAX_BODY_BYTES} bytes.`;
    // /oauth/session speaks the service's error envelope (its other answers do too); the rest are pages.
    if (c.req.path === '/oauth/session') return c.json({ error: { code: 'payload_too_large', message } }, 413);
    return c.html(<ErrorPage title="This request cannot be read" message={message} />, 413);
  }
  await next();
}

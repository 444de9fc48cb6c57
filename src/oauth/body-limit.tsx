import type { Context, Next } from 'hono';
import { DomainError } from '../domain/errors.js';
import { MAX_BODY_BYTES, readLimitedBody } from '../http/body.js';
import { ErrorPage } from './pages.js';

/**
 * The 16 KiB body limit (docs/reference/rules.md "Errors and limits": any method, any path) on the
 * `/oauth/*` requests no endpoint reads a body for: every method and path but the posts below,
 * which read theirs through the same reader and answer 413 in their own format (form.ts,
 * registration.ts). That includes a method or path no endpoint serves (a DELETE of /oauth/token,
 * /oauth/nowhere): the body is refused before the 404 would be. A body is read here only to be
 * counted and dropped; a refusal speaks the format of its path.
 */
const READ_BY_ENDPOINT = new Set([
  'POST /oauth/token',
  'POST /oauth/revoke',
  'POST /oauth/register',
  'POST /oauth/authorize',
  'POST /oauth/sign-in',
  'POST /oauth/sign-in/development',
]);
const PAGES = new Set(['/oauth/authorize', '/oauth/sign-in', '/oauth/sign-in/development', '/oauth/sign-out']);

export async function limitUnreadBody(c: Context, next: Next): Promise<Response | void> {
  if (READ_BY_ENDPOINT.has(`${c.req.method} ${c.req.path}`)) return next();
  try {
    await readLimitedBody(c.req.raw);
  } catch {
    const message = `The request body exceeds ${MAX_BODY_BYTES} bytes.`;
    const path = c.req.path;
    // The protocol endpoints answer in RFC 6749 / RFC 7591 JSON whatever the method; the browser's in pages.
    if (path === '/oauth/token' || path === '/oauth/revoke') return c.json({ error: 'invalid_request', error_description: message }, 413);
    if (path === '/oauth/register') return c.json({ error: 'invalid_client_metadata', error_description: message }, 413);
    if (PAGES.has(path)) return c.html(<ErrorPage title="This request cannot be read" message={message} />, 413);
    // /oauth/session and any path no endpoint serves: the service's error envelope, as their other answers.
    throw new DomainError('payload_too_large', message);
  }
  await next();
}

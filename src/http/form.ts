import { MAX_BODY_BYTES, readLimitedBody } from './body.js';

/**
 * Form bodies, read the same way by the browser's pages (the consent page, the owner console)
 * and the OAuth token and revocation endpoints; only how a refusal is answered differs.
 */

/**
 * Reads an application/x-www-form-urlencoded body (16 KiB limit). A repeated parameter is
 * refused (RFC 6749 §3.1: "MUST NOT be included more than once"). `answer` renders a refusal
 * in the endpoint's own format: RFC 6749 JSON on the protocol endpoints, an HTML page on the
 * browser's forms.
 */
export async function readForm(
  request: Request,
  answer: (description: string, status: 400 | 413) => Response | Promise<Response>,
): Promise<URLSearchParams | Response> {
  const fail = (description: string, status: 400 | 413 = 400) => answer(description, status);
  // The size first: a body over the limit is 413 whatever it claims to be.
  let bytes: Uint8Array;
  try {
    bytes = await readLimitedBody(request);
  } catch {
    return fail(`The body exceeds ${MAX_BODY_BYTES} bytes.`, 413);
  }
  const type = request.headers.get('content-type') ?? '';
  if (!/^application\/x-www-form-urlencoded\b/i.test(type)) return fail('The body must be application/x-www-form-urlencoded.');
  const form = new URLSearchParams(new TextDecoder().decode(bytes));
  const seen = new Set<string>();
  for (const key of form.keys()) {
    if (seen.has(key)) return fail(`Parameter ${key} is repeated.`);
    seen.add(key);
  }
  return form;
}

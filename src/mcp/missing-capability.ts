import { cannotAskMessage } from './confirmation.js';
import { isObject } from './modern-requests.js';

/** MissingRequiredClientCapability: the JSON-RPC error of a 2026-07-28 request that lacks a capability the server needs. */
const MISSING_CAPABILITY = -32021;

/**
 * A 2026-07-28 request that asked for a user's confirmation without declaring elicitation is
 * answered by the SDK with -32021, HTTP 400, and its own text ("Cannot request input
 * 'confirm' …"), which clients show their model as a generic failure to retry. The code and
 * `data.requiredCapabilities` stay, as the revision requires; the message becomes the
 * service's explanation, the one a 2025-era client gets with `confirmation_required`.
 */
export async function explainMissingElicitation(response: Response, tool: string): Promise<Response> {
  if (response.status !== 400 || !response.headers.get('content-type')?.includes('application/json')) return response;
  const text = await response.text();
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const error = isObject(body) && isObject(body.error) ? body.error : undefined;
  const required = error && isObject(error.data) && isObject(error.data.requiredCapabilities) ? error.data.requiredCapabilities : undefined;
  if (!error || error.code !== MISSING_CAPABILITY || !required || !('elicitation' in required)) {
    return new Response(text, { status: response.status, statusText: response.statusText, headers: response.headers });
  }
  error.message = cannotAskMessage(tool, "this request's client capabilities declare no elicitation, so its client cannot be asked");
  const headers = new Headers(response.headers);
  headers.delete('content-length');
  return new Response(JSON.stringify(body), { status: response.status, statusText: response.statusText, headers });
}

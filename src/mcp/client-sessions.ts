import { randomUUID } from 'node:crypto';
import type { LegacyElicitation } from './legacy-elicitation.js';
import type { RpcMessage } from './request-messages.js';

/**
 * 2025-era clients declare their capabilities once, on `initialize`; this server is stateless
 * and used to remember them per agent connection, so of two clients on one token the last to
 * initialize decided for both (one that cannot elicit was sent an `elicitation/create` it
 * could not answer; one that can was told `confirmation_required`). So the answer to a
 * 2025-era `initialize` carries an `Mcp-Session-Id`, which 2025 clients send back on every
 * request (Streamable HTTP), and capabilities are remembered per connection and session id.
 *
 * The id names nothing else: the server keeps no stream or state under it, any request
 * without it is served as before, and one this process never issued finds no capabilities
 * (the client is treated as one that cannot elicit, as when its `initialize` went to another
 * instance).
 */
export const SESSION_HEADER = 'mcp-session-id';

/** Visible ASCII, as Streamable HTTP requires of a session id; anything else is ignored. */
const SESSION_ID = /^[\x21-\x7e]{1,128}$/;

/**
 * A fresh session id for a request that carries a 2025-era `initialize`, its capabilities
 * remembered under it (legacy-posts.ts remembers them per connection too, for a client that
 * sends no session id back); undefined for any other request.
 */
export function issueClientSession(messages: readonly RpcMessage[], caller: string, legacyElicitation: LegacyElicitation): string | undefined {
  const initialize = messages.find((m) => m.method === 'initialize');
  if (!initialize) return undefined;
  const session = randomUUID();
  legacyElicitation.remember(caller, clientKey(caller, session), initialize.params?.capabilities);
  return session;
}

/** The session id a request carries, when it is one this server could have issued. */
export function clientSessionOf(header: string | undefined): string | undefined {
  return header !== undefined && SESSION_ID.test(header) ? header : undefined;
}

/** The key a client's capabilities are remembered under: its connection, and its session when it has one. */
export function clientKey(caller: string, session: string | undefined): string {
  return session === undefined ? caller : `${caller}#${session}`;
}

/** The SDK's answer with the session id added (a response the SDK built may have immutable headers). */
export function withClientSession(response: Response, session: string): Response {
  const headers = new Headers(response.headers);
  headers.set(SESSION_HEADER, session);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

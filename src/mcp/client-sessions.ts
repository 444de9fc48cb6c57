import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import type { ClientCapabilities } from '@modelcontextprotocol/server';
import type { OperationContext } from '../domain/context.js';
import { confirmationKey } from '../domain/service-keys.js';
import { MODERN_PROTOCOL_VERSION } from './modern-requests.js';
import type { RpcMessage } from './request-messages.js';

/**
 * 2025-era clients declare their capabilities once, on `initialize`, and this server serves
 * every request statelessly. So the answer to a 2025-era `initialize` carries an
 * `Mcp-Session-Id` that holds what the client declared: `s1.<elicitation>.<nonce>.<mac>`, an
 * HMAC under a key derived from the service's confirmation key (kept in the database, shared
 * by every instance), over the agent connection, the declared elicitation modes and a random
 * nonce. 2025 clients send it back on every request (Streamable HTTP), so any instance can
 * read what this client declared without remembering anything: two clients on one token are
 * each served as they declared, no tenant's load can push another's client out, and no
 * request needs to reach the instance that served the `initialize`.
 *
 * A session id that does not verify for the calling connection (another server's, another
 * connection's, made before the key was rotated) is unknown: its request is answered 404, as
 * the 2025 revision's session management says, and the client starts a new session with
 * `initialize`. A request without the header is served with what the connection's last
 * `initialize` declared in this process (remembered-capabilities.ts), for a client that
 * never sends the id back.
 */
export const SESSION_HEADER = 'mcp-session-id';

const PREFIX = 's1';
/** Domain separation: the session key is derived from the confirmation key and signs session ids only. */
const KEY_LABEL = 'dfc.mcp.session.v1';
const SESSION_ID = /^s1\.([0-3])\.([A-Za-z0-9_-]{16})\.([A-Za-z0-9_-]{43})$/;

const sessionKeys = new WeakMap<Buffer, Buffer>();
async function sessionKey(ctx: Pick<OperationContext, 'db' | 'clock'>): Promise<Buffer> {
  const root = await confirmationKey(ctx);
  let key = sessionKeys.get(root);
  if (!key) {
    key = createHmac('sha256', root).update(KEY_LABEL).digest();
    sessionKeys.set(root, key);
  }
  return key;
}

/** The elicitation modes a client declared, as one digit: form 1, url 2 (an empty `elicitation` means form). */
function elicitationBits(capabilities: unknown): number {
  const elicitation = (capabilities as ClientCapabilities | undefined)?.elicitation;
  if (typeof elicitation !== 'object' || elicitation === null) return 0;
  const url = elicitation.url !== undefined;
  return (elicitation.form !== undefined || !url ? 1 : 0) + (url ? 2 : 0);
}

/** The capabilities a session id stands for: only what this server asks of a client (elicitation). */
function capabilitiesOf(bits: number): ClientCapabilities {
  if (bits === 0) return {};
  return { elicitation: { ...(bits & 1 ? { form: {} } : {}), ...(bits & 2 ? { url: {} } : {}) } };
}

const mac = (key: Buffer, caller: string, bits: string, nonce: string) => createHmac('sha256', key).update(`${caller}\n${bits}.${nonce}`).digest();

/** A fresh session id for a request that carries a 2025-era `initialize`; undefined for any other request. */
export async function issueClientSession(
  ctx: Pick<OperationContext, 'db' | 'clock'>,
  messages: readonly RpcMessage[],
  caller: string,
): Promise<string | undefined> {
  const initialize = messages.find((m) => m.method === 'initialize');
  if (!initialize) return undefined;
  const key = await sessionKey(ctx);
  const bits = String(elicitationBits(initialize.params?.capabilities));
  const nonce = randomBytes(12).toString('base64url');
  return `${PREFIX}.${bits}.${nonce}.${mac(key, caller, bits, nonce).toString('base64url')}`;
}

/** What a request's `Mcp-Session-Id` says: none sent (or none that applies), a known client's capabilities, or unknown. */
export type ClientSession =
  | { kind: 'none' }
  /** `nonce`: the session's own part of its id, what its resource subscriptions are kept under (session-resources.ts). */
  | { kind: 'known'; capabilities: ClientCapabilities; nonce: string }
  | { kind: 'unknown' };

/**
 * Reads the session id of a 2025-era request. A 2026-07-28 request has no sessions, and an
 * `initialize` starts a new one whatever it carries: for both the header is ignored.
 */
export async function clientSessionOf(
  ctx: Pick<OperationContext, 'db' | 'clock'>,
  headers: Headers,
  messages: readonly RpcMessage[],
  caller: string,
): Promise<ClientSession> {
  const header = headers.get(SESSION_HEADER);
  if (header === null) return { kind: 'none' };
  if (headers.get('mcp-protocol-version') === MODERN_PROTOCOL_VERSION || messages.some((m) => m.method === 'initialize')) return { kind: 'none' };
  const parts = SESSION_ID.exec(header);
  if (!parts) return { kind: 'unknown' };
  const [, bits, nonce, signature] = parts as unknown as [string, string, string, string];
  const expected = mac(await sessionKey(ctx), caller, bits, nonce);
  const given = Buffer.from(signature, 'base64url');
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return { kind: 'unknown' };
  return { kind: 'known', capabilities: capabilitiesOf(Number(bits)), nonce };
}

/** The 404 for an unknown session id (Streamable HTTP, 2025 revisions: the client then sends a new `initialize`). */
export function unknownSession(): Response {
  return Response.json(
    {
      jsonrpc: '2.0',
      error: {
        code: -32001,
        message:
          'Session not found: this Mcp-Session-Id was not issued to this agent connection (or no longer verifies). Send initialize again to start a new session.',
      },
      id: null,
    },
    { status: 404 },
  );
}

/** The SDK's answer with the session id added (a response the SDK built may have immutable headers). */
export function withClientSession(response: Response, session: string): Response {
  const headers = new Headers(response.headers);
  headers.set(SESSION_HEADER, session);
  return new Response(response.body, { status: response.status, statusText: response.statusText, headers });
}

import type { CredentialOf } from '../domain/context.js';
import type { InflightCalls } from './cancellation.js';
import type { LegacyElicitation } from './legacy-elicitation.js';
import type { RememberedCapabilities } from './remembered-capabilities.js';
import type { RpcMessage } from './request-messages.js';
import { callerKey } from './session.js';

/** A JSON-RPC response (to a request this server sent), not a request or a notification. */
const isResponse = (m: Record<string, unknown>) => m.method === undefined && m.id !== undefined && ('result' in m || 'error' in m);

/**
 * What a 2025-era client sends in POSTs of their own about other requests, over stateless
 * HTTP: a `notifications/cancelled` for a call still waiting (cancellation.ts), the
 * capabilities of its `initialize` (remembered per connection, for a client that sends no
 * session id back), and its answers to elicitations this process sent (legacy-elicitation.ts).
 * A request of nothing but such answers is answered 202 when each found the call waiting for
 * it, and 409 when one did not: the call is on another instance or over, and an answer
 * accepted here would be lost while that call waits. Otherwise the SDK is still handed the
 * messages and answers them as it would (a notification: 202).
 */
export function takeLegacyPosts(
  messages: RpcMessage[],
  credential: CredentialOf<'agent'>,
  inflight: InflightCalls,
  legacy: { elicitation: LegacyElicitation; capabilities: RememberedCapabilities },
): Response | undefined {
  const caller = callerKey(credential);
  for (const message of messages) {
    if (message.method === 'notifications/cancelled') inflight.cancel(caller, message.params?.requestId);
    if (message.method === 'initialize') legacy.capabilities.remember(credential.workspaceId, caller, message.params?.capabilities);
  }
  const responses = messages.filter((m) => isResponse(m as Record<string, unknown>));
  if (responses.length === 0 || responses.length !== messages.length) return undefined;
  if (legacy.elicitation.deliver(caller, responses)) return new Response(null, { status: 202 });
  return Response.json(
    {
      jsonrpc: '2.0',
      error: {
        code: -32600,
        message:
          'No call waits for this answer on this service instance: the call that asked is held by another instance, or it has ended (answered, dropped or expired). Nothing was confirmed. Behind several instances, route a session (Mcp-Session-Id) to one instance, or use the 2026-07-28 revision, whose confirmations any instance takes.',
      },
      id: null,
    },
    { status: 409 },
  );
}

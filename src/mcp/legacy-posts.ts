import type { CredentialOf } from '../domain/context.js';
import type { InflightCalls } from './cancellation.js';
import type { LegacyElicitation } from './legacy-elicitation.js';
import type { RpcMessage } from './request-messages.js';
import { callerKey } from './session.js';

/** A JSON-RPC response (to a request this server sent), not a request or a notification. */
const isResponse = (m: Record<string, unknown>) => m.method === undefined && m.id !== undefined && ('result' in m || 'error' in m);

/**
 * What a 2025-era client sends in POSTs of their own about other requests, over stateless
 * HTTP: a `notifications/cancelled` for a call still waiting (cancellation.ts), the
 * capabilities of its `initialize`, and its answers to elicitations this process sent
 * (legacy-elicitation.ts). Returns the 202 when the request was nothing but such answers,
 * delivered (answered as the SDK answers a posted response); otherwise the SDK is still
 * handed the messages and answers them as it would (a notification: 202).
 */
export function takeLegacyPosts(
  messages: RpcMessage[],
  credential: CredentialOf<'agent'>,
  inflight: InflightCalls,
  legacyElicitation: LegacyElicitation,
): Response | undefined {
  for (const message of messages) {
    if (message.method === 'notifications/cancelled') inflight.cancel(callerKey(credential), message.params?.requestId);
    if (message.method === 'initialize') legacyElicitation.remember(callerKey(credential), callerKey(credential), message.params?.capabilities);
  }
  const responses = messages.filter((m) => isResponse(m as Record<string, unknown>));
  if (responses.length > 0 && responses.length === messages.length && legacyElicitation.deliver(callerKey(credential), responses)) {
    return new Response(null, { status: 202 });
  }
  return undefined;
}

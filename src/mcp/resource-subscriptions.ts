import { ProtocolError, ProtocolErrorCode, type McpServer } from '@modelcontextprotocol/server';
import { subscribeSessionState, unsubscribeSessionState } from '../domain/session-resources.js';
import { resourceError } from './errors.js';
import type { McpSession } from './session.js';
import { stateResourceDevice } from './subscriptions/state-watch.js';

/**
 * `resources/subscribe` and `resources/unsubscribe` of a 2025-era session (docs/agents/state.md):
 * only `device://{deviceId}/state` notifies, and only for a device with a read function the
 * caller holds a live grant on (any other URI reads as not found, as resources/read answers
 * it). The subscription is kept under the session's id (session-resources.ts), and told on the
 * session's GET stream (subscriptions/session-stream.ts), whichever instance serves either. A
 * client that sends no `Mcp-Session-Id` back has no stream to be told on: its subscribe is
 * refused rather than accepted and never honoured.
 */
export function registerResourceSubscriptions(server: McpServer, session: McpSession): void {
  const { ctx, credential } = session;
  const target = (uri: string) => {
    const nonce = session.clientSession;
    if (nonce === undefined) {
      throw new ProtocolError(
        ProtocolErrorCode.InvalidRequest,
        'resources/subscribe needs a session: send the Mcp-Session-Id this server answered initialize with on every request, and open GET /mcp with it to be told of updates.',
      );
    }
    return { nonce, deviceId: stateResourceDevice(uri) };
  };
  server.server.setRequestHandler('resources/subscribe', async (request) => {
    const { uri } = request.params;
    const { nonce, deviceId } = target(uri);
    try {
      if (deviceId === undefined)
        throw new ProtocolError(ProtocolErrorCode.InvalidParams, `Only device://{deviceId}/state resources can be subscribed to: ${uri} sends no updates.`);
      await subscribeSessionState(ctx, credential, nonce, deviceId);
      return {};
    } catch (error) {
      if (error instanceof ProtocolError) throw error;
      throw resourceError(error, uri, ctx);
    }
  });
  server.server.setRequestHandler('resources/unsubscribe', async (request) => {
    const { uri } = request.params;
    const { nonce, deviceId } = target(uri);
    try {
      if (deviceId !== undefined) await unsubscribeSessionState(ctx, credential, nonce, deviceId);
      return {};
    } catch (error) {
      throw resourceError(error, uri, ctx);
    }
  });
}

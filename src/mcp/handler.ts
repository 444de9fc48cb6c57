import type { Context, Hono } from 'hono';
import type { Authenticator } from '../auth/authenticate.js';
import type { Config } from '../config.js';
import type { Logger } from '../domain/context.js';
import type { EventHub } from '../domain/event-hub.js';
import type { RateLimiter } from '../domain/rate-limits.js';
import { requestBaseUrl } from '../http/base-url.js';
import { withRequestId, type HttpEnv } from '../http/request.js';
import { cachedListAnswer } from './cached-list-answer.js';
import { createCallGateCache } from './call-gate-cache.js';
import { createInflightCalls } from './cancellation.js';
import { clientSessionOf, unknownSession } from './client-sessions.js';
import { callDeviceTool } from './device-tool-call.js';
import { directAnswer, directDeviceCall, type ServerInfo } from './direct-call.js';
import { createHttpGate } from './gate.js';
import { createHostPolicy } from './hosts.js';
import { createLegacyElicitation } from './legacy-elicitation.js';
import { takeLegacyPosts } from './legacy-posts.js';
import { createRememberedCapabilities } from './remembered-capabilities.js';
import { mountResourceMetadata, resourceMetadataUrl } from './resource-metadata.js';
import { createSdkAnswer } from './sdk-answer.js';
import { callerKey } from './session.js';
import { createListenAnswer } from './subscriptions/listen.js';
import { createSessionStreams } from './subscriptions/session-stream.js';
import { createListenSlots } from './subscriptions/slots.js';
import { createToolCallGate, pausedAnswer, pauseRefusal } from './tool-call-gate.js';
import { methodNotAllowed } from './transport-rules.js';
import { taskModeFor } from './tasks/task-methods.js';
import { createToolsListCache } from './tools-list-cache.js';

export interface McpDeps {
  config: Config;
  authenticator: Authenticator;
  /** The authenticator's limiter: each further message of a batch draws from the caller's bucket too. */
  limiter: RateLimiter;
  now: () => number;
  log: Logger;
  /** The service's event hub: a 2025-era notifications/cancelled travels on it to the instance running the call. */
  events: EventHub;
  /** Counts each POST /mcp message by method and by what answered it (src/metrics.ts). */
  metrics: { observeMcp(method: string, answeredBy: 'direct' | 'cache' | 'sdk'): void };
  version: string;
}

/**
 * Mounts `POST /mcp` and the protected-resource metadata on the service's Hono app, and
 * sends each request through the gate to one answer path (src/mcp/AGENTS.md):
 *   the HTTP gate (gate.ts: transport rules, bearer, body, batch)
 *   → 2025-era posts about other requests (legacy-posts.ts)
 *   → a current cached tools/list (cached-list-answer.ts)
 *   → the tools/call gate (tool-call-gate.ts: live grant, ceiling, kill switch)
 *   → a plain device tool call, answered directly (direct-call.ts)
 *   → everything else, answered by the SDK (sdk-answer.ts).
 * The cached list and the direct call are the hot paths, answered as the SDK would.
 */
export function mountMcp(app: Hono<HttpEnv>, deps: McpDeps): void {
  const { config, metrics } = deps;
  const base = config.publicBaseUrl;
  const metadataUrl = (c: Context<HttpEnv>) => resourceMetadataUrl(requestBaseUrl(c, config));
  mountResourceMetadata(app, config);

  const serverInfo = (name: string): ServerInfo => ({ name, title: 'Device function control', version: deps.version });
  const toolLists = createToolsListCache();
  // Device tool calls still waiting, for a 2025-era notifications/cancelled (cancellation.ts).
  const inflight = createInflightCalls(deps.events);
  // 2025-era elicitation over stateless HTTP: capabilities from initialize, answers to asks (legacy-elicitation.ts).
  const legacyElicitation = createLegacyElicitation(config.mcpConfirmations);
  // What a 2025-era connection that sends no session id back declared (remembered-capabilities.ts).
  const legacy = { elicitation: legacyElicitation, capabilities: createRememberedCapabilities() };
  const httpGate = createHttpGate({ ...deps, hosts: createHostPolicy(base, config.mcpAllowedHosts), metadataUrl });
  const toolCallGate = createToolCallGate({ inflight, callGate: createCallGateCache(), metadataUrl });
  // subscriptions/listen streams and 2025-era sessions' GET streams share one set of caps (slots.ts).
  const slots = createListenSlots(config.mcpListen);
  const listenAnswer = createListenAnswer({ clock: { ttlMs: config.actionsRetentionMs }, serverInfo, limits: config.mcpListen, slots });
  const sessionStream = createSessionStreams({ slots, limits: config.mcpListen });
  const sdkAnswer = createSdkAnswer({ config, log: deps.log, legacyElicitation, serverInfo, observe: (method) => metrics.observeMcp(method, 'sdk') });

  async function answer(c: Context<HttpEnv>): Promise<Response> {
    const request = await httpGate(c);
    if ('response' in request) return request.response;
    const { credential } = request;
    const ctx = c.get('context')(credential, 'mcp');

    // GET with a 2025-era session id: the session's stream of resource notifications (subscriptions/session-stream.ts).
    if ('stream' in request) {
      const session = await clientSessionOf(ctx, c.req.raw.headers, [], callerKey(credential));
      if (session.kind === 'unknown') return unknownSession();
      if (session.kind === 'none') return methodNotAllowed(c);
      return sessionStream(c, ctx, credential, session.nonce);
    }
    const { messages } = request;

    // A 2025-era session id this service did not issue to this connection: 404, the client initializes again.
    const clientSession = await clientSessionOf(ctx, c.req.raw.headers, messages, callerKey(credential));
    if (clientSession.kind === 'unknown') return unknownSession();

    const posted = takeLegacyPosts(messages, credential, inflight, legacy);
    if (posted) return posted;

    const listing = await cachedListAnswer(c, ctx, request, toolLists);
    if ('response' in listing) {
      metrics.observeMcp('tools/list', 'cache');
      return listing.response;
    }

    // subscriptions/listen: the caller's own notifications (subscriptions/listen.ts).
    const listened = await listenAnswer(c, ctx, request);
    if (listened) return listened;

    const gate = await toolCallGate(c, ctx, credential, messages);
    if ('response' in gate) return gate.response;

    // A device call of a client that declared MCP Tasks may answer with its action's task (tasks/).
    gate.session.taskFor = taskModeFor(messages, { ttlMs: config.actionsRetentionMs });
    const direct = request.parsedOk ? directDeviceCall(c.req.raw.headers, request.parsed, gate.session.tools) : undefined;
    if (direct) {
      metrics.observeMcp('tools/call', 'direct');
      // The pause switch is checked by the action's guarded insert: no read of its own.
      gate.session.pauseUnread = false;
      const result = await callDeviceTool(gate.session, direct.tool.fn, direct.args, { meta: direct.meta, id: direct.id });
      return pausedAnswer(c, result) ?? directAnswer(direct.id, result, serverInfo(ctx.settings.serviceName));
    }
    const paused = await pauseRefusal(c, gate.session);
    if (paused) return paused;

    gate.session.clientCapabilities = clientSession.kind === 'known' ? clientSession.capabilities : legacy.capabilities.recall(callerKey(credential));
    if (clientSession.kind === 'known') gate.session.clientSession = clientSession.nonce;
    const response = await sdkAnswer(c, ctx, request, gate.session);
    return listing.keep ? toolLists.keep(listing.keep.workspaceId, listing.keep.key, listing.keep, response) : response;
  }

  app.all('/mcp', async (c) => withRequestId(c, await answer(c)));
}

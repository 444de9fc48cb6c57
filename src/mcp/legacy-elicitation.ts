import { randomInt } from 'node:crypto';
import type { ClientCapabilities, McpServer } from '@modelcontextprotocol/server';

/**
 * 2025-era elicitation over this server's stateless HTTP (docs/agents/confirmation.md "User confirmation").
 *
 * On a 2025-era connection the SDK's legacy shim turns a tool's `input_required` into a real
 * `elicitation/create` request, sent on the tools/call's event stream, and waits for the
 * client's answer. Stateless serving (a fresh SDK server per POST) breaks that twice:
 *   - the per-request server never saw the client's `initialize`, so it does not know the
 *     client declared elicitation, and the shim refuses to ask;
 *   - the client POSTs its answer (a JSON-RPC response) as a request of its own, which the
 *     SDK hands to another fresh server that never asked.
 * So each 2025-era server is handed the capabilities the client declared (its session id
 * carries them: client-sessions.ts), and this keeps the servers with an ask outstanding, to
 * which a POSTed response is delivered. Each such server numbers its requests from a random
 * start, so two of one connection's concurrent asks do not share an id.
 *
 * The waiting call is in this process: behind several instances, the answer must reach the
 * instance that holds its call (routing by `Mcp-Session-Id`). An answer that finds no call
 * waiting here is refused (legacy-posts.ts), never accepted and dropped. 2026-07-28 clients
 * need none of this: their answer is a retry of the call, which any instance can check.
 *
 * A waiting ask costs its call's open stream and per-request server (about 110 KiB of heap,
 * docs/agents/confirmation.md "Limits"), so they are capped per connection and per instance, and each
 * is released when it is answered, its server closes (the client dropped the call) or its
 * wait ends.
 */

/** The SDK's request bookkeeping this module reads and seeds; private in the SDK (2.4). */
interface ServerInternals {
  _clientCapabilities?: ClientCapabilities;
  _requestMessageId: number;
  _responseHandlers: Map<number, unknown>;
  transport?: { onmessage?: (message: unknown) => void };
}

const internals = (server: McpServer) => server.server as unknown as ServerInternals;

/** How many 2025-era asks may wait for an answer at once, and for how long (docs/agents/confirmation.md "Limits"). */
export interface PendingPromptLimits {
  perConnection: number;
  /** A workspace's connections together: one tenant cannot take every place of an instance. */
  perWorkspace: number;
  perInstance: number;
  waitMs: number;
}

/** Why an ask was not made: which bound it would pass, and that bound. */
export interface PromptRefusal {
  scope: 'connection' | 'workspace' | 'instance';
  limit: number;
}

export interface LegacyElicitation {
  /** Readies a 2025-era per-request server: the client's declared capabilities (if known), random request ids. */
  prepare(server: McpServer, capabilities: ClientCapabilities | undefined): void;
  /**
   * Holds the server as one waiting for its client's answer until it closes or `waitMs` passes;
   * a refusal when the connection, its workspace or the instance already has as many waiting as
   * allowed.
   */
  hold(caller: string, workspaceId: string, server: McpServer): PromptRefusal | undefined;
  /** Delivers JSON-RPC responses to the caller's waiting servers; true when every one found its server. */
  deliver(caller: string, responses: readonly { id?: unknown }[]): boolean;
  /** How many asks wait now, in all. */
  pending(): number;
}

export function createLegacyElicitation(limits: PendingPromptLimits): LegacyElicitation {
  const waiting = new Map<string, Set<McpServer>>();
  const perWorkspace = new Map<string, number>();
  let pending = 0;

  return {
    prepare(server, capabilities) {
      const sdk = internals(server);
      if (capabilities) sdk._clientCapabilities = capabilities;
      sdk._requestMessageId = randomInt(1, 2 ** 31);
    },
    hold(caller, workspaceId, server) {
      const set = waiting.get(caller) ?? new Set();
      // A server that asks again (an answer of the wrong kind) keeps the place it holds.
      if (set.has(server)) return undefined;
      const inWorkspace = perWorkspace.get(workspaceId) ?? 0;
      if (set.size >= limits.perConnection) return { scope: 'connection', limit: limits.perConnection };
      if (inWorkspace >= limits.perWorkspace) return { scope: 'workspace', limit: limits.perWorkspace };
      if (pending >= limits.perInstance) return { scope: 'instance', limit: limits.perInstance };
      waiting.set(caller, set.add(server));
      perWorkspace.set(workspaceId, inWorkspace + 1);
      pending += 1;
      const release = () => {
        clearTimeout(timer);
        if (!set.delete(server)) return;
        pending -= 1;
        const left = (perWorkspace.get(workspaceId) ?? 1) - 1;
        if (left > 0) perWorkspace.set(workspaceId, left);
        else perWorkspace.delete(workspaceId);
        if (set.size === 0 && waiting.get(caller) === set) waiting.delete(caller);
      };
      const timer = setTimeout(release, limits.waitMs);
      timer.unref();
      const closed = server.server.onclose;
      server.server.onclose = () => {
        release();
        closed?.();
      };
      return undefined;
    },
    deliver(caller, responses) {
      const servers = [...(waiting.get(caller) ?? [])];
      let all = true;
      for (const response of responses) {
        const server = servers.find((s) => internals(s)._responseHandlers.has(response.id as number));
        const onmessage = server && internals(server).transport?.onmessage;
        if (onmessage) onmessage(response);
        else all = false;
      }
      return all;
    },
    pending: () => pending,
  };
}

import type { CredentialOf } from '../../domain/context.js';
import { DomainError } from '../../domain/errors.js';

/**
 * How many subscriptions/listen streams (and 2025-era sessions' GET streams, session-stream.ts) may be open on one instance, and for how long
 * (docs/agents/tasks.md "Limits"). Each holds a socket, a bus subscription and database reads
 * every 2 seconds (its standing, its unfinished tasks), so one agent opening many cannot take an
 * instance's capacity, nor one tenant's agents together; a stream past its lifetime ends and the client listens again.
 */
export interface ListenLimits {
  perConnection: number;
  perWorkspace: number;
  perInstance: number;
  maxLifetimeMs: number;
  /** The most bytes one stream holds for a client that does not read them (event-sink.ts). */
  maxBufferedBytes: number;
  /** The most bytes of task notifications one stream tells (subscription.ts). */
  maxAnswerBytes: number;
}

/** How long a refused client waits before listening again. */
const RETRY_AFTER_SECONDS = 5;

export interface ListenSlots {
  /** A place for the caller's stream, and its release; throws when a bound is reached. */
  take(credential: CredentialOf<'agent'>): () => void;
}

export function createListenSlots(limits: ListenLimits): ListenSlots {
  const byConnection = new Map<string, number>();
  const byWorkspace = new Map<string, number>();
  let total = 0;
  const adjust = (counts: Map<string, number>, key: string, by: number) => {
    const next = (counts.get(key) ?? 0) + by;
    if (next > 0) counts.set(key, next);
    else counts.delete(key);
  };
  return {
    take(credential) {
      const { connectionId, workspaceId } = credential;
      const retry = { retryAfterSeconds: RETRY_AFTER_SECONDS };
      if ((byConnection.get(connectionId) ?? 0) >= limits.perConnection) {
        throw new DomainError(
          'capacity_exceeded',
          `This agent connection already has ${limits.perConnection} open MCP streams (subscriptions/listen, or a 2025-era session's GET stream) (MCP_LISTEN_PER_CONNECTION): end one first.`,
          retry,
        );
      }
      if ((byWorkspace.get(workspaceId) ?? 0) >= limits.perWorkspace) {
        throw new DomainError(
          'capacity_exceeded',
          `This workspace already has ${limits.perWorkspace} open MCP streams (subscriptions/listen and 2025-era session GET streams) (MCP_LISTEN_PER_WORKSPACE).`,
          retry,
        );
      }
      if (total >= limits.perInstance) {
        throw new DomainError(
          'unavailable',
          `This instance already serves ${limits.perInstance} MCP streams (MCP_LISTEN_PER_INSTANCE): listen again in ${RETRY_AFTER_SECONDS} s, to another instance if there is one.`,
          retry,
        );
      }
      adjust(byConnection, connectionId, 1);
      adjust(byWorkspace, workspaceId, 1);
      total += 1;
      let released = false;
      return () => {
        if (released) return;
        released = true;
        adjust(byConnection, connectionId, -1);
        adjust(byWorkspace, workspaceId, -1);
        total -= 1;
      };
    },
  };
}

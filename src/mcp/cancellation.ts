import { createHash } from 'node:crypto';
import type { EventHub } from '../domain/event-hub.js';
import type { ClientGone } from '../http/request.js';

/**
 * Client cancellation of device tool calls (docs/reference/rules.md "MCP").
 *
 * A call ends, and its action is withdrawn, when its client goes away or cancels it:
 *   - the response or connection is closed before the answer was written (`whenClientGone`,
 *     src/http/request.ts; 2026-07-28: this is how a client cancels; also any 2025 stream);
 *   - a 2025-era `notifications/cancelled` names the call's JSON-RPC id. The service is
 *     stateless, so that notification is a POST of its own, served by another per-request
 *     server that knows nothing of the call, maybe on another instance: it is published on
 *     the event hub as `work-cancelled` (the shared bus with REDIS_URL, docs/operators/scale-out.md "What
 *     instances share") and each instance's registry aborts the calls it runs.
 *
 * Calls are found by caller (workspace, principal, agent connection) and request id: a caller
 * can cancel only its own calls. Two clients sharing one token and one id would both be
 * cancelled by either; the ids a client chooses are its own business (MCP "Cancellation").
 */
export interface CallCancellation {
  /** Aborts when the client goes away or cancels this call. */
  signal: AbortSignal;
  /** The call is over (answered or cancelled): a later notification finds nothing. */
  release(): void;
}

export interface InflightCalls {
  /** Tracks one call while it runs; `clientGone` tells when its HTTP client went away. */
  track(caller: string, id: string | number | undefined, clientGone: ClientGone): CallCancellation;
  /** A `notifications/cancelled` for `id` from `caller`: aborts the calls it names, if running, on any instance. */
  cancel(caller: string, id: unknown): void;
}

/**
 * The `work-cancelled` key: prefixed with the surface, so other users of the event type never
 * collide, and hashed, so the shared bus shows no principal or connection
 * (docs/operators/scale-out-security.md).
 */
const keyOf = (caller: string, id: string | number) =>
  createHash('sha256')
    .update(`mcp-call\n${caller}\n${typeof id}:${String(id)}`)
    .digest('hex');

export function createInflightCalls(events: EventHub): InflightCalls {
  const running = new Map<string, Set<AbortController>>();
  // Lives as long as the hub: one registry per app, made once at start.
  events.subscribe((event) => {
    if (event.type !== 'work-cancelled') return;
    for (const controller of running.get(event.key) ?? []) controller.abort();
  });
  return {
    track(caller, id, clientGone) {
      // One controller that the client's going away and a notification both abort (not
      // AbortSignal.any over two signals, which costs a signal and its bookkeeping more).
      const controller = new AbortController();
      const stopWatching = clientGone(() => controller.abort(new Error('the client went away before the answer')));
      if (id === undefined) return { signal: controller.signal, release: stopWatching };
      const key = keyOf(caller, id);
      const calls = running.get(key) ?? new Set();
      calls.add(controller);
      running.set(key, calls);
      return {
        signal: controller.signal,
        release() {
          stopWatching();
          calls.delete(controller);
          if (calls.size === 0 && running.get(key) === calls) running.delete(key);
        },
      };
    },
    cancel(caller, id) {
      if (typeof id !== 'string' && typeof id !== 'number') return;
      // Delivered here at once, and to the other instances through the shared bus.
      events.publish({ type: 'work-cancelled', key: keyOf(caller, id) });
    },
  };
}

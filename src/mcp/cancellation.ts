/**
 * Client cancellation of device tool calls (docs/rules.md "MCP", issue 14 rule 3).
 *
 * A call ends, and its action is withdrawn, when its client goes away or cancels it:
 *   - the HTTP request's signal aborts when the response or connection is closed before the
 *     answer was written (2026-07-28: this is how a client cancels; also any 2025 stream);
 *   - a 2025-era `notifications/cancelled` names the call's JSON-RPC id. The service is
 *     stateless, so that notification is a POST of its own, served by another per-request
 *     server that knows nothing of the call: this registry carries it across.
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
  /** Tracks one call while it runs; `requestSignal` is its HTTP request's. */
  track(caller: string, id: string | number | undefined, requestSignal: AbortSignal): CallCancellation;
  /** A `notifications/cancelled` for `id` from `caller`: aborts the calls it names, if running. */
  cancel(caller: string, id: unknown): void;
}

const keyOf = (caller: string, id: string | number) => `${caller}\n${typeof id}:${String(id)}`;

export function createInflightCalls(): InflightCalls {
  const running = new Map<string, Set<AbortController>>();
  return {
    track(caller, id, requestSignal) {
      const controller = new AbortController();
      const signal = AbortSignal.any([requestSignal, controller.signal]);
      if (id === undefined) return { signal, release: () => {} };
      const key = keyOf(caller, id);
      const calls = running.get(key) ?? new Set();
      calls.add(controller);
      running.set(key, calls);
      return {
        signal,
        release() {
          calls.delete(controller);
          if (calls.size === 0 && running.get(key) === calls) running.delete(key);
        },
      };
    },
    cancel(caller, id) {
      if (typeof id !== 'string' && typeof id !== 'number') return;
      for (const controller of running.get(keyOf(caller, id)) ?? []) controller.abort();
    },
  };
}

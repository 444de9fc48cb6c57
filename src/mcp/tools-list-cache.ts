import { FairCache, type FairBounds } from '../domain/fair-cache.js';
import { isObject, plainModernRequest } from './modern-requests.js';

/**
 * A per-caller cache of the modern `tools/list` answer (docs/contributors/performance-history.md "What the
 * profiles showed, and what changed": a principal with 1,000 functions paid a 1,000-row
 * query, 1,000 schema parses, 1,000 SDK tool registrations and a 3 MB JSON serialisation on
 * every call, ~50× a /healthz round trip).
 *
 * What is cached is the SDK's own answer: a miss goes through the SDK exactly as before, and
 * its `result` is kept, serialised once. A hit answers the same bytes with the request's id.
 * An entry is used only while
 *   - the workspace's functions_version (bumped by trigger with every write to grants,
 *     capabilities and devices, migration 0006) is the one read before the entry was built
 *     (with the caller's credential: `functionsVersion`),
 *   - the clock is before the earliest expiry among the caller's live grants, and
 *   - the key matches: workspace, principal, access ceiling (an OAuth token's scope is
 *     already part of its ceiling) and whether device controls are enabled.
 * The filter is UX, the check is correctness: tools/call re-checks the live grant on every
 * call whatever this cache says (src/mcp/tool-call-gate.ts).
 *
 * Only a request the SDK would answer with exactly that result takes the fast path: one
 * modern (2026-07-28) `tools/list` with matching routing headers, at most a cursor in its params, nothing in
 * `_meta` but the protocol version, client capabilities and client info. Anything else, and
 * every 2025-era request, goes to the SDK.
 */

/**
 * The id and page cursor of a request eligible for the cached answer, or undefined to let the
 * SDK answer. Each page is its own entry (toolsListKey): an invalid cursor is answered -32602
 * by the SDK and never kept, so only the caller's real pages take room.
 */
export function cacheableToolsList(
  headers: Parameters<typeof plainModernRequest>[0],
  message: unknown,
): { id: string | number; cursor: string | undefined } | undefined {
  const request = plainModernRequest(headers, message, 'tools/list', { paramKeys: ['cursor'] });
  if (!request) return undefined;
  const { cursor } = request.params;
  if (cursor !== undefined && typeof cursor !== 'string') return undefined;
  return { id: request.id, cursor };
}

interface Entry {
  version: number;
  validUntil: number;
  /** `JSON.stringify(result)` of the SDK's answer, UTF-8 encoded once. */
  result: Buffer;
  headers: Record<string, string>;
}

/** A cached answer: its headers and its body in parts, the cached bytes among them, never copied into one buffer. */
export interface CachedAnswer {
  headers: Record<string, string>;
  parts: Buffer[];
}

export interface ToolsListCache {
  /** The cached answer for this request id, when the entry is still valid. */
  answer(workspaceId: string, key: string, state: { version: number; now: number }, id: string | number): CachedAnswer | undefined;
  /** Keeps the SDK's answer (a 200 JSON-RPC success) for `key`; returns it for sending. */
  keep(workspaceId: string, key: string, state: { version: number; validUntil: number }, response: Response): Promise<Response>;
}

/**
 * Entries kept: 1,000 in all, 100 for one workspace (its principals' pages). A workspace past
 * its bound loses its own least recently used entries; past the total, the largest workspace
 * loses first (src/domain/fair-cache.ts), so no workspace's lists push out another's.
 */
export const TOOLS_LIST_BOUNDS: FairBounds = { perPartition: 100, total: 1000 };

const RESULT_HEAD = Buffer.from('{"result":');

/**
 * The kill switch is part of the key: it changes which tools the list offers (tools.ts
 * `registerTools`), so an answer built on one side of a flip is never served on the other.
 */
export function toolsListKey(workspaceId: string, principal: string, access: string, controlsEnabled: boolean, cursor: string | undefined): string {
  return JSON.stringify([workspaceId, principal, access, controlsEnabled, cursor ?? null]);
}

export function createToolsListCache(bounds: FairBounds = TOOLS_LIST_BOUNDS): ToolsListCache {
  const entries = new FairCache<Entry>(bounds);
  return {
    answer(workspaceId, key, state, id) {
      // Read as the workspace's most recently used: the least recently used goes first.
      const entry = entries.get(workspaceId, key);
      if (!entry) return undefined;
      if (entry.version !== state.version || state.now >= entry.validUntil) {
        entries.delete(workspaceId, key);
        return undefined;
      }
      // The bytes encoded once, sent as they are: no new multi-megabyte string, and no copy
      // into one buffer either (src/http/request.ts `answerInParts`).
      return { headers: entry.headers, parts: [RESULT_HEAD, entry.result, Buffer.from(`,"jsonrpc":"2.0","id":${JSON.stringify(id)}}`)] };
    },
    async keep(workspaceId, key, state, response) {
      const type = response.headers.get('content-type') ?? '';
      if (response.status !== 200 || !type.includes('application/json')) return response;
      const text = await response.text();
      const headers = Object.fromEntries([...response.headers].filter(([name]) => name !== 'content-length'));
      try {
        const message = JSON.parse(text) as { result?: unknown; error?: unknown };
        if (isObject(message.result) && message.error === undefined) {
          entries.set(workspaceId, key, { version: state.version, validUntil: state.validUntil, result: Buffer.from(JSON.stringify(message.result)), headers });
        }
      } catch {
        // Not JSON after all: answer it as it came, keep nothing.
      }
      return new Response(text, { status: response.status, headers });
    },
  };
}

import { FairCache, type FairBounds } from '../domain/fair-cache.js';
import type { DeviceTool } from './device-tool-names.js';

/**
 * What the tools/call gate read for a caller and a tool name's device id prefix: the device
 * tools that prefix can point at (src/mcp/tool-call-gate.ts). Every device tool call
 * read them afresh; an entry now stands in for that read under the same conditions as the
 * `tools/list` cache (src/mcp/tools-list-cache.ts):
 *   - the workspace's functions_version, bumped by trigger with every write to grants,
 *     capabilities and devices, is the one read before the entry was built, and
 *   - the clock is before the earliest expiry among the caller's live grants.
 * The version comes with the caller's credential, read in the statement that found its token
 * (`functionsVersion`), so a hit reads nothing. The gate's answer is the listing's answer;
 * the permission itself is checked again, live, by the guarded insert that creates the action
 * and by the claim that hands it out (docs/reference/rules.md "Access"), whatever the gate found.
 *
 * Entries are frozen: requests share them, and nothing may change one after it was kept.
 * The cache holds at most `CALL_GATE_BOUNDS` of the kept functions as JSON text: callers and
 * devices are the clients' to multiply, and a manifest may be up to the 16 KiB body limit, so a
 * count alone would not bound the memory. Each workspace has a bound of its own and loses its
 * own oldest kept entries past it; past the total, the largest workspace loses first
 * (src/domain/fair-cache.ts), so no workspace's calls push out another's entries.
 */
export interface CallGateCache {
  tools(workspaceId: string, key: string, state: { version: number; now: number }): readonly DeviceTool[] | undefined;
  keep(workspaceId: string, key: string, entry: { version: number; validUntil: number; tools: DeviceTool[] }): readonly DeviceTool[];
}

/** Bytes of JSON text: 16 MiB in all, a quarter of it for one workspace. */
export const CALL_GATE_BOUNDS: FairBounds = { perPartition: 4 * 1024 * 1024, total: 16 * 1024 * 1024 };

/** The key: whose tools they are (a ceiling changes which functions count) and which devices they are on. */
export function callGateKey(workspaceId: string, principal: string, access: string, deviceIdPrefix: string): string {
  return JSON.stringify([workspaceId, principal, access, deviceIdPrefix]);
}

interface Entry {
  version: number;
  validUntil: number;
  tools: readonly DeviceTool[];
  /** Its functions' size as JSON text: what it counts against the cache's bound. */
  textBytes: number;
}

export function createCallGateCache(bounds: FairBounds = CALL_GATE_BOUNDS): CallGateCache {
  const entries = new FairCache<Entry>(bounds, (entry) => entry.textBytes);
  return {
    tools(workspaceId, key, state) {
      // The oldest kept entry goes first: a hit does not renew it.
      const entry = entries.peek(workspaceId, key);
      if (!entry) return undefined;
      if (entry.version !== state.version || state.now >= entry.validUntil) {
        entries.delete(workspaceId, key);
        return undefined;
      }
      return entry.tools;
    },
    keep(workspaceId, key, { version, validUntil, tools }) {
      const frozen = Object.freeze(tools.map((tool) => deepFreeze(tool)));
      const textBytes = tools.reduce((sum, tool) => sum + JSON.stringify(tool).length, 0);
      // One larger than its workspace's bound is answered and not kept.
      entries.set(workspaceId, key, { version, validUntil, tools: frozen, textBytes });
      return frozen;
    },
  };
}

function deepFreeze<T>(value: T): T {
  if (typeof value === 'object' && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const child of Object.values(value)) deepFreeze(child);
  }
  return value;
}

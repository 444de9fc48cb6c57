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
 * The cache holds at most `maxTextBytes` of the kept functions as JSON text, oldest kept
 * entry out first: callers and devices are the clients' to multiply, and a manifest may be
 * up to the 16 KiB body limit, so a count alone would not bound the memory.
 */
export interface CallGateCache {
  tools(key: string, state: { version: number; now: number }): readonly DeviceTool[] | undefined;
  keep(key: string, entry: { version: number; validUntil: number; tools: DeviceTool[] }): readonly DeviceTool[];
}

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

export function createCallGateCache(maxTextBytes = 16 * 1024 * 1024): CallGateCache {
  const entries = new Map<string, Entry>();
  let heldBytes = 0;
  const drop = (key: string) => {
    const entry = entries.get(key);
    if (!entry) return;
    heldBytes -= entry.textBytes;
    entries.delete(key);
  };
  return {
    tools(key, state) {
      const entry = entries.get(key);
      if (!entry) return undefined;
      if (entry.version !== state.version || state.now >= entry.validUntil) {
        drop(key);
        return undefined;
      }
      return entry.tools;
    },
    keep(key, { version, validUntil, tools }) {
      const frozen = Object.freeze(tools.map((tool) => deepFreeze(tool)));
      const textBytes = tools.reduce((sum, tool) => sum + JSON.stringify(tool).length, 0);
      drop(key);
      entries.set(key, { version, validUntil, tools: frozen, textBytes });
      heldBytes += textBytes;
      // The oldest kept entry goes first (a Map iterates in insertion order); one larger than
      // the whole bound is answered and not kept.
      while (heldBytes > maxTextBytes) drop(entries.keys().next().value!);
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

import type { ClientCapabilities } from '@modelcontextprotocol/server';

/**
 * What a 2025-era agent connection's last `initialize` declared, for a client that sends no
 * `Mcp-Session-Id` back (a client that does carries its capabilities in it: client-sessions.ts).
 * In this process only, and bounded so that no tenant's load pushes out another's clients:
 *   - each workspace keeps at most `perWorkspace` connections, forgetting its own least
 *     recently used first;
 *   - the instance keeps at most `total`; past it, a workspace holding the most gives up its
 *     least recently used: the one that just grew when it is among them (a flood of newcomers
 *     pushes out none of the clients already kept), else another. That workspace holds more
 *     than the average (total ÷ workspaces), so a workspace under its fair share never loses a
 *     client to another's load.
 * A forgotten client is served as one that cannot elicit until it sends `initialize` again.
 */
export interface CapabilityBounds {
  total: number;
  perWorkspace: number;
}

/** The defaults: at most 10,000 connections on an instance, 1,000 of one workspace. */
export const REMEMBERED_CAPABILITIES: CapabilityBounds = { total: 10_000, perWorkspace: 1_000 };

export interface RememberedCapabilities {
  remember(workspaceId: string, key: string, capabilities: unknown): void;
  /** What `key` declared, when it is remembered (and now its most recently used). */
  recall(key: string): ClientCapabilities | undefined;
  /** How many clients are remembered, in all and for one workspace. */
  size(workspaceId?: string): number;
}

export function createRememberedCapabilities(bounds: CapabilityBounds = REMEMBERED_CAPABILITIES): RememberedCapabilities {
  // Per workspace, its keys least recently used first (a Map keeps insertion order).
  const byWorkspace = new Map<string, Map<string, ClientCapabilities>>();
  const workspaceOf = new Map<string, string>();
  // Workspaces by how many they hold, and the largest count: the one to shrink found in O(1).
  const bySize = new Map<number, Set<string>>();
  let largest = 0;
  let total = 0;

  const resize = (workspaceId: string, from: number, to: number) => {
    const old = bySize.get(from);
    old?.delete(workspaceId);
    if (old?.size === 0) bySize.delete(from);
    if (to > 0) bySize.set(to, (bySize.get(to) ?? new Set()).add(workspaceId));
    if (to > largest) largest = to;
    while (largest > 0 && !bySize.has(largest)) largest -= 1;
  };
  const forget = (key: string) => {
    const workspaceId = workspaceOf.get(key);
    if (workspaceId === undefined) return;
    const own = byWorkspace.get(workspaceId)!;
    own.delete(key);
    workspaceOf.delete(key);
    total -= 1;
    resize(workspaceId, own.size + 1, own.size);
    if (own.size === 0) byWorkspace.delete(workspaceId);
  };
  const oldestOf = (workspaceId: string) => byWorkspace.get(workspaceId)!.keys().next().value!;

  return {
    remember(workspaceId, key, declared) {
      if (typeof declared !== 'object' || declared === null) return;
      forget(key);
      const own = byWorkspace.get(workspaceId) ?? new Map<string, ClientCapabilities>();
      byWorkspace.set(workspaceId, own.set(key, declared as ClientCapabilities));
      workspaceOf.set(key, workspaceId);
      total += 1;
      resize(workspaceId, own.size - 1, own.size);
      if (own.size > bounds.perWorkspace) forget(oldestOf(workspaceId));
      if (total > bounds.total) forget(oldestOf(own.size === largest ? workspaceId : bySize.get(largest)!.values().next().value!));
    },
    recall(key) {
      const workspaceId = workspaceOf.get(key);
      if (workspaceId === undefined) return undefined;
      const own = byWorkspace.get(workspaceId)!;
      const declared = own.get(key)!;
      own.delete(key);
      own.set(key, declared);
      return declared;
    },
    size: (workspaceId) => (workspaceId === undefined ? total : (byWorkspace.get(workspaceId)?.size ?? 0)),
  };
}

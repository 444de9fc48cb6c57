import { createHash } from 'node:crypto';
import type { CallableFunction } from '../domain/functions.js';

export interface DeviceTool {
  name: string;
  fn: CallableFunction;
}

// ---------------------------------------------------------------------------------------
// Tool names (docs/reference/rules.md "MCP"): ^[a-zA-Z0-9_-]{1,40}$, the alphabet every major LLM API
// accepts for a function name, and short enough that a client's prefix still fits their 64
// (Claude Code names a tool `mcp__<server>__<tool>`); containing the capability name where it
// fits, stable across calls and restarts, and unique per caller.
//
//   <stem>__<first 12 hex digits of the device id>      e.g. set_power__3f2c9a01b7e4
//
// - The stem is the capability name when it is in the alphabet. Capability names are
//   ^[a-z][a-z0-9_.-]{0,63}$, so only a dot falls outside: `scene.recall` becomes
//   `scene_recall_` plus 8 hex digits of SHA-256(capability), so it does not take the name of
//   a capability that really is `scene_recall` on the same device (a device that names one
//   `scene_recall_<those digits>` meets the last rule below), and its name depends on nothing
//   but the capability and the device.
// - The 12 hex digits are the first 48 random bits of the device's UUIDv4, so the name does
//   not depend on which other devices the caller can see: it is stable while grants change.
// - A stem longer than 26 characters keeps its first 17 and gets `_` plus 8 hex digits of
//   SHA-256(stem), so the name still fits 40. Names that fitted already are unchanged.
// - If two of one caller's functions would still share a name (the same capability on two
//   devices whose ids share their first 48 bits: about one in 10^9 for 1,000 devices), both
//   use the first 24 hex digits of their device id instead (92 random bits; stem budget 14).
// - A device chooses its capability names, so it can make two of them equal even then (two
//   long names with a common start and the same 8 hex digits of SHA-256: a birthday search of
//   about a second). Those functions are on one device; sorted by capability name, the first
//   keeps the name and each other one takes the first free `<stem>_<n>__<24 hex>` (n from
//   2). Such a name depends only on that device's colliding functions, so it is the same
//   whether computed from all the caller's functions or from one device's (a tools/call), and
//   no device can make tools/list fail.
// - Fixed tools have no `__`, so the two families can never collide.
// ---------------------------------------------------------------------------------------

/** The longest device tool name. */
export const MAX_TOOL_NAME_CHARS = 40;
/** Hex digits of the device id in a name whose 12 would collide. */
const LONG_ID_DIGITS = 24;

export const DEVICE_TOOL_PATTERN = /^[a-z][a-z0-9_-]*__(?:[0-9a-f]{12}|[0-9a-f]{24})$/;

/**
 * The start of the device id a device tool name points at (`3f2c9a01-b7e4` for
 * `set_power__3f2c9a01b7e4`). Every function that could share the name has a device id with
 * the same start, so the caller's functions on those devices alone name it exactly as the
 * full list would: a tools/call needs only them, not all the caller's functions.
 */
export function deviceIdPrefixOf(toolName: string): string {
  const hex = toolName.slice(toolName.lastIndexOf('__') + 2, toolName.lastIndexOf('__') + 14);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}`;
}

const sha8 = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 8);

/** The capability name in the tool-name alphabet (see above). */
function stemOf(capability: string): string {
  return /^[a-zA-Z0-9_-]+$/.test(capability) ? capability : `${capability.replace(/[^a-zA-Z0-9_-]/g, '_')}_${sha8(capability)}`;
}

function fitCapability(capability: string, budget: number): string {
  const stem = stemOf(capability);
  if (stem.length <= budget) return stem;
  return `${stem.slice(0, budget - 9)}_${sha8(stem)}`;
}

function nameFor(fn: Pick<CallableFunction, 'capability' | 'deviceId'>, idDigits: number): string {
  const hex = fn.deviceId.replaceAll('-', '').toLowerCase();
  return `${fitCapability(fn.capability, MAX_TOOL_NAME_CHARS - 2 - idDigits)}__${hex.slice(0, idDigits)}`;
}

/**
 * The tool name of one device function when none of the caller's other functions shares it
 * (all but the rare cases above): what a client or a test can compute from the capability and
 * the device id alone.
 */
export function deviceToolName(capability: string, deviceId: string): string {
  return nameFor({ capability, deviceId }, 12);
}

/** The caller's device tools in the order of `functions` (already deterministic: device, then manifest order). */
export function deviceToolNames(functions: readonly CallableFunction[]): DeviceTool[] {
  const short = functions.map((fn) => nameFor(fn, 12));
  const counts = new Map<string, number>();
  for (const name of short) counts.set(name, (counts.get(name) ?? 0) + 1);
  const names = functions.map((fn, index) => (counts.get(short[index]!)! > 1 ? nameFor(fn, LONG_ID_DIGITS) : short[index]!));

  const holders = new Map<string, number[]>();
  names.forEach((name, index) => holders.set(name, [...(holders.get(name) ?? []), index]));
  const taken = new Set(names);
  for (const indexes of holders.values()) {
    if (indexes.length < 2) continue;
    const byCapability = indexes.sort((a, b) => (functions[a]!.capability < functions[b]!.capability ? -1 : 1));
    for (const index of byCapability.slice(1)) {
      const fn = functions[index]!;
      const hex = fn.deviceId.replaceAll('-', '').toLowerCase().slice(0, LONG_ID_DIGITS);
      let candidate: string;
      for (let n = 2; ; n++) {
        const suffix = `_${n}`;
        candidate = `${fitCapability(fn.capability, MAX_TOOL_NAME_CHARS - 2 - LONG_ID_DIGITS - suffix.length)}${suffix}__${hex}`;
        if (!taken.has(candidate)) break;
      }
      taken.add(candidate);
      names[index] = candidate;
    }
  }
  return functions.map((fn, index) => ({ name: names[index]!, fn }));
}

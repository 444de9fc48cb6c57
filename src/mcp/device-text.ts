import type { CallableFunction } from '../domain/functions.js';

/**
 * Text a device wrote (device, gateway and service names, function descriptions), rendered
 * into what an agent's model reads: tool titles and descriptions and the call summary.
 * Stored data stays as the device published it (REST and `list_functions` return it as
 * data); only this rendering is cleaned, so that a device cannot make its words pass for the
 * service's:
 * - control characters (C0, C1: newlines among them), format characters (general category
 *   Cf: bidirectional formatting such as U+202E, zero-width and invisible characters, the
 *   soft hyphen, U+180E, the interlinear annotation characters U+FFF9–U+FFFB and the Unicode
 *   tag characters U+E0000–U+E007F that "ASCII smuggling" hides text in), variation
 *   selectors, the Hangul fillers (U+115F, U+1160, U+3164, U+FFA0) and line/paragraph
 *   separators become one space: nothing can reorder, hide or break the sentence around it;
 * - the result is capped, in code points, so one device cannot fill a tools/list;
 * - callers put it in JSON quotes (`"` and `\` escaped), so it cannot close its own quote.
 *
 * The same cleaning applies to the device's words in what `list_devices`, `list_functions`
 * and the `device://` resources answer over MCP (deviceForAgent, functionForAgent below).
 */
const UNSAFE = /[\p{Cc}\p{Cf}\p{Zl}\p{Zp}\p{Variation_Selector}\u115f\u1160\u2065\u3164\uffa0\u{e0000}-\u{e007f}]+/gu;

/** A device, gateway or service name as shown to agents. */
export const MAX_DEVICE_NAME_CHARS = 64;
/** A function's description as shown to agents in a tool description (a manifest may store up to 1,024). */
export const MAX_DESCRIPTION_CHARS = 200;
/** A function's description in list_functions, list_devices and device:// over MCP: the whole of what a manifest may store. */
export const MAX_STORED_DESCRIPTION_CHARS = 1024;

export function deviceText(text: string, max: number): string {
  const clean = text.replace(UNSAFE, ' ').replace(/\s+/g, ' ').trim();
  const chars = Array.from(clean);
  return chars.length <= max ? clean : `${chars.slice(0, max - 1).join('')}…`;
}

/** A quoted, cleaned device name: `"Desk lamp"`. */
export function quotedName(name: string): string {
  return JSON.stringify(deviceText(name, MAX_DEVICE_NAME_CHARS));
}

/**
 * A name in data answered over MCP. The record's schema gives the name as a string; one that
 * is nothing but unsafe characters cleans to empty, and reads as `?` so it stays visible.
 */
function nameForAgent(name: string): string {
  return deviceText(name, MAX_DEVICE_NAME_CHARS) || '?';
}

function descriptionForAgent<T extends { description?: string }>(item: T): T {
  return item.description === undefined ? item : { ...item, description: deviceText(item.description, MAX_STORED_DESCRIPTION_CHARS) };
}

/** A callable function (list_functions) as answered to an agent: its device's words cleaned, the rest as stored. */
export function functionForAgent<T extends { deviceName: string; parentName: string | null; description?: string }>(fn: T): T {
  return descriptionForAgent({ ...fn, deviceName: nameForAgent(fn.deviceName), parentName: fn.parentName === null ? null : nameForAgent(fn.parentName) });
}

/** A device record (list_devices, device://) as answered to an agent: its name and function descriptions cleaned. */
export function deviceForAgent<T extends { name: string; capabilities: { description?: string }[] }>(device: T): T {
  return { ...device, name: nameForAgent(device.name), capabilities: device.capabilities.map(descriptionForAgent) };
}

/** What names a device to an agent: its name and kind, and its gateway's. */
export type DevicePlace = Pick<CallableFunction, 'deviceName' | 'deviceKind' | 'parentId' | 'parentName'>;

/**
 * Where the device sits, in words: the description must name the device and its place. The
 * names are the device's own words, cleaned and quoted (device-text.ts).
 */
export function placeOf(fn: DevicePlace): string {
  const name = quotedName(fn.deviceName);
  const parent = fn.parentName !== null ? quotedName(fn.parentName) : 'its gateway';
  switch (fn.deviceKind) {
    case 'gateway':
      return `gateway ${name}`;
    case 'service':
      return `integration-wide service ${name} of gateway ${parent}`;
    default:
      return fn.parentId !== null ? `device ${name} behind gateway ${parent}` : `device ${name}`;
  }
}

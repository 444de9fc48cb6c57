/**
 * Text a device wrote (device, gateway and service names, function descriptions), rendered
 * into what an agent's model reads: tool titles and descriptions and the call summary.
 * Stored data stays as the device published it (REST and `list_functions` return it as
 * data); only this rendering is cleaned, so that a device cannot make its words pass for the
 * service's (issue 13 item 11):
 * - C0 and C1 controls (newlines among them), bidirectional formatting (U+061C, U+200E/F,
 *   U+202A–U+202E, U+2066–U+2069), zero-width and invisible characters (U+200B–U+200D,
 *   U+2060–U+2065, U+FEFF) and line/paragraph separators become one space: nothing can
 *   reorder, hide or break the sentence around it;
 * - the result is capped, in code points, so one device cannot fill a tools/list;
 * - callers put it in JSON quotes (`"` and `\` escaped), so it cannot close its own quote.
 */
// eslint-disable-next-line no-control-regex -- matching control characters is what this expression is for
const UNSAFE = /[\u0000-\u001f\u007f-\u009f\u061c\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff]+/g;

/** A device, gateway or service name as shown to agents. */
export const MAX_DEVICE_NAME_CHARS = 64;
/** A function's description as shown to agents (a manifest may store up to 1,024). */
export const MAX_DESCRIPTION_CHARS = 200;

export function deviceText(text: string, max: number): string {
  const clean = text.replace(UNSAFE, ' ').replace(/\s+/g, ' ').trim();
  const chars = Array.from(clean);
  return chars.length <= max ? clean : `${chars.slice(0, max - 1).join('')}…`;
}

/** A quoted, cleaned device name: `"Desk lamp"`. */
export function quotedName(name: string): string {
  return JSON.stringify(deviceText(name, MAX_DEVICE_NAME_CHARS));
}

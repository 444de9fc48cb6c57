/**
 * Text shown to a human who decides (docs/owners/approvals.md "What you see when you decide"): the
 * MCP confirmation ask and the owner's approvals inbox. An agent chooses the arguments and a
 * device its name, so either could hide words from the person saying yes, or make them read
 * as something else: a right-to-left override (U+202E) reverses what follows, zero-width
 * characters and Unicode tag characters (U+E0000–U+E007F) carry text no one sees.
 *
 * Such characters are not removed but shown: each becomes a visible marker naming its code
 * point, `⟨U+202E⟩`, so the human sees that something is there and what. What is marked:
 * - format characters (general category Cf): the bidirectional controls U+202A–U+202E,
 *   U+2066–U+2069, U+200E, U+200F and U+061C, the zero-width U+200B–U+200D, U+2060–U+2064,
 *   U+FEFF, U+180E, the tag characters, the soft hyphen;
 * - the other default-ignorable code points (variation selectors, the Hangul fillers,
 *   U+034F …), which render as nothing;
 * - control characters other than tab and line feed, and the line and paragraph separators.
 * The text is then capped: past `max` characters of the original, the rest is replaced by
 * `… (N more characters)`. The stored data is never changed; only what is shown is marked.
 */

/** Characters shown as a marker: see above. */
export const MARKED = /(?![\t\n])[\p{Cc}\p{Cf}\p{Default_Ignorable_Code_Point}\p{Zl}\p{Zp}]/u;

/** The MCP confirmation ask: the whole message the user reads. */
export const MAX_ASK_CHARS = 1000;
/** One field of an approval in the inbox: the arguments, a device or agent name. */
export const MAX_FIELD_CHARS = 1000;

/** The marker of one hidden character: `⟨U+202E⟩`. */
export function marker(char: string): string {
  return `⟨U+${char.codePointAt(0)!.toString(16).toUpperCase().padStart(4, '0')}⟩`;
}

/** `text` with every hidden character marked, cut after `max` characters (code points) with a visible count of the rest. */
export function humanText(text: string, max: number): string {
  const chars = Array.from(text);
  const shown = chars.length > max ? chars.slice(0, max) : chars;
  const marked = shown.map((char) => (MARKED.test(char) ? marker(char) : char)).join('');
  const rest = chars.length - shown.length;
  return rest > 0 ? `${marked}… (${rest} more character${rest === 1 ? '' : 's'})` : marked;
}

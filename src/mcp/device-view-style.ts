/**
 * The device view's style: the system font (no font is fetched), light unless the host's
 * theme or the reader's system asks for dark. Each colour pair keeps WCAG AA contrast in both
 * themes; a step's state is said in words too, never by colour alone.
 */
export const DEVICE_VIEW_STYLE = `
:root { color-scheme: light; --bg: #ffffff; --fg: #1b1b1b; --muted: #4d4d4d; --line: #8a8a8a; --accent: #0b57d0; --on-accent: #ffffff; --ok: #146c2e; --bad: #b3261e; }
:root[data-theme="dark"] { color-scheme: dark; --bg: #1c1c1e; --fg: #f0f0f0; --muted: #c4c4c4; --line: #8e8e8e; --accent: #a8c7fa; --on-accent: #0b1d3a; --ok: #86d993; --bad: #ffb4ab; }
@media (prefers-color-scheme: dark) {
  :root:not([data-theme="light"]) { color-scheme: dark; --bg: #1c1c1e; --fg: #f0f0f0; --muted: #c4c4c4; --line: #8e8e8e; --accent: #a8c7fa; --on-accent: #0b1d3a; --ok: #86d993; --bad: #ffb4ab; }
}
* { box-sizing: border-box; }
html, body { margin: 0; background: var(--bg); color: var(--fg); font: 15px/1.45 system-ui, -apple-system, "Segoe UI", sans-serif; }
main { padding: 12px 16px; max-width: 44rem; }
h1 { font-size: 1.25rem; margin: 0 0 4px; overflow-wrap: anywhere; }
h2 { font-size: 1rem; margin: 14px 0 6px; }
h3 { font-size: 0.95rem; margin: 10px 0 4px; }
p { margin: 4px 0; }
#status, #online, .when { color: var(--muted); }
ol { list-style: none; margin: 0; padding: 0; display: flex; flex-wrap: wrap; gap: 6px; }
li { border: 1px solid var(--line); border-radius: 999px; padding: 2px 10px; color: var(--muted); }
li[data-step="done"] { color: var(--fg); }
li[aria-current="step"] { border-color: var(--accent); border-width: 2px; color: var(--fg); font-weight: 600; }
li[data-outcome="good"] { border-color: var(--ok); color: var(--ok); }
li[data-outcome="bad"] { border-color: var(--bad); color: var(--bad); }
pre { margin: 0; padding: 8px; border: 1px solid var(--line); border-radius: 6px; white-space: pre-wrap; overflow-wrap: anywhere; font: 13px/1.4 ui-monospace, Menlo, Consolas, monospace; max-height: 12rem; overflow: auto; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 4px 8px 4px 0; border-bottom: 1px solid var(--line); vertical-align: top; }
td code { font: 13px/1.4 ui-monospace, Menlo, Consolas, monospace; overflow-wrap: anywhere; }
#error { color: var(--bad); font-weight: 600; overflow-wrap: anywhere; }
#controls { display: flex; gap: 8px; margin-top: 12px; }
button { font: inherit; padding: 6px 14px; border-radius: 6px; border: 1px solid var(--accent); background: var(--accent); color: var(--on-accent); cursor: pointer; }
#refresh, #open-console { background: transparent; color: var(--accent); }
button:disabled { opacity: 0.6; cursor: default; }
button:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
[hidden] { display: none !important; }
`;

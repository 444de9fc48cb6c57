import { iconRules } from './icons.js';

/**
 * The console's style sheet: a small design system. Tokens first (spacing on a 4 px grid, a
 * type scale of 1.2, colours as custom properties with a dark set under
 * `prefers-color-scheme: dark`), then the elements and the few components the screens use.
 * Every text and control colour pair keeps WCAG AA contrast (4.5:1) in both schemes; the
 * browser tests run axe-core on every screen in both.
 */

const TOKENS = `
:root {
  color-scheme: light dark;
  --space-1: .25rem; --space-2: .5rem; --space-3: .75rem; --space-4: 1rem; --space-6: 1.5rem; --space-8: 2rem;
  --text-sm: .833rem; --text-base: 1rem; --text-lg: 1.2rem; --text-xl: 1.44rem; --text-2xl: 1.728rem;
  --radius: .375rem; --font: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; --mono: ui-monospace, "SFMono-Regular", Menlo, monospace;
  --bg: #ffffff; --surface: #f5f6f8; --surface-2: #eceef2; --text: #1b1d21; --muted: #50555e; --border: #c9cdd4; --border-strong: #1b1d21;
  --accent: #1d4ed8; --accent-text: #ffffff; --link: #1d4ed8; --focus: #1d4ed8;
  --danger: #b3261e; --danger-bg: #fdecea; --warn: #8a4b00; --warn-bg: #fff4e0; --ok: #1e6b34; --ok-bg: #e7f5ea; --info-bg: #eef2fb;
}
@media (prefers-color-scheme: dark) {
  :root {
    --bg: #14161a; --surface: #1d2026; --surface-2: #262a31; --text: #e8eaee; --muted: #aab0ba; --border: #3d434d; --border-strong: #c9ced6;
    --accent: #8fb0ff; --accent-text: #0d1424; --link: #9dbbff; --focus: #9dbbff;
    --danger: #ff9b91; --danger-bg: #3a1c1a; --warn: #ffc474; --warn-bg: #36270f; --ok: #8fdaa3; --ok-bg: #15301d; --info-bg: #1b2436;
  }
}
`;

const ELEMENTS = `
*, *::before, *::after { box-sizing: border-box; }
body { font: var(--text-base)/1.5 var(--font); margin: 0; color: var(--text); background: var(--bg); }
a { color: var(--link); }
a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible, [tabindex]:focus-visible { outline: 3px solid var(--focus); outline-offset: 2px; }
h1 { font-size: var(--text-2xl); margin: var(--space-4) 0; line-height: 1.2; }
h2 { font-size: var(--text-xl); margin: var(--space-8) 0 var(--space-3); line-height: 1.25; }
h3 { font-size: var(--text-lg); margin: var(--space-4) 0 var(--space-2); }
code, pre { background: var(--surface-2); font-family: var(--mono); font-size: .9em; border-radius: .25rem; }
code { padding: 0 var(--space-1); overflow-wrap: anywhere; }
code.fn { overflow-wrap: normal; word-break: keep-all; white-space: nowrap; }
pre { padding: var(--space-2); overflow-x: auto; max-width: 100%; font-size: var(--text-sm); }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; border-bottom: 1px solid var(--border); padding: var(--space-2) var(--space-3) var(--space-2) 0; vertical-align: top; }
th { font-size: var(--text-sm); color: var(--muted); font-weight: 600; }
fieldset { border: 1px solid var(--border); border-radius: var(--radius); margin: var(--space-4) 0; padding: var(--space-2) var(--space-4); }
legend { font-weight: 700; padding: 0 var(--space-1); }
input[type=text], input[type=number], input[type=date], input[type=search], select, textarea {
  font: inherit; padding: var(--space-1) var(--space-2); width: 100%; max-width: 32rem; min-height: 2.5rem;
  border: 1px solid var(--muted); border-radius: var(--radius); background: var(--bg); color: var(--text);
}
button, .button {
  font: inherit; padding: var(--space-2) var(--space-4); min-height: 2.5rem; border: 2px solid var(--border-strong); border-radius: var(--radius);
  background: var(--bg); color: var(--text); cursor: pointer; text-decoration: none; display: inline-flex; align-items: center; gap: var(--space-2);
}
button.primary, .button.primary { background: var(--accent); border-color: var(--accent); color: var(--accent-text); }
button.danger, .button.danger { border-color: var(--danger); color: var(--danger); }
button.small { min-height: 2rem; padding: var(--space-1) var(--space-3); font-size: var(--text-sm); }
dl { margin: 0; }
dt { font-weight: 600; }
dd { margin: 0 0 var(--space-2); }
`;

const COMPONENTS = `
.skip { position: absolute; left: -999px; } .skip:focus { left: var(--space-2); top: var(--space-2); background: var(--bg); padding: var(--space-2); z-index: 10; }
header.top { border-bottom: 1px solid var(--border); background: var(--surface); padding: var(--space-2) var(--space-4); display: flex; flex-wrap: wrap; gap: var(--space-2) var(--space-4); align-items: center; justify-content: space-between; }
.brand { font-weight: 700; display: inline-flex; align-items: center; gap: var(--space-2); color: var(--text); text-decoration: none; }
.brand-mark { display: inline-flex; align-items: center; justify-content: center; width: 1.75rem; height: 1.75rem; border-radius: .4rem; background: #1d4ed8; color: #ffffff; }
/* Brand and account on the first row, the navigation on its own row beneath. */
nav.console { order: 1; flex-basis: 100%; }
nav.console ul { list-style: none; display: flex; flex-wrap: wrap; gap: var(--space-1) var(--space-2); margin: 0; padding: 0; }
nav.console a { display: inline-flex; align-items: center; gap: var(--space-1); padding: var(--space-1) var(--space-2); border-radius: var(--radius); color: var(--text); text-decoration: none; }
nav.console a:hover { background: var(--surface-2); }
nav.console a[aria-current="page"] { background: var(--surface-2); font-weight: 700; box-shadow: inset 0 -3px 0 var(--accent); }
.account { display: inline-flex; align-items: center; gap: var(--space-2); font-size: var(--text-sm); }
main { max-width: 72rem; margin: 0 auto; padding: var(--space-4); }
.icon { display: inline-block; width: 1.15em; height: 1.15em; flex: none; vertical-align: -.2em; background: currentColor;
  -webkit-mask: var(--icon) center / contain no-repeat; mask: var(--icon) center / contain no-repeat; }
.muted { color: var(--muted); }
.lede { color: var(--muted); max-width: 48rem; }
.notice, .warning, .error, .success { border-left: 4px solid var(--muted); background: var(--surface); padding: var(--space-2) var(--space-4); border-radius: 0 var(--radius) var(--radius) 0; }
.warning { border-color: var(--warn); background: var(--warn-bg); }
.error { border-color: var(--danger); background: var(--danger-bg); }
.success { border-color: var(--ok); background: var(--ok-bg); }
.secret { border: 2px dashed var(--border-strong); border-radius: var(--radius); padding: var(--space-3) var(--space-4); }
.secret code { font-size: var(--text-base); word-break: break-all; }
.client-config { margin: var(--space-2) 0; } .client-config summary { cursor: pointer; font-weight: 600; }
.client-config pre { white-space: pre-wrap; word-break: break-all; }
.badge { display: inline-block; font-size: var(--text-sm); padding: 0 var(--space-2); border-radius: 999px; border: 1px solid var(--border); background: var(--surface); white-space: nowrap; }
.badge.control { border-color: var(--warn); color: var(--warn); background: var(--warn-bg); }
.badge.stale, .badge.expired, .badge.paused { border-color: var(--danger); color: var(--danger); background: var(--danger-bg); font-weight: 600; }
.badge.running { border-color: var(--ok); color: var(--ok); background: var(--ok-bg); font-weight: 600; }
.status-online::before { content: "● "; } .status-offline::before { content: "○ "; } .status-revoked::before { content: "✕ "; }
.table-wrap { overflow-x: auto; }
form.inline { display: inline; }
form.row { display: flex; flex-wrap: wrap; gap: var(--space-2); align-items: end; }
form.row label { font-size: var(--text-sm); display: grid; gap: .1rem; }
form.row select { width: auto; }
.edit { display: inline-flex; flex-wrap: wrap; gap: var(--space-1) var(--space-2); align-items: center; margin-top: var(--space-1); }
.edit select { width: auto; min-height: 2rem; padding: 0 var(--space-1); font-size: var(--text-sm); }
#approvals code[data-field="capability"] { overflow-wrap: normal; }
form.decision { margin: var(--space-1) 0 var(--space-2); } .pager { display: flex; flex-wrap: wrap; gap: var(--space-4); margin: var(--space-2) 0; align-items: center; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; } form.decision label { display: block; font-size: var(--text-sm); }
.fields { display: grid; gap: var(--space-3); max-width: 32rem; } .fields label { display: block; font-weight: 600; }
.toolbar { display: flex; flex-wrap: wrap; gap: var(--space-2); align-items: end; margin: var(--space-4) 0; }
.toolbar input[type=search] { max-width: 24rem; }
ul.tree, ul.tree ul { list-style: none; padding-left: var(--space-4); border-left: 2px solid var(--border); margin: var(--space-1) 0; }
ul.tree { padding-left: 0; border-left: none; }
.device { margin: var(--space-2) 0; } .device summary { cursor: pointer; }
.device-line { display: flex; flex-wrap: wrap; gap: var(--space-1) var(--space-3); align-items: baseline; font-size: var(--text-sm); margin-left: var(--space-4); }
ul.key-values { list-style: none; display: flex; flex-wrap: wrap; gap: var(--space-1) var(--space-3); padding: 0; margin: 0; }
ul.functions { list-style: none; padding: 0; } ul.functions > li { border-top: 1px solid var(--border); padding: var(--space-2) 0; }
.qr { width: 14rem; height: 14rem; image-rendering: pixelated; background: #fff; padding: var(--space-2); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(15rem, 1fr)); gap: var(--space-3); }
.card { border: 1px solid var(--border); border-radius: var(--radius); padding: var(--space-3) var(--space-4); background: var(--surface); }
.meter { display: block; height: .5rem; border-radius: 999px; background: var(--surface-2); overflow: hidden; margin-top: var(--space-1); }
.meter > span { display: block; height: 100%; background: var(--accent); }
.meter.high > span { background: var(--danger); }
dl.args { display: grid; grid-template-columns: max-content 1fr; gap: var(--space-1) var(--space-3); }
dl.args dt { font-family: var(--mono); font-weight: 600; font-size: var(--text-sm); }
dl.args dd { margin: 0; }
.term { text-decoration: underline dotted; text-underline-offset: .2em; cursor: help; }
.switch { display: flex; flex-wrap: wrap; gap: var(--space-4); align-items: center; padding: var(--space-4); border: 1px solid var(--border); border-radius: var(--radius); background: var(--surface); }
.switch .state { font-size: var(--text-lg); font-weight: 700; }
/* Approvals that reach the owner (src/console/pending.tsx): the pending count, an action's details. */
.pending-badge [data-field="count"] { display: inline-block; min-width: 1.5em; margin-left: var(--space-1); padding: 0 .4em; border-radius: 1em; background: var(--danger); color: var(--accent-text); font-size: .8rem; font-weight: 700; text-align: center; }
#notify-me[hidden] { display: none; }
dl.action-details { display: grid; grid-template-columns: max-content 1fr; gap: var(--space-1) var(--space-3); } dl.action-details dd { margin: 0; }
/* Grant conditions (src/console/screens/grant-conditions.tsx): in words, and their form. */
ul.conditions { margin: 0; padding-left: var(--space-4); font-size: var(--text-sm); }
.row-fields { display: flex; flex-wrap: wrap; gap: var(--space-2) var(--space-4); align-items: end; } .row-fields input { max-width: 10rem; }
.choices { display: flex; flex-wrap: wrap; gap: var(--space-1) var(--space-4); margin: var(--space-1) 0; } .choices label { display: inline-flex; align-items: center; gap: var(--space-1); min-height: 2rem; }
.field-error { color: var(--danger); font-weight: 600; margin: var(--space-1) 0; }
details.new-conditions { margin: var(--space-2) 0; } details.new-conditions summary { cursor: pointer; font-weight: 600; min-height: 2rem; }
`;

const PHONE = `
@media (max-width: 40rem) {
  header.top { padding: var(--space-2); }
  main { padding: var(--space-2) var(--space-2) 5rem; }
  h1 { font-size: var(--text-xl); margin: var(--space-2) 0; }
  /* The navigation sits at the bottom, within a thumb's reach, approvals first. */
  nav.console { position: fixed; bottom: 0; left: 0; right: 0; z-index: 5; background: var(--surface); border-top: 1px solid var(--border); }
  nav.console ul { flex-wrap: nowrap; overflow-x: auto; gap: 0; padding: 0 var(--space-1); }
  nav.console li { flex: none; }
  nav.console li.first-on-phone { order: -1; }
  nav.console a { flex-direction: column; gap: 0; font-size: .75rem; padding: var(--space-2) var(--space-2); min-width: 4rem; min-height: 3.5rem; justify-content: center; }
  nav.console .icon { width: 1.4rem; height: 1.4rem; }
  .account .who { display: none; }
  table.stack thead { display: none; } table.stack tr { display: block; border-bottom: 2px solid var(--border); padding: var(--space-2) 0; }
  table.stack td { display: block; border: none; padding: .1rem 0; } table.stack td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; }
}
`;

/** The meter's fill in steps of 5 %: a class per step, since the CSP allows no inline style. */
const METER_STEPS = Array.from({ length: 21 }, (_, i) => `.meter > .w${i * 5} { width: ${i * 5}%; }`).join('\n');

export const CSS = [TOKENS, ELEMENTS, COMPONENTS, METER_STEPS, iconRules(), PHONE].join('\n');

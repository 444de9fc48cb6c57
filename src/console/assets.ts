import { createHash } from 'node:crypto';
import type { Hono } from 'hono';
import { MARKED, MAX_FIELD_CHARS } from '../domain/human-text.js';
import type { HttpEnv } from '../http/request.js';

/**
 * The console's only assets, served by the service itself (no CDN, no build step): one style
 * sheet and one small script. Served as files, so the Content-Security-Policy allows scripts and
 * styles from this origin only ('self') and no inline code at all.
 *
 * The script only enhances what the server already rendered (docs/owners/console.md "Owner console"): times
 * become the owner's local time (the API keeps Unix ms; the page shows UTC without it), copy
 * buttons appear next to secrets shown once, and pages marked `data-live` (the approvals inbox,
 * the activity feed) follow the owner's event stream. Everything works without it.
 */

const CSS = `
*, *::before, *::after { box-sizing: border-box; }
body { font: 16px/1.5 system-ui, sans-serif; margin: 0; color: #1b1b1b; background: #fff; }
a { color: #0645ad; } a:focus-visible, button:focus-visible, input:focus-visible, select:focus-visible, summary:focus-visible { outline: 3px solid #1b1b1b; outline-offset: 2px; }
header { border-bottom: 2px solid #1b1b1b; padding: .5rem 1rem; display: flex; flex-wrap: wrap; gap: .5rem 1rem; align-items: center; justify-content: space-between; }
header .brand { font-weight: 700; }
nav ul { list-style: none; display: flex; flex-wrap: wrap; gap: .25rem 1rem; margin: 0; padding: 0; }
nav a[aria-current="page"] { font-weight: 700; text-decoration: none; border-bottom: 3px solid currentColor; }
main { max-width: 64rem; margin: 0 auto; padding: 1rem; }
h1 { font-size: 1.5rem; } h2 { font-size: 1.2rem; margin-top: 2rem; }
.muted { color: #555; } code, pre { background: #f2f2f2; font-family: ui-monospace, monospace; } code { padding: 0 .25rem; overflow-wrap: anywhere; }
pre { padding: .5rem; overflow-x: auto; max-width: 100%; font-size: .85rem; }
.notice { border-left: 4px solid #555; background: #f4f4f4; padding: .5rem 1rem; }
.warning { border-left: 4px solid #c77700; background: #fff6e5; padding: .5rem 1rem; }
.error { border-left: 4px solid #b00020; background: #fdecee; padding: .5rem 1rem; }
.secret { border: 2px dashed #1b1b1b; padding: .75rem 1rem; }
.secret code { font-size: 1rem; word-break: break-all; }
.status-online::before { content: "● "; } .status-offline::before { content: "○ "; } .status-revoked::before { content: "✕ "; }
table { border-collapse: collapse; width: 100%; } th, td { text-align: left; border-bottom: 1px solid #ccc; padding: .35rem .5rem .35rem 0; vertical-align: top; }
.table-wrap { overflow-x: auto; }
form.inline { display: inline; }
#approvals code[data-field="capability"] { overflow-wrap: normal; }
form.decision { margin: .25rem 0 .5rem; } .pager { display: flex; gap: 1rem; margin: .5rem 0; }
.visually-hidden { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; } form.decision label { display: block; font-size: .9rem; }
.fields { display: grid; gap: .75rem; max-width: 32rem; } .fields label { display: block; font-weight: 600; }
input[type=text], input[type=number], input[type=date], select, textarea { font: inherit; padding: .35rem; width: 100%; max-width: 32rem; border: 1px solid #555; }
button, .button { font: inherit; padding: .4rem 1rem; border: 2px solid #1b1b1b; background: #fff; color: #1b1b1b; cursor: pointer; text-decoration: none; display: inline-block; }
button.danger { border-color: #b00020; color: #b00020; } button.primary { background: #1b1b1b; color: #fff; }
ul.tree, ul.tree ul { list-style: none; padding-left: 1rem; border-left: 2px solid #ccc; margin: .25rem 0; }
ul.tree { padding-left: 0; border-left: none; }
.device { margin: .5rem 0; } .device summary { cursor: pointer; }
.qr { width: 14rem; height: 14rem; image-rendering: pixelated; }
fieldset { border: 1px solid #999; margin: 1rem 0; padding: .5rem 1rem; } legend { font-weight: 700; padding: 0 .25rem; }
/* Approvals that reach the owner (src/console/pending.tsx): the pending count, an action's details. */
.pending-badge [data-field="count"] { display: inline-block; min-width: 1.5em; margin-left: .25rem; padding: 0 .4em; border-radius: 1em; background: #b00020; color: #fff; font-size: .8rem; font-weight: 700; text-align: center; }
#notify-me[hidden] { display: none; }
dl.action-details { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; } dl.action-details dd { margin: 0; }
/* End of the approvals block. */
@media (max-width: 40rem) {
  header { padding: .5rem; } main { padding: .5rem; }
  table.stack thead { display: none; } table.stack tr { display: block; border-bottom: 2px solid #999; padding: .5rem 0; }
  table.stack td { display: block; border: none; padding: .1rem 0; } table.stack td[data-label]::before { content: attr(data-label) ": "; font-weight: 600; }
}
`;

const SCRIPT = `
(function () {
  // Times: the server writes UTC; the owner reads their own clock.
  function localTime(el) {
    var ms = Number(el.getAttribute('data-ms'));
    if (!Number.isFinite(ms)) return;
    el.textContent = new Date(ms).toLocaleString();
    el.title = new Date(ms).toISOString();
  }
  document.querySelectorAll('time[data-ms]').forEach(localTime);
  // Copy buttons: hidden until this script can make them work.
  document.querySelectorAll('button[data-copy-target]').forEach(function (button) {
    var target = document.getElementById(button.getAttribute('data-copy-target'));
    var status = document.getElementById(button.getAttribute('data-copy-status'));
    if (!target || !navigator.clipboard) return;
    button.hidden = false;
    button.addEventListener('click', function () {
      navigator.clipboard.writeText(target.textContent || '').then(
        function () { if (status) status.textContent = 'Copied.'; },
        function () { if (status) status.textContent = 'Could not copy: select the text and copy it.'; }
      );
    });
  });
  // Live pages: the owner's event stream keeps them current. Every value from an event is
  // set as text (textContent, attributes), never parsed as markup.
  // Every signed-in page follows the stream for its pending count (src/console/pending.tsx).
  if ((document.body.getAttribute('data-live') === null && !document.getElementById('pending-count')) || !window.EventSource) return;
  function rowOf(container, id) {
    if (!container) return null;
    var rows = container.querySelectorAll('tr[data-action-id]');
    for (var i = 0; i < rows.length; i++) if (rows[i].getAttribute('data-action-id') === id) return rows[i];
    return null;
  }
  function named(attribute, value) {
    var items = document.querySelectorAll('#names li[' + attribute + ']');
    for (var i = 0; i < items.length; i++) if (items[i].getAttribute(attribute) === value) return items[i].textContent;
    return null;
  }
  function field(row, name) { return row.querySelector('[data-field="' + name + '"]'); }
  // What an agent or a device wrote, marked and capped as the server renders it
  // (src/domain/human-text.ts gives both the characters and the cap).
  var MARKED = new RegExp(${JSON.stringify(MARKED.source)}, 'u');
  function shown(text) {
    var chars = Array.from(text);
    var kept = chars.slice(0, ${MAX_FIELD_CHARS});
    var marked = kept.map(function (c) {
      return MARKED.test(c) ? '⟨U+' + c.codePointAt(0).toString(16).toUpperCase().padStart(4, '0') + '⟩' : c;
    }).join('');
    var rest = chars.length - kept.length;
    return rest > 0 ? marked + '… (' + rest + ' more character' + (rest === 1 ? '' : 's') + ')' : marked;
  }
  var inbox = document.getElementById('approval-rows');
  var template = document.getElementById('approval-row');
  var empty = document.getElementById('no-approvals');
  var feed = document.querySelector('#actions tbody');
  var status = document.getElementById('live-status');
  function emptiness() { if (empty && inbox) empty.hidden = inbox.querySelector('tr') !== null; }
  function addApproval(action) {
    if (!inbox || !template || rowOf(inbox, action.id)) return;
    // The last page takes new rows while it has room; the others stay as they were read.
    var room = Number(inbox.getAttribute('data-room'));
    if (!(room > 0)) {
      if (status) status.textContent = 'More approvals arrived: they are on the last page.';
      return;
    }
    inbox.setAttribute('data-room', String(room - 1));
    var row = template.content.querySelector('tr').cloneNode(true);
    row.setAttribute('data-action-id', action.id);
    field(row, 'agent-name').textContent = named('data-principal', action.principal) || '';
    field(row, 'principal').textContent = shown(action.principal);
    field(row, 'device').textContent = named('data-device-id', action.deviceId) || action.deviceId;
    field(row, 'capability').textContent = action.capability;
    field(row, 'arguments').textContent = shown(JSON.stringify(action.arguments, null, 1));
    var until = (action.approval && action.approval.expiresAt) || action.expiresAt;
    var time = document.createElement('time');
    time.setAttribute('datetime', new Date(until).toISOString());
    time.setAttribute('data-ms', String(until));
    localTime(time);
    field(row, 'window').appendChild(time);
    row.querySelectorAll('input[name="actionId"]').forEach(function (input) { input.value = action.id; });
    row.querySelectorAll('input[data-bulk]').forEach(function (input) { input.name = input.getAttribute('data-bulk') + action.id; });
    var bulk = document.getElementById('bulk-reject');
    if (bulk) bulk.hidden = false;
    inbox.appendChild(row);
    emptiness();
  }
  function updateAction(action) {
    if (action.status !== 'awaiting_approval') {
      var waiting = rowOf(inbox, action.id);
      if (waiting) waiting.remove();
      emptiness();
    }
    var row = rowOf(feed, action.id);
    if (!row) return;
    var cell = field(row, 'status');
    var strong = document.createElement('strong');
    strong.textContent = action.status;
    cell.replaceChildren(strong, action.cancelReason ? ' (' + action.cancelReason + ')' : '');
    var outcome = field(row, 'outcome');
    if (action.error) outcome.textContent = action.error.code + ': ' + action.error.message;
    else if (action.result !== null && action.result !== undefined) {
      var pre = document.createElement('pre');
      pre.textContent = JSON.stringify(action.result);
      outcome.replaceChildren(pre);
    }
  }
  function on(type, handle) {
    source.addEventListener(type, function (message) {
      var event = JSON.parse(message.data);
      if (event.data && event.data.action) handle(event.data.action);
    });
  }
  // The browser reconnects by itself, sending Last-Event-ID: the stream resumes where it was.
  var source = new EventSource('/console/events');
  on('approval.requested', addApproval);
  on('action.updated', updateAction);
  // The page's other scripts hear the same events (the one stream a page opens).
  ['approval.requested', 'action.created', 'action.updated', 'open'].forEach(function (type) {
    source.addEventListener(type, function (message) {
      var event = type === 'open' ? {} : JSON.parse(message.data);
      document.dispatchEvent(new CustomEvent('owner-event', { detail: { type: type, action: event.data && event.data.action } }));
    });
  });
  // Events were lost (older than the replay window): only a reload shows the truth.
  source.addEventListener('reset', function () { if (status) status.textContent = 'Live updates missed some changes: reload the page.'; });
  source.addEventListener('open', function () {
    document.body.setAttribute('data-live-state', 'open');
    if (status) status.textContent = 'Live: updates as they happen.';
  });
  source.addEventListener('error', function () {
    document.body.setAttribute('data-live-state', 'closed');
    if (status) status.textContent = 'Live updates interrupted: reconnecting (or reload the page).';
  });
})();
`;

const etag = (text: string) => `"${createHash('sha256').update(text).digest('base64url').slice(0, 16)}"`;

export const ASSETS = {
  css: { path: '/console/assets/console.css', body: CSS, type: 'text/css; charset=utf-8', etag: etag(CSS) },
  js: { path: '/console/assets/console.js', body: SCRIPT, type: 'text/javascript; charset=utf-8', etag: etag(SCRIPT) },
} as const;

export function mountAssets(app: Hono<HttpEnv>): void {
  for (const asset of Object.values(ASSETS)) {
    app.get(asset.path, (c) => {
      if (c.req.header('if-none-match') === asset.etag) return c.body(null, 304, { ETag: asset.etag });
      return c.body(asset.body, 200, { 'Content-Type': asset.type, ETag: asset.etag, 'Cache-Control': 'no-cache' });
    });
  }
}

import { createHash } from 'node:crypto';
import type { Hono } from 'hono';
import type { HttpEnv } from '../http/request.js';
import { ARGUMENT_LIST_SCRIPT } from './arguments.js';
import { mountIcons } from './icons.js';
import { CSS } from './style.js';

/**
 * The console's style sheet (src/console/style.ts) and its one small script, served by the
 * service itself (no CDN, no build step), with the icons and favicon of src/console/icons.ts. Served as files, so the Content-Security-Policy allows scripts and
 * styles from this origin only ('self') and no inline code at all.
 *
 * The script only enhances what the server already rendered (docs/owners/console.md "Owner console"): times
 * become the owner's local time (the API keeps Unix ms; the page shows UTC without it), copy
 * buttons appear next to secrets shown once, and pages marked `data-live` (the approvals inbox,
 * the activity feed) follow the owner's event stream. Everything works without it.
 */

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
${ARGUMENT_LIST_SCRIPT}  var inbox = document.getElementById('approval-rows');
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
    field(row, 'argument-list').replaceChildren(argumentList(action.arguments || {}));
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
  // A read function's value changed: the device page's row and the devices list's line follow.
  function updateState(state) {
    var values = document.getElementById('state-values');
    if (values && values.getAttribute('data-device-id') === state.deviceId) {
      var rows = values.querySelectorAll('tr[data-capability]');
      for (var i = 0; i < rows.length; i++) {
        if (rows[i].getAttribute('data-capability') !== state.capability) continue;
        rows[i].setAttribute('data-has-value', 'true');
        field(rows[i], 'value').replaceChildren(stateValue(state.value));
        var time = document.createElement('time');
        time.setAttribute('datetime', new Date(state.reportedAt).toISOString());
        time.setAttribute('data-ms', String(state.reportedAt));
        localTime(time);
        field(rows[i], 'reported-at').replaceChildren(time);
        field(rows[i], 'source').textContent = 'live update';
      }
    }
    document.querySelectorAll('ul.key-values li[data-capability]').forEach(function (item) {
      if (item.parentNode.getAttribute('data-device-id') !== state.deviceId || item.getAttribute('data-capability') !== state.capability) return;
      field(item, 'summary').textContent = stateSummary(state.value);
    });
  }
  // A device came online or went quiet: its page and its entry in the devices list say so.
  function updatePresence(device, online) {
    var state = document.createElement('span');
    state.className = online ? 'status-online' : 'status-offline';
    state.setAttribute('data-state', online ? 'online' : 'offline');
    state.textContent = online ? 'online' : 'offline';
    var page = document.getElementById('device');
    if (page && page.getAttribute('data-device-id') === device.id) {
      document.getElementById('device-status').replaceChildren(state.cloneNode(true));
      if (device.lastSeenAt) {
        var seen = document.createElement('time');
        seen.setAttribute('datetime', new Date(device.lastSeenAt).toISOString());
        seen.setAttribute('data-ms', String(device.lastSeenAt));
        localTime(seen);
        document.getElementById('device-last-seen').replaceChildren(seen);
      }
    }
    document.querySelectorAll('#devices li.device[data-device-id]').forEach(function (item) {
      if (item.getAttribute('data-device-id') !== device.id) return;
      var current = item.querySelector(':scope > details > summary [data-state]');
      if (current && current.getAttribute('data-state') !== 'revoked') current.replaceWith(state.cloneNode(true));
    });
  }
  ['device.online', 'device.offline'].forEach(function (type) {
    source.addEventListener(type, function (message) {
      var event = JSON.parse(message.data);
      if (event.data && event.data.device) updatePresence(event.data.device, type === 'device.online');
    });
  });
  source.addEventListener('device.state_changed', function (message) {
    var event = JSON.parse(message.data);
    if (event.data && event.data.deviceId) updateState(event.data);
  });
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
  mountIcons(app);
  for (const asset of Object.values(ASSETS)) {
    app.get(asset.path, (c) => {
      if (c.req.header('if-none-match') === asset.etag) return c.body(null, 304, { ETag: asset.etag });
      return c.body(asset.body, 200, { 'Content-Type': asset.type, ETag: asset.etag, 'Cache-Control': 'no-cache' });
    });
  }
}

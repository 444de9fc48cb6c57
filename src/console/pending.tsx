import { createHash } from 'node:crypto';
import { CANCEL_REASONS, EXPIRED_REASONS } from '../domain/action-states.js';
import { ARGUMENT_LIST_SCRIPT } from './arguments.js';

/**
 * Approvals that reach the owner while a console tab is open (docs/owners/approval-notifications.md):
 * every page's navigation shows how many actions wait, rendered by the server and kept current
 * by this script from the owner's event stream (console.js opens the one stream a page has and
 * hands each action event on as an `owner-event` DOM event); once the owner has said yes to
 * notifications (a button, never on load) each new approval request shows one. On the activity
 * page the script also adds the actions created after the page was read, and keeps their
 * reasons current. Every value from an event is set as text, never parsed as markup.
 */

/** The count in the navigation: hidden at zero, so a quiet console has nothing to look at. */
export function PendingBadge(props: { count: number }) {
  return (
    <span class="pending-badge" id="pending-count" data-count={String(props.count)} hidden={props.count === 0}>
      {' '}
      <span data-field="count">{String(props.count)}</span>
      <span class="visually-hidden"> waiting</span>
    </span>
  );
}

/** The button that asks for notifications: only the script shows it, where the browser has them. */
export function NotifyButton() {
  return (
    <p class="notify">
      <button type="button" id="notify-me" hidden>
        Notify me in this browser
      </button>{' '}
      <span id="notify-status" role="status"></span>
    </p>
  );
}

const SCRIPT = `
(function () {
  // The owner's time zone on the forms that read dates and times (src/console/zones.ts).
  var zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  document.querySelectorAll('input[data-owner-zone]').forEach(function (input) { if (!input.value) input.value = zone; });
  document.querySelectorAll('[data-zone-label]').forEach(function (label) { label.textContent = 'Times are in ' + zone + ', the time zone of this browser.'; });
  var badge = document.getElementById('pending-count');
  if (!badge) return;
  var count = badge.querySelector('[data-field="count"]');
  function show(n) {
    badge.hidden = !(n > 0);
    badge.setAttribute('data-count', String(n));
    count.textContent = String(n);
  }
  // Counting from the events alone would drift (a decision and the later moves of an approved
  // action look alike): on any approval's change the count is read again, once per burst.
  var timer = null;
  function recount() {
    clearTimeout(timer);
    timer = setTimeout(function () {
      fetch('/console/approvals/count', { credentials: 'same-origin', headers: { accept: 'application/json' } })
        .then(function (res) { return res.ok ? res.json() : null; })
        .then(function (body) { if (body && typeof body.pending === 'number') show(body.pending); }, function () {});
    }, 200);
  }

  // Notifications: asked for on the owner's click only, shown for each new approval request.
  var canNotify = 'Notification' in window;
  var button = document.getElementById('notify-me');
  var said = document.getElementById('notify-status');
  function state() {
    if (!button || !said) return;
    var permission = canNotify ? Notification.permission : 'unsupported';
    button.hidden = permission !== 'default';
    said.textContent = permission === 'granted' ? 'This browser shows a notification for each new approval while a console tab is open.'
      : permission === 'denied' ? 'Notifications are blocked for this site: allow them in the browser\\'s site settings to be notified.'
      : permission === 'unsupported' ? 'This browser cannot show notifications.' : '';
  }
  if (button && canNotify) {
    button.addEventListener('click', function () {
      var asked = Notification.requestPermission(state);
      if (asked && asked.then) asked.then(state);
    });
  }
  state();
  function notify(action) {
    if (!canNotify || Notification.permission !== 'granted') return;
    var shown = new Notification('Approval needed', { body: action.principal + ' asks to run ' + action.capability + '.', tag: action.id });
    shown.addEventListener('click', function () {
      window.focus();
      location.href = '/console/actions/' + encodeURIComponent(action.id);
    });
  }

  // Activity: rows for actions created after the page was read, on its first page, when they match its filters.
  var table = document.getElementById('actions');
  var rows = table && table.getAttribute('data-live-rows') === 'true' ? table.querySelector('tbody') : null;
  var template = document.getElementById('action-row');
  function matches(action) {
    var keys = ['status', 'deviceId', 'principal', 'capability'];
    for (var i = 0; i < keys.length; i++) {
      var wanted = table.getAttribute('data-filter-' + keys[i].toLowerCase());
      if (wanted && wanted !== action[keys[i]]) return false;
    }
    var until = Number(table.getAttribute('data-filter-until'));
    return !(until > 0 && action.createdAt >= until);
  }
  function field(row, name) { return row.querySelector('[data-field="' + name + '"]'); }
${ARGUMENT_LIST_SCRIPT}  // As the server words them (reasonOf in src/console/screens/action.tsx).
  var CANCELLED = ${JSON.stringify(CANCEL_REASONS)};
  var EXPIRED = ${JSON.stringify(EXPIRED_REASONS)};
  function reason(action) {
    var approval = action.approval;
    if (approval && approval.decision === 'rejected') {
      return 'Rejected by ' + (approval.decidedBy || 'the owner') + (approval.reason ? ': ' + approval.reason : ' (no reason given)');
    }
    if (action.cancelReason) return (action.status === 'cancelled' ? 'Cancelled' : 'Asked to stop') + ': ' + CANCELLED[action.cancelReason];
    if (action.expiredReason) return 'Expired: ' + EXPIRED[action.expiredReason];
    return '';
  }
  function addRow(action) {
    if (!rows || !template || !matches(action) || rows.querySelector('tr[data-action-id="' + action.id + '"]')) return;
    var row = template.content.querySelector('tr').cloneNode(true);
    row.setAttribute('data-action-id', action.id);
    var time = document.createElement('time');
    time.setAttribute('datetime', new Date(action.createdAt).toISOString());
    time.setAttribute('data-ms', String(action.createdAt));
    time.textContent = new Date(action.createdAt).toLocaleString();
    field(row, 'created').appendChild(time);
    var strong = document.createElement('strong');
    strong.textContent = action.status;
    field(row, 'status').appendChild(strong);
    var names = document.getElementById('device-names');
    var named = names && names.querySelector('[data-device-id="' + action.deviceId + '"]');
    field(row, 'device').textContent = named ? named.textContent : action.deviceId;
    field(row, 'capability').textContent = action.capability;
    field(row, 'arguments').replaceChildren(argumentList(action.arguments || {}));
    field(row, 'principal').textContent = shown(action.principal);
    var agents = document.querySelectorAll('#agent-names li[data-principal]');
    for (var i = 0; i < agents.length; i++) if (agents[i].getAttribute('data-principal') === action.principal) field(row, 'agent-name').textContent = agents[i].textContent;
    field(row, 'reason').textContent = reason(action);
    var link = field(row, 'details');
    link.setAttribute('href', '/console/actions/' + encodeURIComponent(action.id));
    rows.insertBefore(row, rows.firstChild);
    var empty = document.getElementById('no-actions');
    if (empty) empty.hidden = rows.querySelector('tr') !== null;
    var live = document.getElementById('live-count');
    if (live) live.textContent = String(Number(live.textContent || '0') + 1);
  }
  function updateReason(action) {
    var row = table && table.querySelector('tr[data-action-id="' + action.id + '"]');
    if (row && field(row, 'reason')) field(row, 'reason').textContent = reason(action);
  }

  document.addEventListener('owner-event', function (event) {
    var type = event.detail.type;
    var action = event.detail.action;
    if (type === 'open' || ((type === 'approval.requested' || type === 'action.updated') && action && action.approval)) recount();
    if (type === 'approval.requested') notify(action);
    if (type === 'action.created') addRow(action);
    if (type === 'action.updated') updateReason(action);
  });
})();
`;

export const OWNER_LIVE_SCRIPT = {
  path: '/console/assets/owner-live.js',
  body: SCRIPT,
  etag: `"${createHash('sha256').update(SCRIPT).digest('base64url').slice(0, 16)}"`,
};

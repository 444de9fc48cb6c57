/**
 * The device view's script: the MCP Apps view protocol (`@modelcontextprotocol/ext-apps`,
 * protocol 2026-01-26) spoken over postMessage with the host, as JSON-RPC 2.0. The SDK's `App`
 * class bundles to about 650 KB with its dependencies, ten times the view's 64 KiB, so the view
 * speaks the few messages it needs itself: `ui/initialize` and `ui/notifications/initialized`,
 * the host's `tool-input`, `tool-result`, `tool-cancelled` and `host-context-changed`
 * notifications, `ping` and `ui/resource-teardown`, and its own `tools/call`, `ui/open-link`
 * and `ui/notifications/size-changed`.
 *
 * Every call the view makes is a `tools/call` the host sends with the agent's own connection:
 * it can call nothing the agent could not, and each call passes every check the service makes.
 * What the device wrote (names, values, results) is set with `textContent`, never as markup.
 */
export const DEVICE_VIEW_SCRIPT = `
(() => {
  'use strict';
  const PROTOCOL = '2026-01-26';
  const host = window.parent;
  const pending = new Map();
  let lastId = 0;
  const view = { tool: null, args: {}, deviceId: null, consoleUrl: null, action: null, busy: false, polling: null, followed: null, delay: 1000 };
  const $ = (id) => document.getElementById(id);
  const TERMINAL = ['succeeded', 'failed', 'rejected', 'cancelled', 'expired'];
  const OUTCOME = { succeeded: 'Succeeded', failed: 'Failed', rejected: 'Rejected by the owner', cancelled: 'Cancelled', expired: 'Expired' };
  const STEPS = [['awaiting_approval', "Waiting for the owner's approval"], ['queued', 'Queued'], ['received', 'Received by the device'], ['result', 'Result']];

  const send = (message) => host.postMessage(Object.assign({ jsonrpc: '2.0' }, message), '*');
  const notify = (method, params) => send({ method, params: params || {} });
  const request = (method, params) => {
    lastId += 1;
    const id = lastId;
    send({ id, method, params });
    return new Promise((resolve, reject) => pending.set(id, { resolve, reject }));
  };

  const short = (text, max) => (text.length > max ? text.slice(0, max - 1) + '\\u2026' : text);
  const json = (value) => short(JSON.stringify(value, null, 2) || String(value), 4000);
  const when = (at) => { const t = typeof at === 'number' ? at : Date.parse(at); return Number.isFinite(t) ? new Date(t).toLocaleString() : ''; };
  const show = (id, on) => { $(id).hidden = !on; };

  function resize() {
    const box = document.documentElement.getBoundingClientRect();
    notify('ui/notifications/size-changed', { width: Math.ceil(box.width), height: Math.ceil(box.height) });
  }

  function say(text) { $('status').textContent = text; }
  function fail(text) { $('error').textContent = text; show('error', true); resize(); }
  function clearError() { $('error').textContent = ''; show('error', false); }

  /** The service's error from a tool result: the envelope in its last text, or that text. */
  function resultError(result) {
    const texts = (result.content || []).filter((c) => c && c.type === 'text' && typeof c.text === 'string');
    const last = texts.length ? texts[texts.length - 1].text : 'The call failed.';
    try {
      const envelope = JSON.parse(last);
      if (envelope && envelope.error) return envelope.error.code + ': ' + envelope.error.message;
    } catch (e) { /* not an envelope: the text itself */ }
    return short(last, 600);
  }

  /**
   * A JSON-RPC error from the host. A call the service refused before running it (a revoked
   * grant, the kill switch) is an HTTP status whose body is the error envelope; a host's client
   * passes it on in its message, after its own words. The envelope's code and message are shown.
   */
  function rpcError(error) {
    const message = String((error && error.message) || error || 'The call failed.');
    const start = message.indexOf('{');
    if (start >= 0) {
      try {
        const envelope = JSON.parse(message.slice(start));
        if (envelope && envelope.error && envelope.error.code) return short(envelope.error.code + ': ' + envelope.error.message, 600);
      } catch (e) { /* not an envelope: the message itself */ }
    }
    return short(message, 600);
  }

  function renderAction(action) {
    view.action = action;
    show('action', true);
    const steps = $('steps');
    steps.textContent = '';
    const needsOwner = !!(action.approval && action.approval.mode === 'owner');
    const at = action.status === 'awaiting_approval' ? 0 : action.status === 'queued' || action.status === 'scheduled' ? 1 : action.status === 'received' ? 2 : 3;
    for (let i = 0; i < STEPS.length; i += 1) {
      if (i === 0 && !needsOwner) continue;
      const li = document.createElement('li');
      let label = STEPS[i][1];
      if (i === 1 && action.status === 'scheduled') label = 'Scheduled';
      if (i === 3 && TERMINAL.includes(action.status)) {
        label = OUTCOME[action.status];
        li.dataset.outcome = action.status === 'succeeded' ? 'good' : 'bad';
      }
      const state = i < at ? 'done' : i === at ? 'current' : 'to come';
      li.dataset.step = state;
      if (i === at) li.setAttribute('aria-current', 'step');
      li.textContent = label + (state === 'done' ? ' (done)' : state === 'to come' ? ' (to come)' : '');
      steps.appendChild(li);
    }
    show('approval', action.status === 'awaiting_approval' && !!view.consoleUrl);
    const finished = TERMINAL.includes(action.status);
    show('outcome', finished && (action.result !== null || action.error !== null));
    if (finished) $('outcome-text').textContent = action.error ? action.error.code + ': ' + action.error.message : json(action.result);
    say(action.capability + ': ' + (finished ? OUTCOME[action.status] : action.status.replace('_', ' ')) + '.');
    if (!finished) poll();
    resize();
  }

  function renderState(state) {
    view.deviceId = state.deviceId;
    show('state', true);
    $('online').textContent = (state.online ? 'Online' : 'Offline') + (state.lastSeenAt ? ', last seen ' + when(state.lastSeenAt) : '') + '.';
    const rows = $('value-rows');
    rows.textContent = '';
    for (const v of state.values || []) {
      const tr = document.createElement('tr');
      const th = document.createElement('th');
      th.scope = 'row';
      th.textContent = v.capability;
      const value = document.createElement('td');
      const code = document.createElement('code');
      code.textContent = json(v.value);
      value.appendChild(code);
      const at = document.createElement('td');
      at.className = 'when';
      at.textContent = when(v.reportedAt);
      tr.append(th, value, at);
      rows.appendChild(tr);
    }
    show('values', (state.values || []).length > 0);
    show('no-values', (state.values || []).length === 0);
    resize();
  }

  function adopt(meta) {
    if (!meta) return;
    if (typeof meta.deviceName === 'string') $('device').textContent = meta.deviceName;
    if (typeof meta.deviceName === 'string') document.title = meta.deviceName;
    if (typeof meta.deviceId === 'string') view.deviceId = meta.deviceId;
    if (typeof meta.tool === 'string') view.tool = meta.tool;
    if (typeof meta.consoleUrl === 'string') view.consoleUrl = meta.consoleUrl;
  }

  function onResult(result) {
    const meta = result && result._meta ? result._meta['dfc/view'] : null;
    adopt(meta);
    const data = result ? result.structuredContent : null;
    const isAction = data && typeof data.status === 'string' && typeof data.capability === 'string';
    if (isAction) {
      view.args = data.arguments || view.args;
      renderAction(data);
    } else if (data && Array.isArray(data.values)) {
      renderState(data);
    }
    if (result && result.isError && !isAction) fail(resultError(result));
    controls();
    if (isAction && view.deviceId) refreshState();
  }

  function controls() {
    $('again').disabled = view.busy || !view.tool;
    $('refresh').disabled = view.busy || !view.deviceId;
  }

  async function callTool(name, args) {
    const result = await request('tools/call', { name, arguments: args });
    return result;
  }

  async function refreshState() {
    if (!view.deviceId) return;
    try {
      const result = await callTool('get_device_state', { deviceId: view.deviceId });
      if (!result.isError && result.structuredContent) renderState(result.structuredContent);
    } catch (e) { /* no read function granted: the view shows no values */ }
  }

  /** Follows an unfinished action: after 1 s, then each wait half as long again, at most 10 s (an approval may take hours). */
  function poll() {
    if (view.polling || !view.action) return;
    if (view.followed !== view.action.id) { view.followed = view.action.id; view.delay = 1000; }
    const delay = view.delay;
    view.delay = Math.min(Math.round(view.delay * 1.5), 10000);
    view.polling = setTimeout(async () => {
      view.polling = null;
      const action = view.action;
      if (!action || TERMINAL.includes(action.status)) return;
      try {
        const result = await callTool('get_action', { actionId: action.id });
        if (result.isError) return fail(resultError(result));
        if (view.action && view.action.id === action.id) renderAction(result.structuredContent);
        if (TERMINAL.includes(result.structuredContent.status)) refreshState();
      } catch (e) { fail(rpcError(e)); }
    }, delay);
  }

  async function runAgain() {
    if (!view.tool || view.busy) return;
    view.busy = true;
    controls();
    clearError();
    say('Calling ' + view.tool + '\\u2026');
    try {
      const result = await callTool(view.tool, view.args);
      onResult(result);
      if (result.isError) fail(resultError(result));
    } catch (e) {
      say('The call was refused.');
      fail(rpcError(e));
    } finally {
      view.busy = false;
      controls();
    }
  }

  function theme(context) {
    if (context && (context.theme === 'light' || context.theme === 'dark')) document.documentElement.dataset.theme = context.theme;
  }

  window.addEventListener('message', (event) => {
    if (event.source !== host) return;
    const m = event.data;
    if (!m || m.jsonrpc !== '2.0') return;
    if (m.method === undefined && m.id !== undefined) {
      const waiting = pending.get(m.id);
      if (!waiting) return;
      pending.delete(m.id);
      if (m.error) waiting.reject(m.error);
      else waiting.resolve(m.result);
      return;
    }
    const params = m.params || {};
    switch (m.method) {
      case 'ui/notifications/tool-input':
        view.args = params.arguments || {};
        say('Waiting for the device\\u2026');
        break;
      case 'ui/notifications/tool-result':
        onResult(params);
        break;
      case 'ui/notifications/tool-cancelled':
        say('The call was cancelled.');
        break;
      case 'ui/notifications/host-context-changed':
        theme(params);
        break;
      default:
        if (m.id === undefined) break;
        if (m.method === 'ping' || m.method === 'ui/resource-teardown') send({ id: m.id, result: {} });
        else send({ id: m.id, error: { code: -32601, message: 'Method not found' } });
    }
  });

  $('again').addEventListener('click', runAgain);
  $('refresh').addEventListener('click', () => { clearError(); refreshState(); if (view.action) poll(); });
  $('open-console').addEventListener('click', () => { if (view.consoleUrl) request('ui/open-link', { url: view.consoleUrl }).catch((e) => fail(rpcError(e))); });

  request('ui/initialize', { appInfo: { name: 'device-function-control-view', version: '1.0.0' }, appCapabilities: {}, protocolVersion: PROTOCOL })
    .then((answer) => {
      const context = (answer && answer.hostContext) || {};
      theme(context);
      if (context.toolInfo && context.toolInfo.tool && typeof context.toolInfo.tool.name === 'string') view.tool = view.tool || context.toolInfo.tool.name;
      notify('ui/notifications/initialized');
      resize();
    })
    .catch((e) => fail(rpcError(e)));
})();
`;

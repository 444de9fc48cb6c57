import type { Hono } from 'hono';
import type { z } from 'zod';
import type { action as actionSchema } from '../../domain/action-records.js';
import type { DeviceState } from '../../domain/device-state.js';
import { humanText, MAX_FIELD_CHARS } from '../../domain/human-text.js';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import { ArgumentFields, StateValue } from '../arguments.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Time, type Viewer } from '../layout.js';
import { reasonOf } from './action.js';
import { allDevices, DeviceStatus, type Device } from './devices.js';
import { AccessLevel, APPROVAL_TEXT, knownAgents, staleReason, type Grant } from './grant-parts.js';

/**
 * One device (docs/owners/console.md "The device page"): its name, renamed in place
 * (`devices.rename`), whether it is online and when it was last seen, the last-known value of
 * each read function (`devices.state`: nothing is queued and the device is not woken), kept
 * current by the owner's event stream (`device.state_changed`), its functions in words with
 * their JSON Schema folded away, its recent actions (`actions.list`) and the grants on it
 * (`grants.list`).
 */

type Action = z.infer<typeof actionSchema>;

/** Recent actions the page lists; the rest are on Activity, filtered to the device. */
const RECENT_ACTIONS = 10;

const DONE = {
  renamed: 'The device is renamed: the name is kept whatever its manifest says later.',
} as const;

const shown = (text: string) => humanText(text, MAX_FIELD_CHARS);

/** Every unrevoked grant on the device, page after page. */
async function grantsOn(guards: Guards, signed: Signed, deviceId: string): Promise<Grant[]> {
  const grants: Grant[] = [];
  let cursor: string | undefined;
  do {
    const answer = await guards.call(signed, operations.listWorkspaceGrants, { deviceId, ...(cursor ? { cursor } : {}) }, 1000);
    if (answer.kind !== 'page') throw new Error('grants.list answers pages');
    grants.push(...answer.data);
    cursor = answer.nextCursor ?? undefined;
  } while (cursor);
  return grants;
}

/** Where a value came from: the result of an action (linked), or a report of the device's own. */
function Source(props: { value: DeviceState['values'][number] }) {
  const { value } = props;
  if (value.source === 'report' || value.actionId === null) return <>reported by the device</>;
  return (
    <>
      result of <a href={`/console/actions/${value.actionId}`}>an action</a>
    </>
  );
}

/** The last-known value of every read function: a row each, rows without a value saying so; the script fills them live. */
function Values(props: { device: Device; state: DeviceState }) {
  const reads = props.device.capabilities.filter((fn) => fn.kind === 'read');
  const byName = new Map(props.state.values.map((v) => [v.capability, v]));
  return (
    <section aria-labelledby="values-heading">
      <h2 id="values-heading">Last-known values</h2>
      <p class="muted">
        What each read function last reported. Reading them asks nothing of the device. <span id="live-status" role="status"></span>
      </p>
      {reads.length === 0 ? (
        <p class="muted" id="no-values">
          This device publishes no read function: it has no values to show.
        </p>
      ) : (
        <div class="table-wrap">
          <table class="stack" id="state-values" data-device-id={props.device.id}>
            <caption class="visually-hidden">Last-known values of {props.device.name}</caption>
            <thead>
              <tr>
                <th scope="col">Function</th>
                <th scope="col">Value</th>
                <th scope="col">Reported</th>
                <th scope="col">From</th>
              </tr>
            </thead>
            <tbody>
              {reads.map((fn) => {
                const value = byName.get(fn.name);
                return (
                  <tr data-capability={fn.name} data-has-value={value ? 'true' : 'false'}>
                    <td data-label="Function">
                      <code class="fn">{fn.name}</code>
                    </td>
                    <td data-label="Value" data-field="value">
                      {value ? <StateValue value={value.value} /> : <span class="muted">no value yet</span>}
                    </td>
                    <td data-label="Reported" data-field="reported-at">
                      {value ? <Time ms={value.reportedAt} /> : ''}
                    </td>
                    <td data-label="From" data-field="source">
                      {value ? <Source value={value} /> : ''}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

/** The device's functions in words: what each does and takes (and reports), the JSON Schema folded away. */
function Functions(props: { device: Device }) {
  const { device } = props;
  return (
    <section aria-labelledby="functions-heading">
      <h2 id="functions-heading">Functions</h2>
      {device.capabilities.length === 0 ? (
        <p class="muted">No functions published.</p>
      ) : (
        <ul class="functions" id="functions">
          {device.capabilities.map((fn) => (
            <li data-function={fn.name}>
              <p>
                <code class="fn">{fn.name}</code> <AccessLevel kind={fn.kind} />{' '}
                {fn.kind === 'control' ? 'changes the device.' : 'reads the device; its result is the last-known value.'}
                {fn.description ? <span class="fn-description"> {shown(fn.description)}</span> : null}
              </p>
              <p class="muted">Takes</p>
              <ArgumentFields schema={fn.arguments} />
              {fn.result ? (
                <>
                  <p class="muted">Reports</p>
                  <ArgumentFields schema={fn.result} empty="reports no fields" />
                </>
              ) : null}
              <details>
                <summary class="muted">JSON Schema of {fn.name}</summary>
                {/* Focusable, so a keyboard can scroll a schema wider than a phone. */}
                <pre tabindex={0} aria-label={`JSON Schema of ${fn.name}`}>
                  {JSON.stringify(fn.result ? { arguments: fn.arguments, result: fn.result } : fn.arguments, null, 2)}
                </pre>
              </details>
            </li>
          ))}
        </ul>
      )}
    </section>
  );
}

function RecentActions(props: { deviceId: string; actions: Action[]; agents: Map<string, string> }) {
  return (
    <section aria-labelledby="actions-heading">
      <h2 id="actions-heading">Recent actions</h2>
      {props.actions.length === 0 ? (
        <p class="muted" id="no-actions">
          No agent has asked this device for anything yet.
        </p>
      ) : (
        <div class="table-wrap">
          <table class="stack" id="device-actions">
            <caption class="visually-hidden">The {RECENT_ACTIONS} most recent actions on this device, newest first</caption>
            <thead>
              <tr>
                <th scope="col">Requested</th>
                <th scope="col">Agent</th>
                <th scope="col">Function</th>
                <th scope="col">Status</th>
              </tr>
            </thead>
            <tbody>
              {props.actions.map((action) => {
                const reason = reasonOf(action);
                return (
                  <tr data-action-id={action.id}>
                    <td data-label="Requested">
                      <a href={`/console/actions/${action.id}`}>
                        <Time ms={action.createdAt} />
                      </a>
                    </td>
                    <td data-label="Agent">{props.agents.get(action.principal) ?? <code>{shown(action.principal)}</code>}</td>
                    <td data-label="Function">
                      <code>{action.capability}</code>
                    </td>
                    <td data-label="Status">
                      <strong>{action.status}</strong>
                      {reason ? <span class="muted"> · {shown(reason)}</span> : null}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
      <p>
        <a href={`/console/activity?deviceId=${props.deviceId}`}>Every action on this device</a>
      </p>
    </section>
  );
}

function Grants(props: { grants: Grant[]; agents: Map<string, string> }) {
  return (
    <section aria-labelledby="grants-heading">
      <h2 id="grants-heading">Grants on this device</h2>
      {props.grants.length === 0 ? (
        <p class="muted" id="no-grants">
          No agent holds a grant on this device: none can read or control it.
        </p>
      ) : (
        <div class="table-wrap">
          <table class="stack" id="device-grants">
            <caption class="visually-hidden">Which agent may use which function of this device</caption>
            <thead>
              <tr>
                <th scope="col">Agent</th>
                <th scope="col">Function</th>
                <th scope="col">Approval</th>
                <th scope="col">Expires</th>
              </tr>
            </thead>
            <tbody>
              {props.grants.map((grant) => (
                <tr data-grant-id={grant.id} data-principal={grant.principal}>
                  <td data-label="Agent">
                    <a href={`/console/grants?principal=${encodeURIComponent(grant.principal)}`}>
                      {props.agents.get(grant.principal) ?? shown(grant.principal)}
                    </a>
                  </td>
                  <td data-label="Function">
                    <code>{grant.capability}</code> <AccessLevel kind={grant.functionKind} />
                  </td>
                  <td data-label="Approval">{APPROVAL_TEXT[grant.approval]}</td>
                  <td data-label="Expires" data-field="state">
                    <Time ms={grant.expiresAt} never="never" />
                    {grant.gatewayId ? ' (by a gateway grant)' : ''}
                    {grant.expired ? <strong class="badge expired"> expired</strong> : null}
                    {grant.stale ? <strong class="badge stale"> stale: {staleReason(grant.stale)}</strong> : null}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}

function Rename(props: { device: Device; viewer: Viewer }) {
  return (
    <form method="post" action={`/console/devices/${props.device.id}/rename`} class="rename" id="rename">
      <Csrf viewer={props.viewer} />
      <input type="hidden" name="back" value="device" />
      <label>
        <span class="visually-hidden">New name</span> <input name="name" value={props.device.name} required maxlength={64} />
      </label>{' '}
      <button type="submit">Rename</button>
    </form>
  );
}

export function mountDevicePage(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/devices/:deviceId',
    guards.page(async (c, signed) => {
      const deviceId = c.req.param('deviceId') ?? '';
      const device = (await allDevices(guards, signed)).find((d) => d.id === deviceId);
      if (!device) return guards.errorPage(c, 'No such device', 'This workspace has no such device.', 404, signed.viewer);
      const [state, recent, grants, agents] = await Promise.all([
        guards.invoke(signed, operations.getDeviceState, { deviceId }),
        guards.call(signed, operations.listRecentActions, { deviceId, limit: RECENT_ACTIONS }),
        grantsOn(guards, signed, deviceId),
        knownAgents(guards, signed),
      ]);
      if (recent.kind !== 'page') throw new Error('actions.list answers pages');
      const agentNames = new Map(agents.map((a) => [a.principal, shown(a.name)]));
      const done = DONE[c.req.query('done') as keyof typeof DONE];
      return c.html(
        <Page title={shown(device.name)} viewer={signed.viewer} screen="devices" live>
          <Flash done={done} />
          <dl class="action-details" id="device" data-device-id={device.id}>
            <dt>Status</dt>
            <dd id="device-status">
              <DeviceStatus device={device} online={state.online} />
            </dd>
            <dt>Last seen</dt>
            <dd id="device-last-seen">
              <Time ms={state.lastSeenAt} never="never" />
            </dd>
            <dt>Kind</dt>
            <dd>{device.kind}</dd>
            <dt>Id</dt>
            <dd>
              <code>{device.id}</code>
            </dd>
            <dt>Name</dt>
            <dd>
              <Rename device={device} viewer={signed.viewer} />
            </dd>
          </dl>
          <Values device={device} state={state} />
          <Functions device={device} />
          <RecentActions deviceId={device.id} actions={recent.data} agents={agentNames} />
          <Grants grants={grants} agents={agentNames} />
          <p>
            <a href="/console">All devices</a>
            {device.revoked ? null : (
              <>
                {' '}
                ·{' '}
                <a href={`/console/devices/${device.id}/revoke`} class="danger">
                  Revoke {device.name}…
                </a>
              </>
            )}
          </p>
        </Page>,
      );
    }),
  );
}

import type { Hono } from 'hono';
import type { z } from 'zod';
import { operations } from '../../domain/registry.js';
import type { device as deviceSchema } from '../../domain/schemas.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import type { DeviceState } from '../../domain/device-state.js';
import { ArgumentFields, stateSummary } from '../arguments.js';
import { Csrf, Flash, Page, Term, Time, type Viewer } from '../layout.js';

/**
 * Devices: the tree of gateways, children and services, each with its key values (the last-known
 * values of its read functions), its functions, rename, revoke with a confirmation, and a link
 * to the device's own page (src/console/screens/device.tsx).
 */

export type Device = z.infer<typeof deviceSchema>;

/** Values shown on a device's line in the list; its page shows them all. */
const KEY_VALUES = 3;

/** The last-known values of every device that is not revoked, by device id: `deviceStates.list`, one read of the values per page of devices. */
async function keyValues(guards: Guards, signed: Signed, devices: Device[]): Promise<Map<string, DeviceState['values']>> {
  const revoked = new Set(devices.filter((d) => d.revoked).map((d) => d.id));
  const values = new Map<string, DeviceState['values']>();
  let cursor: string | undefined;
  do {
    const answer = await guards.call(signed, operations.listDeviceStates, cursor ? { cursor } : {}, 1000);
    if (answer.kind !== 'page') throw new Error('deviceStates.list answers pages');
    for (const state of answer.data as DeviceState[]) if (state.values.length > 0 && !revoked.has(state.deviceId)) values.set(state.deviceId, state.values);
    cursor = answer.nextCursor ?? undefined;
  } while (cursor);
  return values;
}

/** Every device of the workspace, page after page (the tree needs them all). */
export async function allDevices(guards: Guards, signed: Signed): Promise<Device[]> {
  const devices: Device[] = [];
  let cursor: string | undefined;
  do {
    const answer = await guards.call(signed, operations.listWorkspaceDevices, cursor ? { cursor } : {}, 1000);
    if (answer.kind !== 'page') throw new Error('devices.list answers pages');
    devices.push(...answer.data);
    cursor = answer.nextCursor ?? undefined;
  } while (cursor);
  return devices;
}

const DONE = {
  revoked: 'The device is revoked: its credential (and its children’s) answers 401 from the next request on.',
  renamed: 'The device is renamed: the name is kept whatever its manifest says later.',
} as const;

/** Revoked, online or offline; `online` overrides the listing's when the page read the device's state later. */
export function DeviceStatus(props: { device: Device; online?: boolean }) {
  const { device } = props;
  if (device.revoked)
    return (
      <span class="status-revoked" data-state="revoked">
        revoked
      </span>
    );
  return (props.online ?? device.online) ? (
    <span class="status-online" data-state="online">
      online
    </span>
  ) : (
    <span class="status-offline" data-state="offline">
      offline
    </span>
  );
}

/** The owner's name for the device, kept over any name its manifest publishes later (POST /v1/devices/{deviceId}/rename). */
function RenameForm(props: { device: Device; viewer: Viewer }) {
  return (
    <form method="post" action={`/console/devices/${props.device.id}/rename`} class="rename">
      <Csrf viewer={props.viewer} />
      <label>
        Name <input name="name" value={props.device.name} required maxlength={64} aria-label={`New name for ${props.device.name}`} />
      </label>{' '}
      <button type="submit">Rename</button>
    </form>
  );
}

/** A device's first few last-known values on one line each, filled live by the script (`device.state_changed`). */
function KeyValues(props: { device: Device; values: DeviceState['values'] | undefined }) {
  const values = props.values ?? [];
  if (values.length === 0) return null;
  return (
    <ul class="key-values" data-device-id={props.device.id}>
      {values.slice(0, KEY_VALUES).map((v) => (
        <li data-capability={v.capability}>
          <code class="fn">{v.capability}</code> <span data-field="summary">{stateSummary(v.value)}</span>
        </li>
      ))}
      {values.length > KEY_VALUES ? (
        <li class="muted">
          <a href={`/console/devices/${props.device.id}`}>{values.length - KEY_VALUES} more</a>
        </li>
      ) : null}
    </ul>
  );
}

/** Below a device's entry: the link to its page and its key values. */
function DeviceLine(props: { device: Device; values: DeviceState['values'] | undefined }) {
  return (
    <div class="device-line">
      <a href={`/console/devices/${props.device.id}`} class="device-page">
        Page of {props.device.name}
      </a>
      <KeyValues device={props.device} values={props.values} />
    </div>
  );
}

function DeviceNode(props: { device: Device; children: Map<string | null, Device[]>; values: Map<string, DeviceState['values']>; viewer: Viewer }) {
  const { device } = props;
  const below = props.children.get(device.id) ?? [];
  return (
    <li class="device" data-device-id={device.id}>
      <details>
        <summary>
          <strong class="device-name">{device.name}</strong> <span class="muted">({device.kind})</span> · <DeviceStatus device={device} /> · last seen{' '}
          <Time ms={device.lastSeenAt} />
        </summary>

        <p class="muted">
          id <code>{device.id}</code>
          {device.key ? (
            <>
              {' '}
              · key <code>{device.key}</code>
            </>
          ) : null}{' '}
          · attached <Time ms={device.createdAt} />
        </p>
        {device.capabilities.length === 0 ? (
          <p class="muted">No functions published.</p>
        ) : (
          <div class="table-wrap">
            <table class="stack">
              <caption class="muted">Functions of {device.name}</caption>
              <thead>
                <tr>
                  <th scope="col">Function</th>
                  <th scope="col">
                    <Term api="kind">Access level</Term>
                  </th>
                  <th scope="col">Description</th>
                  <th scope="col">Arguments</th>
                </tr>
              </thead>
              <tbody>
                {device.capabilities.map((fn) => (
                  <tr>
                    <td data-label="Function">
                      <code class="fn">{fn.name}</code>
                    </td>
                    <td data-label="Access level">{fn.kind === 'control' ? 'control (changes the device)' : 'read'}</td>
                    <td data-label="Description">{fn.description ?? ''}</td>
                    <td data-label="Arguments">
                      <ArgumentFields schema={fn.arguments} />
                      <details>
                        <summary class="muted">JSON Schema</summary>
                        <pre>{JSON.stringify(fn.arguments, null, 2)}</pre>
                      </details>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <RenameForm device={device} viewer={props.viewer} />
        {device.revoked ? null : (
          <p>
            <a href={`/console/devices/${device.id}/revoke`} class="button danger">
              Revoke {device.name}…
            </a>
          </p>
        )}
      </details>
      <DeviceLine device={device} values={props.values.get(device.id)} />
      {below.length > 0 ? (
        <ul class="tree">
          {below.map((child) => (
            <DeviceNode device={child} children={props.children} values={props.values} viewer={props.viewer} />
          ))}
        </ul>
      ) : null}
    </li>
  );
}

export function mountDevices(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console',
    guards.page(async (c, signed) => {
      const devices = await allDevices(guards, signed);
      const children = new Map<string | null, Device[]>();
      for (const device of devices) children.set(device.parentId, [...(children.get(device.parentId) ?? []), device]);
      const roots = children.get(null) ?? [];
      const values = await keyValues(guards, signed, devices);
      const done = DONE[c.req.query('done') as keyof typeof DONE];
      return c.html(
        <Page title="Devices" viewer={signed.viewer} screen="devices">
          <Flash done={done} />
          {devices.length === 0 ? (
            <p>
              No devices yet. <a href="/console/attach">Attach one</a> with a setup token.
            </p>
          ) : (
            <>
              <p class="muted">
                {devices.length} device{devices.length === 1 ? '' : 's'}: gateways list their children and services beneath them. Open a device to see its
                functions.
              </p>
              <ul class="tree" id="devices">
                {roots.map((device) => (
                  <DeviceNode device={device} children={children} values={values} viewer={signed.viewer} />
                ))}
              </ul>
            </>
          )}
        </Page>,
      );
    }),
  );

  const ConfirmRevoke = (props: { device: Device; viewer: Viewer }) => (
    <Page title="Revoke a device" viewer={props.viewer} screen="devices">
      <p class="warning">
        Revoke <strong>{props.device.name}</strong>
        {props.device.kind === 'gateway' ? ' and every child and service of this gateway' : ''}? Its credential stops working at once. This cannot be undone:
        the device must be attached again.
      </p>
      <form method="post" action={`/console/devices/${props.device.id}/revoke`}>
        <Csrf viewer={props.viewer} />
        <button type="submit" class="danger" id="confirm-revoke">
          Revoke {props.device.name}
        </button>{' '}
        <a href="/console">Cancel</a>
      </form>
    </Page>
  );

  // The confirmation is a page of its own, so it works without any script.
  app.get(
    '/console/devices/:deviceId/revoke',
    guards.page(async (c, signed) => {
      const device = (await allDevices(guards, signed)).find((d) => d.id === c.req.param('deviceId'));
      if (!device) return guards.errorPage(c, 'No such device', 'This workspace has no such device.', 404, signed.viewer);
      return c.html(<ConfirmRevoke device={device} viewer={signed.viewer} />);
    }),
  );

  app.post(
    '/console/devices/:deviceId/rename',
    guards.action(async (c, signed, form) => {
      const renamed = await guards.attempt(signed, operations.renameWorkspaceDevice, { deviceId: c.req.param('deviceId'), name: form.get('name') ?? '' });
      if (!renamed.ok) {
        const issues = (renamed.issues ?? []).map((issue) => `${issue.path}: ${issue.message}`).join('; ');
        return guards.errorPage(c, 'The device keeps its name', issues ? `${renamed.message} ${issues}` : renamed.message, renamed.status, signed.viewer);
      }
      // Renamed from the device's own page, the owner stays on it.
      const deviceId = c.req.param('deviceId') ?? '';
      return c.redirect(form.get('back') === 'device' ? `/console/devices/${encodeURIComponent(deviceId)}?done=renamed` : '/console?done=renamed', 303);
    }),
  );

  app.post(
    '/console/devices/:deviceId/revoke',
    guards.action(async (c, signed) => {
      await guards.invoke(signed, operations.revokeWorkspaceDevice, { deviceId: c.req.param('deviceId') });
      return c.redirect('/console?done=revoked', 303);
    }),
  );
}

import { ResourceTemplate, type McpServer, type ReadResourceResult } from '@modelcontextprotocol/server';
import { ACTION_STATUSES } from '../domain/action-states.js';
import { fail } from '../domain/errors.js';
import { invoke } from '../domain/invoke.js';
import { operations } from '../domain/registry.js';
import { registerAppResources } from './apps.js';
import { deviceForAgent, deviceText, MAX_DEVICE_NAME_CHARS, quotedName } from './device-text.js';
import { resourceError } from './errors.js';
import type { McpSession } from './session.js';

const JSON_TYPE = 'application/json';

function contents(uri: string, value: unknown): ReadResourceResult {
  return { contents: [{ uri, mimeType: JSON_TYPE, text: JSON.stringify(value, null, 2) }] };
}

/**
 * `device://{deviceId}` and `action://{actionId}` (docs/reference/rules.md "MCP"). Both read through the
 * same registry operations as REST (`devices.list`, `actions.get`), so the grant filter is
 * the same one: an agent lists and reads only devices it may call a function on now, and
 * only actions its principal requested. Anything else reads as not found (SEP-2164).
 */
export function registerResources(server: McpServer, session: McpSession): void {
  const { ctx } = session;
  const devices = () => invoke(operations.listWorkspaceDevices, ctx, {});

  server.registerResource(
    'device',
    new ResourceTemplate('device://{deviceId}', {
      list: async () => ({
        resources: (await devices()).map((d) => ({
          uri: `device://${d.id}`,
          // The device's own name, cleaned and capped as in tool descriptions (device-text.ts).
          name: deviceText(d.name, MAX_DEVICE_NAME_CHARS),
          title: deviceText(d.name, MAX_DEVICE_NAME_CHARS),
          description: `${d.kind === 'service' ? 'Integration-wide service' : d.kind === 'gateway' ? 'Gateway' : 'Device'} ${quotedName(d.name)} with the ${d.capabilities.length} function(s) you may call.`,
          mimeType: JSON_TYPE,
        })),
      }),
    }),
    {
      title: 'Device',
      description: 'A device record: kind, place (parentId), online state and the functions you may call on it.',
      mimeType: JSON_TYPE,
    },
    async (uri, variables) => {
      try {
        const device = (await devices()).find((d) => d.id === variables.deviceId);
        if (!device) throw fail.notFound('Device');
        // The device's own words cleaned, as list_devices answers them (device-text.ts).
        return contents(uri.href, deviceForAgent(device));
      } catch (error) {
        throw resourceError(error, uri.href, ctx);
      }
    },
  );

  registerStateResource(server, session, devices);
  registerAppResources(server);

  server.registerResource(
    'action',
    new ResourceTemplate('action://{actionId}', {
      // The principal's own newest actions: what an agent may read with get_action.
      list: async () => ({
        resources: (await invoke(operations.listRequestedActions, ctx, {})).map((a) => ({
          uri: `action://${a.id}`,
          name: `${a.capability} ${a.status}`,
          title: `${a.capability} on ${a.deviceId}: ${a.status}`,
          mimeType: JSON_TYPE,
        })),
      }),
    }),
    {
      title: 'Action',
      description: `An action you requested: status (${ACTION_STATUSES.join(', ')}), result or error.`,
      mimeType: JSON_TYPE,
    },
    async (uri, variables) => {
      try {
        return contents(uri.href, await invoke(operations.getActionState, ctx, { actionId: variables.actionId }));
      } catch (error) {
        throw resourceError(error, uri.href, ctx);
      }
    },
  );
}

/**
 * `device://{deviceId}/state` for each device with a read function the caller may call: its
 * last-known values, read through `devices.state` as REST's `GET /v1/devices/{deviceId}/state`
 * answers them. A 2026-07-28 caller follows it on its listen stream (subscriptions/state-watch.ts).
 */
function registerStateResource(
  server: McpServer,
  session: McpSession,
  devices: () => Promise<{ id: string; name: string; capabilities: { kind: string }[] }[]>,
) {
  const { ctx } = session;
  server.registerResource(
    'device-state',
    new ResourceTemplate('device://{deviceId}/state', {
      // A device with a read function the caller holds a live grant on: its last-known values.
      list: async () => ({
        resources: (await devices())
          .filter((d) => d.capabilities.some((c) => c.kind === 'read'))
          .map((d) => ({
            uri: `device://${d.id}/state`,
            name: `${deviceText(d.name, MAX_DEVICE_NAME_CHARS)} state`,
            title: `${deviceText(d.name, MAX_DEVICE_NAME_CHARS)}: last-known values`,
            description: `What ${quotedName(d.name)} last reported for the read functions you may call, when, and whether it is online; reading it wakes nothing.`,
            mimeType: JSON_TYPE,
          })),
      }),
    }),
    {
      title: 'Device state',
      description:
        "A device's last-known values (get_device_state): each read function's latest value with when it was reported, and whether the device is online. Read it before acting; subscribe to be told when it changes.",
      mimeType: JSON_TYPE,
    },
    async (uri, variables) => {
      try {
        return contents(uri.href, await invoke(operations.getDeviceState, ctx, { deviceId: variables.deviceId }));
      } catch (error) {
        throw resourceError(error, uri.href, ctx);
      }
    },
  );
}

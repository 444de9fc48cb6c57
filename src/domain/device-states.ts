import { z } from 'zod';
import { readStateValuesOf } from '../store/device-state.js';
import { listDevicesPage } from '../store/devices.js';
import { deviceState, type DeviceState } from './device-state.js';
import { ONLINE_WINDOW_MS } from './devices.js';
import { listCallableFunctions } from './functions.js';
import { definePagedOperation } from './operation.js';
import { ROW_ORDER_KEY } from './paging.js';

/**
 * The last-known state of a page of devices (docs/devices/state.md), in the order and pages of
 * `GET /v1/devices`: what a list of devices shows beside each device (the console's device
 * list) costs one read of the devices and one of their values for the page, not one read per
 * device. Each item is what `GET /v1/devices/{deviceId}/state` answers for that device.
 */
export const listDeviceStates = definePagedOperation({
  name: 'deviceStates.list',
  title: 'List devices’ last-known state',
  description:
    "The last-known state of each device, a page at a time in the order of GET /v1/devices: each item is what GET /v1/devices/{deviceId}/state answers. Nothing is queued and no device is woken. An owner sees every device and every read function's value; an agent only the devices it may call a function on, and the values of the read functions it holds a live grant on.",
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest'],
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/device-states' }],
  input: z.strictObject({}),
  output: z.array(deviceState),
  paged: { key: ROW_ORDER_KEY },
  async run({ ctx, credential, page }) {
    const now = ctx.clock.now();
    const agent = credential.kind === 'agent' ? credential : null;
    // An agent's page is cut from the devices it may call a function on, as devices.list cuts it.
    const only = agent ? [...new Set((await listCallableFunctions(ctx.db, agent, now)).map((fn) => fn.deviceId))] : null;
    const { rows, next } = await listDevicesPage(ctx.db, credential.workspaceId, page, only);
    const values = await readStateValuesOf(
      ctx.db,
      credential.workspaceId,
      rows.map((row) => row.id),
      agent ? agent.principal : null,
      now,
    );
    const byDevice = new Map<string, DeviceState['values']>();
    for (const row of values) {
      const list = byDevice.get(row.deviceId) ?? [];
      list.push({
        capability: row.capability,
        value: JSON.parse(row.value) as unknown,
        reportedAt: row.reportedAt,
        source: row.source,
        actionId: row.actionId,
      });
      byDevice.set(row.deviceId, list);
    }
    const items: DeviceState[] = rows.map((row) => ({
      deviceId: row.id,
      online: row.revokedAt === null && row.lastSeenAt !== null && now - row.lastSeenAt < ONLINE_WINDOW_MS,
      lastSeenAt: row.lastSeenAt,
      values: byDevice.get(row.id) ?? [],
    }));
    return { items, next };
  },
});

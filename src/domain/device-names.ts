import { z } from 'zod';
import { getDevice, renameDevice } from '../store/devices.js';
import { appendWorkspaceEvent } from '../store/event-journal.js';
import { workspaceDevices, deviceName } from './devices.js';
import { fail } from './errors.js';
import { announceJournal } from './event-hub.js';
import { defineOperation } from './operation.js';
import { device, uuid } from './schemas.js';

/**
 * The owner names a device (docs/reference/rules.md "Devices"). A device names itself only when
 * it attaches, and a gateway names its children in every manifest; once the owner has chosen a
 * name it is kept, so a republished manifest cannot undo it.
 */
export const renameWorkspaceDevice = defineOperation({
  name: 'devices.rename',
  title: 'Rename a device',
  description: "Give a device (or a gateway's child) the name the owner chooses; it is kept over any name a manifest publishes later.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/devices/{deviceId}/rename' }],
  input: z.strictObject({ deviceId: uuid, name: deviceName.describe('The new name, 1 to 64 characters.') }),
  output: device,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    await ctx.db.transaction(async (tx) => {
      const before = await getDevice(tx, credential.workspaceId, input.deviceId);
      if (!before) throw fail.notFound('Device');
      await renameDevice(tx, credential.workspaceId, input.deviceId, input.name);
      await appendWorkspaceEvent(tx, {
        workspaceId: credential.workspaceId,
        type: 'device.renamed',
        subjectId: before.id,
        data: { id: before.id, name: input.name, kind: before.kind, parentId: before.parentId },
        createdAt: now,
      });
    });
    announceJournal(ctx, credential.workspaceId);
    const all = await workspaceDevices(ctx.db, credential.workspaceId, now);
    return all.find((d) => d.id === input.deviceId)!;
  },
});

import { z } from 'zod';
import { oldestQueuedPerTarget } from '../store/action-hand-out.js';
import { controlsPause, pauseControls, resumeControls } from '../store/workspaces.js';
import { publishActions } from './action-publishing.js';
import type { OperationContext } from './context.js';
import { DomainError } from './errors.js';
import type { Queryable } from '../store/driver.js';
import { appendWorkspaceEvent } from '../store/event-journal.js';
import { announceJournal } from './event-hub.js';
import { defineOperation } from './operation.js';
import { timestamp } from './schemas.js';

/**
 * The owner's pause switch for device control (docs/owners/console-guide.md "Pause device
 * control"): the service-wide kill switch (DEVICE_CONTROLS_ENABLED) for one workspace, thrown
 * and reset by its owner without a restart. `invoke` refuses what would queue an action while
 * either is off (src/domain/invoke.ts `assertControlsEnabled`), and `next` hands out nothing.
 */

export const deviceControls = z.object({
  enabled: z
    .boolean()
    .describe("Whether agents' requests may queue actions in this workspace now: the service's switch is on and the workspace is not paused."),
  paused: z.boolean().describe("The workspace's own pause switch, set by its owner."),
  pausedAt: timestamp.nullable().describe('When the owner paused device control; null while it runs.'),
  pausedBy: z.string().nullable().describe('The owner (`sub`) who paused it; null while it runs.'),
  serviceEnabled: z.boolean().describe('The service-wide kill switch (`DEVICE_CONTROLS_ENABLED`), which only the operator sets.'),
});

type DeviceControls = z.infer<typeof deviceControls>;

async function stateOf(ctx: OperationContext, workspaceId: string): Promise<DeviceControls> {
  const pause = await controlsPause(ctx.db, workspaceId);
  const serviceEnabled = ctx.settings.deviceControlsEnabled;
  return { enabled: serviceEnabled && pause.pausedAt === null, paused: pause.pausedAt !== null, ...pause, serviceEnabled };
}

/** Whether the workspace's owner has paused device control (read on every request that would queue an action). */
export async function workspacePaused(ctx: OperationContext, workspaceId: string): Promise<boolean> {
  return (await controlsPause(ctx.db, workspaceId)).pausedAt !== null;
}

/** The answer to a request that would queue an action in a paused workspace. */
export function pausedRefusal(): DomainError {
  return new DomainError(
    'device_controls_disabled',
    'Device control is paused for this workspace by its owner: no action is queued or handed to a device until the owner resumes it. Reads keep working.',
  );
}

/** Refuses with `pausedRefusal` when the workspace's owner has paused device control (`db`: a transaction's own, inside one). */
export async function assertNotPaused(db: Queryable, workspaceId: string): Promise<void> {
  if ((await controlsPause(db, workspaceId)).pausedAt !== null) throw pausedRefusal();
}

export const getDeviceControls = defineOperation({
  name: 'deviceControls.get',
  title: 'Get the device-control switch',
  description: "Whether agents' requests may queue actions in this workspace: the owner's pause switch and the service-wide kill switch.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/device-controls' }],
  input: z.strictObject({}),
  output: deviceControls,
  run: ({ ctx, credential }) => stateOf(ctx, credential.workspaceId),
});

export const setDeviceControls = defineOperation({
  name: 'deviceControls.set',
  title: 'Pause or resume device control',
  description:
    'Pause (`paused: true`) or resume device control for this workspace. While paused, every request that would queue an action (REST, broadcast, MCP device tool) answers 503 `device_controls_disabled`, and devices are handed nothing: commands already queued wait, cancellable, until they expire or control resumes. Reads, grants, history and cancel keep working. Persisted: it holds across restarts and on every instance.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/device-controls' }],
  input: z.strictObject({ paused: z.boolean().describe('true pauses device control for this workspace; false resumes it.') }),
  output: deviceControls,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const switched = await ctx.db.transaction(async (tx) => {
      const before = await controlsPause(tx, credential.workspaceId);
      const changed = input.paused
        ? await pauseControls(tx, credential.workspaceId, credential.subject, now)
        : await resumeControls(tx, credential.workspaceId);
      if (changed !== 1) return false;
      await appendWorkspaceEvent(tx, {
        workspaceId: credential.workspaceId,
        type: input.paused ? 'controls.paused' : 'controls.resumed',
        subjectId: credential.workspaceId,
        data: { paused: input.paused, by: credential.subject, pausedAt: before.pausedAt ?? now },
        createdAt: now,
      });
      return true;
    });
    if (switched) announceJournal(ctx, credential.workspaceId);
    if (switched && !input.paused) {
      // Commands held while paused: each device that holds one is woken (the wake channel sends a
      // frame for a queued action), rather than waiting for its next safety poll.
      publishActions(ctx, await oldestQueuedPerTarget(ctx.db, credential.workspaceId, now));
    }
    return stateOf(ctx, credential.workspaceId);
  },
});

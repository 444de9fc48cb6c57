import { z } from 'zod';
import { STATE_EVENT_INTERVAL_MS, flushOwedStateEvents, readDeviceState, reportableFunctions, storeReportedValues } from '../store/device-state.js';
import type { Db } from '../store/driver.js';
import { RESULT_MAX_BYTES } from '../store/usage.js';
import { QUOTA_RETRY_AFTER_SECONDS } from './capacity.js';
import type { Clock, Logger, OperationContext } from './context.js';
import { DomainError, fail, logSweepFailure, type ErrorIssue } from './errors.js';
import { announceStateJournal, type EventHub } from './event-hub.js';
import { noteDeviceSeen, ONLINE_WINDOW_MS } from './devices.js';
import { defineOperation } from './operation.js';
import { timestamp, uuid } from './schemas.js';

/** Entries one state report may hold (docs/devices/state.md). */
export const STATE_REPORT_MAX_VALUES = 64;

export const stateValue = z.object({
  capability: z.string().describe('The read function.'),
  value: z.unknown().describe('Its last-known value: the `result` object its device last reported.'),
  reportedAt: timestamp.describe('When the device last reported it (an equal value reported again moves only this).'),
  source: z.enum(['result', 'report']).describe('`result`: the result of a successful action; `report`: the device reported it on its own.'),
  actionId: uuid.nullable().describe('The action whose result it is; null for a report.'),
});

export const deviceState = z.object({
  deviceId: uuid,
  online: z.boolean().describe('Called in within the last 60 seconds (children: their gateway).'),
  lastSeenAt: timestamp.nullable(),
  values: z.array(stateValue).describe('The read functions that have a value, in manifest order; an agent sees only those it holds a live grant on.'),
});

export type DeviceState = z.infer<typeof deviceState>;

/**
 * A device's last-known values as the caller may see them (docs/devices/state.md): the owner
 * every read function's, an agent only those of read functions it holds a live grant on, and a
 * device on which it holds no live grant at all is not found. One read; nothing is queued and
 * no device is woken.
 */
export async function deviceStateFor(ctx: OperationContext, workspaceId: string, principal: string | null, deviceId: string): Promise<DeviceState> {
  const now = ctx.clock.now();
  const rows = await readDeviceState(ctx.db, workspaceId, deviceId, principal, now);
  if (!rows || rows.granted !== 1) throw fail.notFound('Device');
  return {
    deviceId: rows.deviceId,
    online: rows.revokedAt === null && rows.lastSeenAt !== null && now - rows.lastSeenAt < ONLINE_WINDOW_MS,
    lastSeenAt: rows.lastSeenAt,
    values: rows.values.map((row) => ({
      capability: row.capability,
      value: JSON.parse(row.value) as unknown,
      reportedAt: row.reportedAt,
      source: row.source,
      actionId: row.actionId,
    })),
  };
}

/**
 * After a write of values: open owner streams read the journal when an event was written, and
 * MCP subscribers of the device's state resource are told when a value changed.
 */
export function announceState(
  ctx: Pick<OperationContext, 'events'>,
  workspaceId: string,
  deviceId: string,
  written: { changed: number; journalled: number }[],
): void {
  if (written.some((row) => row.journalled === 1)) announceStateJournal(ctx, workspaceId);
  if (written.some((row) => row.changed === 1)) ctx.events.publish({ type: 'device-state', workspaceId, deviceId });
}

/** How often owed `device.state_changed` events are looked for while values change: the latest value of a busy function is journalled this soon after its second. */
export const STATE_EVENT_SWEEP_MS = 250;
/**
 * How often they are looked for while no value changed here lately: the sweep is a write, and
 * a service with no state traffic should not take the write lock four times a second. An event
 * owed by an instance that stopped is journalled by another within this long.
 */
export const STATE_EVENT_IDLE_SWEEP_MS = 10_000;
/** Owed events journalled per statement of the sweep. */
const STATE_EVENT_BATCH = 500;

/**
 * Journals the `device.state_changed` events owed for values that changed again within a
 * second of their last event, once that second has passed, with the value then stored (the
 * latest wins): every `intervalMs` while a value changed (on this instance, or on another that
 * said so over the bus) within the last two event intervals, else every
 * STATE_EVENT_IDLE_SWEEP_MS. Returns a function that stops the sweep.
 */
export function startStateEventSweep(deps: { db: Db; events: EventHub; clock: Clock; log: Logger }, intervalMs = STATE_EVENT_SWEEP_MS): () => void {
  let running = false;
  let changedAt = -Infinity;
  let sweptAt = deps.clock.now();
  const unsubscribe = deps.events.subscribe((event) => {
    if (event.type === 'device-state') changedAt = deps.clock.now();
  });
  const timer = setInterval(() => {
    const now = deps.clock.now();
    if (running || (now - changedAt > 2 * STATE_EVENT_INTERVAL_MS + intervalMs && now - sweptAt < STATE_EVENT_IDLE_SWEEP_MS)) return;
    running = true;
    sweptAt = now;
    Promise.resolve()
      .then(async () => {
        for (const workspaceId of await flushOwedStateEvents(deps.db, now, STATE_EVENT_BATCH)) announceStateJournal(deps, workspaceId);
      })
      .catch((error: unknown) => logSweepFailure(deps.log, 'state event sweep failed', error))
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return () => {
    clearInterval(timer);
    unsubscribe();
  };
}

export const getDeviceState = defineOperation({
  name: 'devices.state',
  title: "Get a device's last-known state",
  description:
    "A device's last-known values: what each read function last reported, when, and whether the device is online. Nothing is queued and the device is not woken. An agent sees only the read functions it holds a live grant on.",
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest', 'mcp'],
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/devices/{deviceId}/state' }],
  mcp: { name: 'get_device_state' },
  input: z.strictObject({ deviceId: uuid }),
  output: deviceState,
  run: ({ ctx, credential, input }) => deviceStateFor(ctx, credential.workspaceId, credential.kind === 'agent' ? credential.principal : null, input.deviceId),
});

export const reportDeviceState = defineOperation({
  name: 'device.state',
  title: 'Report device state',
  description:
    'Report last-known values of read functions on the device\'s own initiative, without an action: `{ "values": { "<read function>": { … } } }`, 1 to 64 entries, each checked against the function\'s `result` schema where it declares one. One bad entry refuses the whole report. `deviceId` names a child of the calling gateway.',
  credentials: ['device'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: true },
  ownDevice: 'reporterId',
  rest: [{ method: 'POST', path: '/v1/device/{reporterId}/state' }],
  input: z.strictObject({
    reporterId: uuid.describe('The calling device (or gateway).'),
    deviceId: uuid.optional().describe('A child of the calling gateway whose state this is; the caller itself when left out.'),
    values: z
      .record(z.string(), z.unknown())
      .refine((values) => Object.keys(values).length >= 1 && Object.keys(values).length <= STATE_REPORT_MAX_VALUES, {
        message: `must hold 1 to ${STATE_REPORT_MAX_VALUES} entries`,
      })
      .describe('Read function name → its value (the `result` object its read would report).'),
  }),
  output: z.object({ accepted: z.number().int().describe('Values stored.') }),
  async run({ ctx, credential, input }) {
    await noteDeviceSeen(ctx, credential);
    const deviceId = input.deviceId ?? credential.deviceId;
    const functions = await reportableFunctions(ctx.db, credential.workspaceId, credential.deviceId, deviceId);
    if (!functions) throw fail.notFound('Device');
    const byName = new Map(functions.map((fn) => [fn.name, fn]));
    const issues: ErrorIssue[] = [];
    const values: { capability: string; value: string }[] = [];
    for (const [name, value] of Object.entries(input.values)) {
      const path = `values.${name}`;
      const fn = byName.get(name);
      if (!fn) {
        issues.push({ path, message: 'the device publishes no function of this name' });
        continue;
      }
      if (fn.kind !== 'read') {
        issues.push({ path, message: 'is a control function: only read functions have a value' });
        continue;
      }
      const text = JSON.stringify(value);
      if (Buffer.byteLength(text) > RESULT_MAX_BYTES) {
        issues.push({ path, message: `at most ${RESULT_MAX_BYTES} bytes as stored JSON (numbers are written out in full)` });
        continue;
      }
      if (fn.result !== null) issues.push(...ctx.schemas.argumentIssues(fn.result, value, path));
      values.push({ capability: name, value: text });
    }
    if (issues.length > 0) throw fail.invalid('The state report is not valid; nothing was stored.', issues);
    const limit = ctx.settings.capacity.storage.action_bytes;
    const stored = await storeReportedValues(ctx.db, credential.workspaceId, deviceId, values, ctx.clock.now(), limit);
    if (!stored) {
      throw new DomainError('quota_exceeded', `The workspace's action_bytes budget is used up: it may store at most ${limit} bytes.`, {
        retryAfterSeconds: QUOTA_RETRY_AFTER_SECONDS,
        budget: { name: 'action_bytes', limit, used: limit },
      });
    }
    announceState(ctx, credential.workspaceId, deviceId, stored);
    return { accepted: stored.length };
  },
});

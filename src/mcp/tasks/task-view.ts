import type { ActionRecord } from '../../domain/action-records.js';
import { CANCEL_REASONS, EXPIRED_REASONS, type ActionStatus } from '../../domain/action-states.js';
import type { DevicePlace } from '../../domain/agent-tasks.js';
import { actionResult } from '../device-tool-call.js';
import type { TaskCreated } from '../session.js';

/**
 * A device action seen as an MCP task (MCP Tasks extension, docs/agents/tasks.md). The task id
 * is the action id and its state is the action's, read afresh on every tasks/get: there is no
 * task record beside the action, so every instance gives the same answer.
 *
 *   awaiting_approval, queued, received  → working (statusMessage says which)
 *   succeeded, failed                    → completed, `result` the device tool's own answer
 *                                          (a device error is `isError: true`, never `failed`,
 *                                          which the extension keeps for JSON-RPC errors)
 *   cancelled, expired, rejected         → cancelled, statusMessage the reason
 *
 * A user confirmation is asked before the action, and so the task, exists (the extension's
 * recommendation for input gathered before a task), so no task is ever `input_required`.
 */
export const TASKS_EXTENSION = 'io.modelcontextprotocol/tasks';

export type TaskStatus = 'working' | 'input_required' | 'completed' | 'cancelled' | 'failed';

/** What a client is told to wait between polls, per state: an owner's decision takes longer than a device. */
const POLL_INTERVAL_MS: Partial<Record<ActionStatus, number>> = { scheduled: 30_000, awaiting_approval: 5_000, queued: 1_000, received: 1_000 };

const iso = (ms: number) => new Date(ms).toISOString();

function stateOf(action: ActionRecord): { status: TaskStatus; statusMessage: string } {
  switch (action.status) {
    case 'scheduled':
      return {
        status: 'working',
        statusMessage: `Scheduled for ${iso(action.notBefore ?? action.createdAt)}; its permissions are checked again then, and the device is asked only then.`,
      };
    case 'awaiting_approval':
      return {
        status: 'working',
        statusMessage: `Waiting for the owner's approval (until ${iso(action.approval?.expiresAt ?? action.expiresAt)}); the device is asked only once it is approved.`,
      };
    case 'queued':
      return { status: 'working', statusMessage: `Queued: waiting for the device to fetch it (deadline ${iso(action.expiresAt)}).` };
    case 'received':
      return action.cancelRequestedAt !== null
        ? { status: 'working', statusMessage: 'The device was asked to stop; waiting for what it reports.' }
        : { status: 'working', statusMessage: `The device has it and is carrying it out (deadline ${iso(action.expiresAt)}).` };
    case 'succeeded':
      return { status: 'completed', statusMessage: 'The device reported success.' };
    case 'failed':
      return { status: 'completed', statusMessage: `The device reported an error: ${action.error?.code ?? 'unknown'}.` };
    case 'cancelled':
      return { status: 'cancelled', statusMessage: `Cancelled: ${action.cancelReason ? CANCEL_REASONS[action.cancelReason] : 'it was withdrawn'}.` };
    case 'expired':
      return { status: 'cancelled', statusMessage: `Expired: ${EXPIRED_REASONS[action.expiredReason ?? 'deadline']}.` };
    case 'rejected':
      return {
        status: 'cancelled',
        statusMessage: `The owner rejected it${action.approval?.reason ? `: ${JSON.stringify(action.approval.reason)}` : '.'}`,
      };
  }
}

export interface TaskClock {
  /** How long a task can be read after it was created: finished actions are kept this long (ACTIONS_RETENTION_DAYS). */
  ttlMs: number;
}

function base(action: ActionRecord, lastUpdatedAt: number, clock: TaskClock) {
  const { status, statusMessage } = stateOf(action);
  const poll = POLL_INTERVAL_MS[action.status];
  return {
    taskId: action.id,
    status,
    statusMessage,
    createdAt: iso(action.createdAt),
    lastUpdatedAt: iso(lastUpdatedAt),
    ttlMs: clock.ttlMs,
    ...(poll !== undefined ? { pollIntervalMs: poll } : {}),
  };
}

/** The answer to the tools/call that created the task: its seed state, no result. */
export function taskCreated(action: ActionRecord, lastUpdatedAt: number, clock: TaskClock): TaskCreated {
  return { resultType: 'task', ...base(action, lastUpdatedAt, clock) };
}

/**
 * The task as tasks/get answers it and `notifications/tasks` carries it: a finished one inlines
 * `result`, the same CallToolResult the synchronous call would have given (`place` names the
 * device in its words; without it, the device id does).
 */
export function detailedTask(action: ActionRecord, lastUpdatedAt: number, place: DevicePlace | undefined, clock: TaskClock): Record<string, unknown> {
  const task = base(action, lastUpdatedAt, clock);
  if (task.status !== 'completed') return task;
  const named = place ?? { deviceName: action.deviceId, deviceKind: 'device', parentId: null, parentName: null };
  // As the synchronous call's answer is on the 2026-07-28 wire: `resultType` included.
  return { ...task, result: { ...actionResult(named, action), resultType: 'complete' } };
}

import type { CallToolResult, ProgressNotificationParams } from '@modelcontextprotocol/server';
import type { ActionRecord } from '../domain/action-records.js';
import { ACTION_STATES, type ActionStatus } from '../domain/action-states.js';
import { readOwnAction } from '../domain/agent-tasks.js';
import { withdrawAction } from '../domain/action-withdrawals.js';
import { DomainError } from '../domain/errors.js';
import { watchComingAction } from '../domain/event-hub.js';
import { authorizedFromListing, type CallableFunction } from '../domain/functions.js';
import { invoke } from '../domain/invoke.js';
import { operations } from '../domain/registry.js';
import { consoleActionUrl, viewResultMeta } from './apps.js';
import { awaitSettled, PROGRESS_MESSAGES, PROGRESS_TOTAL, waitBound } from './action-wait.js';
import { deviceToolName } from './device-tool-names.js';
import { placeOf, type DevicePlace } from './device-text.js';
import { toolError } from './errors.js';
import type { McpSession, TaskCreated } from './session.js';

/** Request `_meta` key: the action request's `idempotencyKey` (docs/agents/idempotency.md). */
export const IDEMPOTENCY_META_KEY = 'dfc/idempotencyKey';
/** Request `_meta` key: the action request's `ttlSeconds` (1..300, default 30). */
export const TTL_META_KEY = 'dfc/ttlSeconds';

export interface DeviceToolCall {
  /** The request's `_meta`: its progress token, the wait bound, the idempotency key and the TTL. */
  meta: Record<string, unknown> | undefined;
  /** The call's JSON-RPC id, by which a 2025-era `notifications/cancelled` names it. */
  id: string | number | undefined;
  /** Aborts when the SDK ends the call; the client's own cancellation is the session's (cancellation.ts). */
  signal?: AbortSignal;
  /** Sends a notification on the request's stream; absent when the answer is plain JSON. */
  notify?: (notification: { method: 'notifications/progress'; params: ProgressNotificationParams }) => Promise<void>;
}

/** The `_meta` keys a device tool call passes to the action request, and the input field each one is. */
const ACTION_META = { [IDEMPOTENCY_META_KEY]: 'idempotencyKey', [TTL_META_KEY]: 'ttlSeconds' } as const;

/** The action request's options from `_meta`, checked by the operation with REST's rules. */
function actionOptions(meta: Record<string, unknown> | undefined): Record<string, unknown> {
  const options: Record<string, unknown> = {};
  for (const [key, field] of Object.entries(ACTION_META)) if (meta?.[key] !== undefined) options[field] = meta[key];
  return options;
}

/** A refused `_meta` value is reported where the caller wrote it, not as the operation's field. */
function atMetaKeys(error: unknown): unknown {
  if (!(error instanceof DomainError) || error.code !== 'validation_failed' || !error.details.issues) return error;
  const issues = error.details.issues.map((issue) => {
    const key = Object.entries(ACTION_META).find(([, field]) => issue.path === field)?.[0];
    return key ? { ...issue, path: `_meta.${key}` } : issue;
  });
  return new DomainError(error.code, error.message, { ...error.details, issues });
}

/**
 * What a device tool's answer says of each status, and whether it is an error result. A
 * Record over the statuses, so a new status cannot be added without deciding both.
 */
const OUTCOMES: Record<ActionStatus, { detail: (action: ActionRecord) => string | null; isError: boolean }> = {
  scheduled: {
    detail: (action) =>
      `It is scheduled for ${new Date(action.notBefore ?? action.createdAt).toISOString()}; every permission is checked again then, and the device is asked only then. ${unfinished(action)}`,
    isError: false,
  },
  awaiting_approval: {
    detail: (action) =>
      `It waits for the owner's approval (until ${new Date(action.approval?.expiresAt ?? action.expiresAt).toISOString()}); the device is asked only once it is approved. ${unfinished(action)}`,
    isError: false,
  },
  queued: { detail: unfinished, isError: false },
  received: { detail: unfinished, isError: false },
  succeeded: { detail: (action) => `Result: ${JSON.stringify(action.result)}`, isError: false },
  failed: { detail: (action) => `Device error: ${action.error ? `${action.error.code}: ${action.error.message}` : 'unknown'}`, isError: true },
  rejected: { detail: (action) => `The owner rejected it${action.approval?.reason ? `: ${JSON.stringify(action.approval.reason)}` : '.'}`, isError: true },
  cancelled: { detail: () => null, isError: false },
  expired: {
    detail: (action) =>
      action.expiredReason === 'approval_timeout' ? 'Nobody approved it within its approval window.' : 'No result arrived before its deadline.',
    isError: true,
  },
};

function unfinished(action: ActionRecord): string {
  return `The wait ended first; follow it with get_action { "actionId": "${action.id}" } or read action://${action.id}.`;
}

function summary(place: DevicePlace, action: ActionRecord): string {
  const head = `${action.capability} on ${placeOf(place)}: ${action.status} (action ${action.id}).`;
  const detail = OUTCOMES[action.status].detail(action);
  return detail === null ? head : `${head}\n${detail}`;
}

/**
 * A device tool's call: queues the action (through `invoke`, like REST: the same idempotency
 * and TTL rules, from `_meta`), waits for it to settle and answers the Action. Shared by the
 * tool registered on the SDK's server and by the direct path for plain calls (direct-call.ts),
 * so both answer the same result.
 *
 * A client that goes away or cancels before the answer is written withdraws its action
 * (docs/reference/rules.md "MCP"): a queued one is cancelled, a handed-out one recalled, both with
 * `client_cancelled`; a finished one stays as it is.
 */
export async function callDeviceTool(
  session: McpSession,
  fn: CallableFunction,
  args: unknown,
  call: DeviceToolCall,
  confirmed?: { idempotencyKey: string; grantId: string },
): Promise<CallToolResult | TaskCreated> {
  const { ctx } = session;
  const { notify } = call;
  const cancellation = session.cancellation(call.id);
  const signal = call.signal ? AbortSignal.any([call.signal, cancellation.signal]) : cancellation.signal;
  const token = call.meta?.progressToken as string | number | undefined;
  let lastStatus: string | undefined;
  const progress = async (action: ActionRecord) => {
    if (token === undefined || !notify || action.status === lastStatus || signal.aborted) return;
    lastStatus = action.status;
    try {
      await notify({
        method: 'notifications/progress',
        params: {
          progressToken: token,
          progress: ACTION_STATES[action.status].stage + 1,
          total: PROGRESS_TOTAL,
          message: PROGRESS_MESSAGES[action.status] ?? action.status,
        },
      });
    } catch {
      // The client went away between the check and the send: the wait ends on the abort.
    }
  };
  // A call without an idempotency key always creates its action: watched from before the
  // insert, its changes need no read after it (awaitSettled). A key may replay an older Action.
  const coming =
    confirmed || call.meta?.[IDEMPOTENCY_META_KEY] !== undefined
      ? undefined
      : watchComingAction(ctx.events, session.credential.workspaceId, session.credential.principal);
  try {
    let queued: ActionRecord;
    try {
      // A confirmed call: the user said yes to exactly this one (a copy of the context, so
      // nothing else on this request is taken as confirmed), once (the idempotency key). Any
      // other call runs right after the gate found its function callable and, unless the
      // guarded insert checks it (a direct call), device control running in this request, so
      // the action request need not read either again (a copy of the context too); a confirmed
      // one may have waited minutes for the user, and reads afresh.
      const callable = confirmed ? undefined : authorizedFromListing(fn);
      const running = session.controlsRunning ? { controlsRunning: true as const } : {};
      // The reading is this call's alone: no later call on the session may run on it.
      session.controlsRunning = false;
      const callCtx = confirmed ? { ...ctx, userConfirmation: { grantId: confirmed.grantId } } : callable ? { ...ctx, callable, ...running } : ctx;
      queued = (await invoke(operations.requestAction, callCtx, {
        deviceId: fn.deviceId,
        capability: fn.capability,
        arguments: args ?? {},
        ...actionOptions(call.meta),
        ...(confirmed ? { idempotencyKey: confirmed.idempotencyKey } : {}),
      })) as ActionRecord;
    } catch (error) {
      throw atMetaKeys(error);
    }
    // An idempotency key is the principal's, so a replay may answer with the action another
    // connection of that principal requested: this call neither withdraws it nor makes it its
    // task (a task belongs to the connection that requested it), and answers its plain result.
    const own = coming !== undefined || (await readOwnAction(ctx, session.credential, queued.id)) !== undefined;
    const taskFor = own ? session.taskFor?.(call.id) : undefined;
    let action = await awaitSettled(session, queued, waitBound(call.meta, taskFor !== undefined), signal, progress, coming);
    if (signal.aborted && own) {
      const withdrawn = await withdrawAction(ctx, session.credential.workspaceId, action.id, 'client_cancelled');
      ctx.log.info({ msg: 'mcp call cancelled by its client', requestId: ctx.requestId, actionId: action.id, withdrawn: withdrawn?.status ?? null });
      // A 2025-era cancellation leaves the call's stream open: what it still carries is the
      // action as withdrawn, never the state it had before.
      action = withdrawn ?? action;
    }
    if (taskFor && !signal.aborted && !ACTION_STATES[action.status].terminal) return await taskFor(action);
    const tool = session.tools?.find((t) => t.fn === fn)?.name ?? deviceToolName(fn.capability, fn.deviceId);
    return actionResult(fn, action, { tool, publicBaseUrl: ctx.settings.publicBaseUrl });
  } catch (error) {
    return toolError(error, ctx, { structured: true });
  } finally {
    // Stops keeping the principal's changes if the action was never created (a no-op once named).
    coming?.close();
    cancellation.release();
  }
}

/** A device tool's answer for the action in this state; a task's result once it is finished (tasks/). */
/** Indented text up to this many characters is shown as it is, whatever its indentation costs. */
const INDENTED_MAX_CHARS = 4096;

/**
 * The action as its text content shows it: indented for a reader, unless the indentation would
 * multiply it: a result nested 60 levels deep is 60 times longer indented, and each answer that
 * carries it is held in memory until its client reads it. Then it is compact.
 */
function actionText(action: ActionRecord): string {
  const indented = JSON.stringify(action, null, 2);
  if (indented.length <= INDENTED_MAX_CHARS) return indented;
  const compact = JSON.stringify(action);
  return indented.length <= 2 * compact.length ? indented : compact;
}

/**
 * `view`: the call's own answer carries what an MCP Apps view needs besides the Action (apps.ts):
 * the device's name, the tool to call again, and the console page of an action awaiting the owner.
 */
export function actionResult(place: DevicePlace, action: ActionRecord, view?: { tool: string; publicBaseUrl: string }): CallToolResult {
  const meta = view
    ? viewResultMeta({
        deviceId: action.deviceId,
        deviceName: place.deviceName,
        tool: view.tool,
        ...(action.approval?.mode === 'owner' ? { consoleUrl: consoleActionUrl(view.publicBaseUrl, action) } : {}),
      })
    : undefined;
  return {
    content: [{ type: 'text', text: `${summary(place, action)}\n${actionText(action)}` }],
    structuredContent: action as unknown as Record<string, unknown>,
    ...(OUTCOMES[action.status].isError ? { isError: true } : {}),
    ...(meta ? { _meta: meta } : {}),
  };
}

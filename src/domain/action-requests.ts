import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ActionRow } from '../store/actions.js';
import { grantBudgetUse, guardedActionInsert, insertActionIfAllowed, newActionRow, type NewActionRow, type QueueLimits } from '../store/action-requests.js';
import type { Queryable } from '../store/driver.js';
import { claimIdempotencyKey, releaseUnusedKey } from '../store/idempotency.js';
import { publishActions } from './action-publishing.js';
import { assertNotPaused } from './device-controls.js';
import { action, toActionRecord, type ActionRecord } from './action-records.js';
import { assertQueueCapacity, assertScheduledCapacity, assertStorageBudget } from './capacity.js';
import type { OperationContext, CredentialOf } from './context.js';
import { DomainError, fail } from './errors.js';
import { agentOf, authorizeFunction, liveGrantId } from './functions.js';
import { budgetRefusal, conditionsRefusal, windowEndAt, type GrantConditions } from './grant-conditions.js';
import { IDEMPOTENCY_WINDOW_MS, once, previousAnswer, requestHash, type IdempotencyScope } from './idempotency.js';
import { defineOperation } from './operation.js';
import { inputIssues } from './input-limits.js';
import { capabilityName, uuid } from './schemas.js';

export const ttlSeconds = z.number().int().min(1).max(300).default(30).describe('Deadline in seconds (1 to 300, default 30).');
/**
 * How long an action waits for the owner when the agent names no window: an hour, long enough
 * for a person to see a notification, reach a console and decide (docs/decisions/0031-approval-window-an-hour.md).
 */
export const APPROVAL_WINDOW_DEFAULT_SECONDS = 3600;
export const approvalTtlSeconds = z
  .number()
  .int()
  .min(1)
  .max(86_400)
  .default(APPROVAL_WINDOW_DEFAULT_SECONDS)
  .describe(
    `For a function that needs the owner's approval: how long the action waits for a decision before it expires (\`approval_timeout\`), in seconds (1 to 86400, default ${APPROVAL_WINDOW_DEFAULT_SECONDS}). Its deadline (\`ttlSeconds\`) starts when it is approved.`,
  );
export const idempotencyKey = z.string().min(1).max(128).describe('Client-chosen key: a repeat within 24 hours replays the first answer.');
/** How far ahead an action can be scheduled: seven days (docs/agents/actions.md "Scheduling"). */
export const SCHEDULE_HORIZON_MS = 7 * 24 * 3_600_000;
export const notBefore = z
  .number()
  .int()
  .min(0)
  .describe(
    'Schedule it: the action is `scheduled` until this instant (Unix ms, at most 7 days ahead), then checked again and queued; absent or in the past: now. `ttlSeconds` counts from then.',
  );
export const args = z.record(z.string(), z.unknown()).describe("The function's arguments, checked against its JSON Schema.");

/**
 * The function's arguments written as JSON text: the form of `arguments` for a client whose tool
 * schemas cannot hold a free-form object (OpenAI's strict function calling closes every object
 * and lists its properties, and the arguments of a broadcast or a scheduled action are those of whichever function it
 * names). The text must be a JSON object; it is checked as a body is (`inputIssues`), then as
 * the object form.
 */
export const argumentsText = z
  .string()
  .describe('The function\'s arguments as a JSON-encoded object, e.g. "{\\"level\\": 12}" ("{}" for none); checked against its JSON Schema.')
  .transform((text, check) => {
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
      check.addIssue({ code: 'custom', message: 'must be a JSON object, or JSON text of one' });
      return z.NEVER;
    }
    for (const issue of inputIssues(parsed)) check.addIssue({ code: 'custom', message: issue.path ? `${issue.path}: ${issue.message}` : issue.message });
    return parsed as Record<string, unknown>;
  });

interface ActionRequest {
  deviceId: string;
  capability: string;
  arguments: Record<string, unknown>;
  ttlSeconds: number;
  approvalTtlSeconds: number;
  broadcastId: string | null;
  /** When it becomes due, if later than now: it is created `scheduled`. */
  notBefore?: number | undefined;
}

/**
 * The instant a scheduled request becomes due, or null for one to queue now (absent or not
 * after `now`); refused beyond the horizon.
 */
export function dueAt(notBeforeValue: number | undefined, now: number): number | null {
  if (notBeforeValue === undefined || notBeforeValue <= now) return null;
  if (notBeforeValue > now + SCHEDULE_HORIZON_MS) {
    throw fail.invalid('An action can be scheduled at most 7 days ahead.', [
      { path: 'notBefore', message: `must be at most ${new Date(now + SCHEDULE_HORIZON_MS).toISOString()} (7 days from now)` },
    ]);
  }
  return notBeforeValue;
}

/**
 * Checks access and arguments for one device and returns the action to create, without
 * creating it. The grant's approval mode decides where it starts (docs/reference/rules.md "Approvals"):
 * `owner` waits for the owner's decision; `user` queues it when the MCP surface says the
 * agent's client confirmed this call under this very grant (`ctx.userConfirmation`), is
 * refused over MCP otherwise, and waits for the owner through REST; `none` queues it.
 */
async function plannedAction(
  db: Queryable,
  ctx: OperationContext,
  agent: CredentialOf<'agent'>,
  request: ActionRequest,
  now: number,
  known?: OperationContext['callable'],
): Promise<{ row: NewActionRow; conditions: GrantConditions | null }> {
  const fn =
    known && known.deviceId === request.deviceId && known.capability === request.capability
      ? known.fn
      : await authorizeFunction(db, agentOf(agent), request.deviceId, request.capability, now);
  const issues = ctx.schemas.argumentIssues(fn.argumentSchema, request.arguments);
  if (issues.length > 0) throw fail.invalid('The arguments do not match the function schema.', issues);
  const due = dueAt(request.notBefore, now);
  // The grant's conditions, before any approval is asked: arguments, then schedule (the budget
  // is counted where the action is created). A scheduled action is checked against the schedule
  // window it will be due in, and again when it is due.
  const refused = conditionsRefusal(fn.conditions, request.arguments, due ?? now);
  if (refused) throw refused;
  const confirmation = fn.approval === 'user' ? ctx.userConfirmation : undefined;
  // The yes was given under one grant: after a revoke and re-grant it answers nothing.
  if (confirmation && confirmation.grantId !== (await liveGrantId(db, agentOf(agent), request.deviceId, request.capability, now))) {
    throw new DomainError(
      'confirmation_invalid',
      'The confirmation was given under a grant that has since been revoked or replaced. Nothing was queued; call again to be asked afresh.',
    );
  }
  // Over MCP a `user` grant means the agent's user says yes first: an action there never waits
  // for the owner instead, where an owner's approval would stand in for the user's. Only a
  // device tool asks (a broadcast does not); REST has no user to ask and waits for the owner.
  if (fn.approval === 'user' && !confirmation && ctx.surface === 'mcp') {
    throw new DomainError(
      'confirmation_required',
      `The grant for "${request.capability}" on this device asks the agent's user to confirm each call, and this request does not ask (a broadcast never does). Nothing was queued for this device. Call the device's own tool for this function, which asks your user first.`,
    );
  }
  const confirmed = confirmation !== undefined;
  const waits = fn.approval !== 'none' && !confirmed;
  // A scheduled action's deadline and approval window count from when it is due.
  const start = due ?? now;
  const approvalExpiresAt = waits ? start + request.approvalTtlSeconds * 1000 : null;
  const row: NewActionRow = {
    id: randomUUID(),
    workspaceId: agent.workspaceId,
    deviceId: request.deviceId,
    targetId: fn.targetId,
    capability: request.capability,
    arguments: JSON.stringify(request.arguments),
    principal: agent.principal,
    connectionId: agent.connectionId,
    broadcastId: request.broadcastId,
    createdAt: now,
    // While it waits, its deadline is the approval window; an approval sets the execution deadline.
    // A scheduled one keeps the execution deadline until it is due (`promoteScheduled`).
    status: due !== null ? 'scheduled' : waits ? 'awaiting_approval' : 'queued',
    expiresAt: due !== null || !waits ? start + request.ttlSeconds * 1000 : approvalExpiresAt!,
    notBefore: due,
    approval: fn.approval,
    approvalExpiresAt,
    ttlSeconds: request.ttlSeconds,
    decidedBy: confirmed ? agent.principal : null,
    decidedAt: confirmed ? now : null,
    // Queued now under a schedule: handed out only until its window closes. One that waits is
    // given its limit when it is approved.
    // A scheduled one is given its limit when it is due.
    allowedUntil: due === null && !waits && fn.conditions?.schedule ? windowEndAt(fn.conditions.schedule, now) : null,
  };
  return { row, conditions: fn.conditions };
}

/**
 * Checks and creates one action inside a transaction, where nothing it read can change before
 * it commits. The insert is the guarded one too: what the reads do not check, the requesting
 * connection (revoked or expired since it authenticated this request), it refuses, so a
 * revoked credential creates nothing even in the window between its lookup and the insert.
 */
export async function queueAction(tx: Queryable, ctx: OperationContext, agent: CredentialOf<'agent'>, request: ActionRequest, now: number): Promise<ActionRow> {
  const { row: planned, conditions } = await plannedAction(tx, ctx, agent, request, now);
  if (planned.status === 'scheduled') await assertScheduledCapacity(tx, ctx.settings.capacity, agent.workspaceId);
  else await assertQueueCapacity(tx, ctx.settings.capacity, agent.workspaceId, request.deviceId, agent.principal);
  await assertStorageBudget(tx, ctx.settings.capacity, agent.workspaceId, Buffer.byteLength(planned.arguments));
  await assertGrantBudget(tx, planned, conditions, now);
  const created = await insertActionIfAllowed(tx, planned, queueLimits(ctx));
  if (!created) {
    // The insert reads the pause switch too: paused since the request began.
    await assertNotPaused(tx, agent.workspaceId);
    throw fail.unauthorized('This credential was revoked or expired while the request ran.');
  }
  return created;
}

/**
 * The refusal of a request whose grant's budget is used up. Inside the transaction of
 * `queueAction`, after the guarded insert refused (which counts in its own statement): this
 * names the reason.
 */
async function assertGrantBudget(tx: Queryable, planned: NewActionRow, conditions: GrantConditions | null, now: number): Promise<void> {
  const budget = conditions?.budget;
  if (!budget) return;
  const scope = { workspaceId: planned.workspaceId, principal: planned.principal, deviceId: planned.deviceId, capability: planned.capability };
  const use = await grantBudgetUse(tx, scope, { max: budget.max, perMs: budget.perSeconds * 1000 }, now);
  if (use.used >= budget.max) throw budgetRefusal(budget, use, now, conditions.schedule?.timeZone);
}

function queueLimits(ctx: OperationContext): QueueLimits {
  const capacity = ctx.settings.capacity;
  return {
    perPrincipalOnDevice: capacity.queuedActionsPerPrincipalPerDevice,
    perWorkspace: capacity.queuedActionsPerWorkspace,
    scheduledPerWorkspace: capacity.scheduledActionsPerWorkspace,
    storage: capacity.storage,
  };
}

/**
 * Checks outside any transaction, then creates the action with one statement that checks again
 * what could have changed since (`guardedActionInsert`): on a libSQL server the reads no
 * longer hold the write lock, and the write is one round trip (docs/performance.md "On a
 * libSQL server (sqld)"). With an idempotency key, that round trip is a batch that claims the
 * key for the answer, creates the action only while the key holds that answer, and gives the
 * key back if the action was refused. Undefined when the statement found a reason not to
 * create it or another request holds the key; the caller then runs `queueAction` under `once`,
 * which names the reason or replays. A refusal the reads find is final.
 */
async function queueActionOptimistically(
  ctx: OperationContext,
  agent: CredentialOf<'agent'>,
  request: ActionRequest,
  now: number,
  key?: { scope: IdempotencyScope; hash: string },
): Promise<ActionRow | undefined> {
  // The insert below checks again whatever the access read found, so a read this request made
  // already (ctx.callable) serves as well; the transaction after a refusal reads afresh.
  const { row: planned } = await plannedAction(ctx.db, ctx, agent, request, now, ctx.callable);
  const limits = queueLimits(ctx);
  if (!key) return insertActionIfAllowed(ctx.db, planned, limits);
  const created = newActionRow(planned);
  const response = JSON.stringify(toActionRecord(created));
  const [, inserted] = await ctx.db.batch([
    claimIdempotencyKey(key.scope, { requestHash: key.hash, response, createdAt: now }, now - IDEMPOTENCY_WINDOW_MS),
    guardedActionInsert(planned, limits, { ...key.scope, response }),
    releaseUnusedKey(key.scope, response, planned.id),
  ]);
  return inserted!.changes === 1 ? created : undefined;
}

const requestActionInput = z.strictObject({
  deviceId: uuid,
  capability: capabilityName,
  arguments: args,
  ttlSeconds,
  approvalTtlSeconds,
  notBefore: notBefore.optional(),
  idempotencyKey: idempotencyKey.optional(),
});

/** Queues one action: REST and the MCP device tools both reach it through `invoke`. */
async function requestDeviceAction(ctx: OperationContext, agent: CredentialOf<'agent'>, input: z.output<typeof requestActionInput>): Promise<ActionRecord> {
  const now = ctx.clock.now();
  const { deviceId, capability, arguments: argumentsValue, ttlSeconds: ttl, approvalTtlSeconds: window, notBefore: at } = input;
  const wanted: ActionRequest = {
    deviceId,
    capability,
    arguments: argumentsValue,
    ttlSeconds: ttl,
    approvalTtlSeconds: window,
    broadcastId: null,
    notBefore: at,
  };
  const scope = input.idempotencyKey ? { workspaceId: agent.workspaceId, principal: agent.principal, key: input.idempotencyKey } : null;
  // `notBefore` joins the hash only when given, so the hash of a request without it is unchanged.
  const request = {
    op: 'action',
    deviceId,
    capability,
    arguments: argumentsValue,
    ttlSeconds: ttl,
    approvalTtlSeconds: window,
    ...(at === undefined ? {} : { notBefore: at }),
  };
  const hash = scope ? requestHash(request) : '';
  // The owner's pause switch (`checksPause`): paused, the answer is 503 before any other. A
  // keyed request reads it before its replay; a plain one does not read it at all unless it is
  // refused (the guarded insert checks the switch), and then before naming the reason. The MCP
  // gate's reading (`controlsRunning`) serves instead.
  const pauseRead = ctx.controlsRunning !== undefined || scope !== null;
  if (!ctx.controlsRunning && scope) await assertNotPaused(ctx.db, agent.workspaceId);
  const refusedUnlessPaused = async () => {
    if (!pauseRead) await assertNotPaused(ctx.db, agent.workspaceId);
  };
  if (scope) {
    const previous = await previousAnswer<ActionRecord>(ctx.db, scope, hash, now);
    if (previous !== undefined) return previous;
  }
  // A confirmed call is bound to the grant it was asked under, which the guarded insert does
  // not compare: it reads and creates inside one transaction, so no re-grant falls between.
  let created: ActionRow | undefined;
  try {
    created = ctx.userConfirmation ? undefined : await queueActionOptimistically(ctx, agent, wanted, now, scope ? { scope, hash } : undefined);
  } catch (error) {
    if (error instanceof DomainError) await refusedUnlessPaused();
    throw error;
  }
  if (created) {
    publishActions(ctx, [created]);
    return toActionRecord(created);
  }
  await refusedUnlessPaused();
  const outcome = await ctx.db.transaction(async (tx) => {
    let created: ActionRow | undefined;
    const answer = await once(tx, scope, request, now, async () => {
      created = await queueAction(tx, ctx, agent, wanted, now);
      return toActionRecord(created);
    });
    return { answer: answer.value, created };
  });
  if (outcome.created) publishActions(ctx, [outcome.created]);
  return outcome.answer;
}

export const requestAction = defineOperation({
  name: 'actions.request',
  title: 'Request an action',
  description:
    "Request an action on a device function. Checked live: a grant for this principal, the ceiling (`act` for control functions), an attached device, and the arguments against the function schema. The device fetches it, runs it and reports the result. When the grant asks for a human's yes (`approval` `owner`, or `user` through REST), the action is `awaiting_approval` until the owner approves or rejects it. With `notBefore` in the future it is `scheduled` until then, when every permission and condition is checked again.",
  credentials: ['agent'],
  access: 'per-function',
  oauth: ['rest', 'mcp'],
  // Control functions change the physical world; a repeat with the same idempotencyKey replays.
  hints: { readOnly: false, destructive: true, idempotent: true, openWorld: true },
  queuesDeviceActions: true,
  checksPause: true,
  rest: [{ method: 'POST', path: '/v1/devices/{deviceId}/actions', status: 201 }],
  input: requestActionInput,
  output: action,
  run: ({ ctx, credential, input }) => requestDeviceAction(ctx, credential, input),
});

const scheduleActionFields = {
  deviceId: uuid,
  capability: capabilityName,
  notBefore: notBefore.describe(
    'When the device should act (Unix ms, at most 7 days ahead; a time already past means now). The action is `scheduled` until then; every permission and condition is checked again then, and the device is asked only then.',
  ),
  ttlSeconds: ttlSeconds.describe('Deadline in seconds once it is due (1 to 300, default 30).'),
  idempotencyKey: idempotencyKey.optional(),
};

/**
 * Schedules one action over MCP with plain tool arguments (docs/agents/actions.md "Scheduling"):
 * the same request as `actions.request` with `notBefore`, which a device tool cannot take
 * because its arguments are the function's own schema. A grant that asks the owner: its
 * approval window (the default) starts when the action is due.
 */
export const scheduleAction = defineOperation({
  name: 'actions.schedule',
  title: 'Schedule an action',
  description:
    "Schedule one device function for later: the action is `scheduled` until `notBefore`, then checked again (grant, conditions, device) and queued for the device, or cancelled with the reason. Follow or cancel it with get_action and cancel_action; nothing stays connected meanwhile. Checked now as a request is: a grant for this principal, the ceiling (`act` for control functions), the arguments against the function schema, the grant's conditions at the due time. A grant in `user` mode cannot be scheduled over MCP (the user confirms each call as it is made).",
  credentials: ['agent'],
  access: 'per-function',
  oauth: ['mcp'],
  // Control functions change the physical world; a repeat with the same idempotencyKey replays.
  hints: { readOnly: false, destructive: true, idempotent: true, openWorld: true },
  queuesDeviceActions: true,
  checksPause: true,
  rest: [],
  // Advertised with the JSON-text arguments alone, as broadcast is, so the tool converts to
  // OpenAI's strict mode (docs/agents/tools.md); a call may still pass the object.
  mcp: { name: 'schedule_action', advertisedInput: z.strictObject({ ...scheduleActionFields, arguments: argumentsText }) },
  input: z.strictObject({
    ...scheduleActionFields,
    arguments: z.union([args, argumentsText]).describe("The function's arguments: an object, or the same object as JSON text."),
  }),
  output: action,
  run: ({ ctx, credential, input }) => requestDeviceAction(ctx, credential, { ...input, approvalTtlSeconds: APPROVAL_WINDOW_DEFAULT_SECONDS }),
});

/* eslint-disable max-lines -- every action operation (request, approve, reject, cancel, next, result) and the helpers they share; edited in parallel, to be split by transition after that */
import { randomUUID } from 'node:crypto';
import { setImmediate as yieldToRequests } from 'node:timers/promises';
import { z } from 'zod';
import {
  approveAction as approveStored,
  cancelIfRefused,
  cancelQueued,
  cancelWithdrawn,
  rejectAction as rejectStored,
  expireDue,
  recallWithdrawn,
  requestRecall,
  exportActions,
  getAction,
  guardedActionInsert,
  insertActionIfAllowed,
  newActionRow,
  type QueueLimits,
  recentActions,
  recentActionsOf,
  type ActionRow,
  type NewActionRow,
  type WithdrawalScope,
} from '../store/actions.js';
import type { Queryable } from '../store/driver.js';
import { claimIdempotencyKey, releaseUnusedKey } from '../store/idempotency.js';
import { action, toActionRecord, type ActionRecord } from './action-records.js';
import { ACTION_STATUSES, TRANSITIONS, type ActionStatus, type CancelReason } from './action-states.js';
import { assertQueueCapacity, assertStorageBudget } from './capacity.js';
import type { Context, CredentialOf } from './context.js';
import { DomainError, fail } from './errors.js';
import { agentOf, authorizeFunction, liveGrantId } from './functions.js';
import { IDEMPOTENCY_WINDOW_MS, once, previousAnswer, requestHash, type IdempotencyScope } from './idempotency.js';
import { defineOperation, definePagedOperation, defineStreamedOperation } from './operation.js';
import { ROW_ORDER_KEY, type PageKey } from './paging.js';
import { capabilityName, timestamp, uuid } from './schemas.js';

export const HISTORY_LIMIT = 100;

const ttlSeconds = z.number().int().min(1).max(300).default(30).describe('Deadline in seconds (1 to 300, default 30).');
/**
 * How long an action waits for the owner when the agent names no window: an hour, long enough
 * for a person to see a notification, reach a console and decide (docs/decisions/0006).
 */
export const APPROVAL_WINDOW_DEFAULT_SECONDS = 3600;
const approvalTtlSeconds = z
  .number()
  .int()
  .min(1)
  .max(86_400)
  .default(APPROVAL_WINDOW_DEFAULT_SECONDS)
  .describe(
    `For a function that needs the owner's approval: how long the action waits for a decision before it expires (\`approval_timeout\`), in seconds (1 to 86400, default ${APPROVAL_WINDOW_DEFAULT_SECONDS}). Its deadline (\`ttlSeconds\`) starts when it is approved.`,
  );
const idempotencyKey = z.string().min(1).max(128).describe('Client-chosen key: a repeat within 24 hours replays the first answer.');
const args = z.record(z.string(), z.unknown()).describe("The function's arguments, checked against its JSON Schema.");

/** Tells waiters and the wake channel, after the change has committed. */
export function publishActions(ctx: Context, rows: ActionRow[]): void {
  for (const row of rows) ctx.events.publish({ type: 'action', workspaceId: row.workspaceId, targetId: row.targetId, action: toActionRecord(row) });
}

interface ActionRequest {
  deviceId: string;
  capability: string;
  arguments: Record<string, unknown>;
  ttlSeconds: number;
  approvalTtlSeconds: number;
  broadcastId: string | null;
}

/**
 * Checks access and arguments for one device and returns the action to create, without
 * creating it. The grant's approval mode decides where it starts (docs/reference/rules.md "Approvals"):
 * `owner` waits for the owner's decision; `user` waits too unless the MCP surface says the
 * agent's client confirmed this call under this very grant (`ctx.userConfirmation`), which
 * REST never does; `none` queues it.
 */
async function plannedAction(
  db: Queryable,
  ctx: Context,
  agent: CredentialOf<'agent'>,
  request: ActionRequest,
  now: number,
  known?: Context['callable'],
): Promise<NewActionRow> {
  const fn =
    known && known.deviceId === request.deviceId && known.capability === request.capability
      ? known.fn
      : await authorizeFunction(db, agentOf(agent), request.deviceId, request.capability, now);
  const issues = ctx.schemas.argumentIssues(fn.argumentSchema, request.arguments);
  if (issues.length > 0) throw fail.invalid('The arguments do not match the function schema.', issues);
  const confirmation = fn.approval === 'user' ? ctx.userConfirmation : undefined;
  // The yes was given under one grant: after a revoke and re-grant it answers nothing.
  if (confirmation && confirmation.grantId !== (await liveGrantId(db, agentOf(agent), request.deviceId, request.capability, now))) {
    throw new DomainError(
      'confirmation_invalid',
      'The confirmation was given under a grant that has since been revoked or replaced. Nothing was queued; call again to be asked afresh.',
    );
  }
  const confirmed = confirmation !== undefined;
  const waits = fn.approval !== 'none' && !confirmed;
  const approvalExpiresAt = waits ? now + request.approvalTtlSeconds * 1000 : null;
  return {
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
    status: waits ? 'awaiting_approval' : 'queued',
    expiresAt: approvalExpiresAt ?? now + request.ttlSeconds * 1000,
    approval: fn.approval,
    approvalExpiresAt,
    ttlSeconds: request.ttlSeconds,
    decidedBy: confirmed ? agent.principal : null,
    decidedAt: confirmed ? now : null,
  };
}

/**
 * Checks and creates one action inside a transaction, where nothing it read can change before
 * it commits. The insert is the guarded one too: what the reads do not check, the requesting
 * connection (revoked or expired since it authenticated this request), it refuses, so a
 * revoked credential creates nothing even in the window between its lookup and the insert.
 */
async function queueAction(tx: Queryable, ctx: Context, agent: CredentialOf<'agent'>, request: ActionRequest, now: number): Promise<ActionRow> {
  const planned = await plannedAction(tx, ctx, agent, request, now);
  await assertQueueCapacity(tx, ctx.settings.capacity, agent.workspaceId, request.deviceId, agent.principal);
  await assertStorageBudget(tx, ctx.settings.capacity, agent.workspaceId, Buffer.byteLength(planned.arguments));
  const created = await insertActionIfAllowed(tx, planned, queueLimits(ctx));
  if (!created) throw fail.unauthorized('This credential was revoked or expired while the request ran.');
  return created;
}

function queueLimits(ctx: Context): QueueLimits {
  const capacity = ctx.settings.capacity;
  return { perPrincipalOnDevice: capacity.queuedActionsPerPrincipalPerDevice, perWorkspace: capacity.queuedActionsPerWorkspace, storage: capacity.storage };
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
  ctx: Context,
  agent: CredentialOf<'agent'>,
  request: ActionRequest,
  now: number,
  key?: { scope: IdempotencyScope; hash: string },
): Promise<ActionRow | undefined> {
  // The insert below checks again whatever the access read found, so a read this request made
  // already (ctx.callable) serves as well; the transaction after a refusal reads afresh.
  const planned = await plannedAction(ctx.db, ctx, agent, request, now, ctx.callable);
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
  idempotencyKey: idempotencyKey.optional(),
});

/** Queues one action: REST and the MCP device tools both reach it through `invoke`. */
async function requestDeviceAction(ctx: Context, agent: CredentialOf<'agent'>, input: z.output<typeof requestActionInput>): Promise<ActionRecord> {
  const now = ctx.clock.now();
  const { deviceId, capability, arguments: argumentsValue, ttlSeconds: ttl, approvalTtlSeconds: window } = input;
  const wanted: ActionRequest = { deviceId, capability, arguments: argumentsValue, ttlSeconds: ttl, approvalTtlSeconds: window, broadcastId: null };
  const scope = input.idempotencyKey ? { workspaceId: agent.workspaceId, principal: agent.principal, key: input.idempotencyKey } : null;
  const request = { op: 'action', deviceId, capability, arguments: argumentsValue, ttlSeconds: ttl, approvalTtlSeconds: window };
  const hash = scope ? requestHash(request) : '';
  if (scope) {
    const previous = await previousAnswer<ActionRecord>(ctx.db, scope, hash, now);
    if (previous !== undefined) return previous;
  }
  // A confirmed call is bound to the grant it was asked under, which the guarded insert does
  // not compare: it reads and creates inside one transaction, so no re-grant falls between.
  const created = ctx.userConfirmation ? undefined : await queueActionOptimistically(ctx, agent, wanted, now, scope ? { scope, hash } : undefined);
  if (created) {
    publishActions(ctx, [created]);
    return toActionRecord(created);
  }
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
    "Request an action on a device function. Checked live: a grant for this principal, the ceiling (`act` for control functions), an attached device, and the arguments against the function schema. The device fetches it, runs it and reports the result. When the grant asks for a human's yes (`approval` `owner`, or `user` through REST), the action is `awaiting_approval` until the owner approves or rejects it.",
  credentials: ['agent'],
  access: 'per-function',
  oauth: ['rest', 'mcp'],
  // Control functions change the physical world; a repeat with the same idempotencyKey replays.
  hints: { readOnly: false, destructive: true, idempotent: true, openWorld: true },
  queuesDeviceActions: true,
  rest: [{ method: 'POST', path: '/v1/devices/{deviceId}/actions', status: 201 }],
  input: requestActionInput,
  output: action,
  run: ({ ctx, credential, input }) => requestDeviceAction(ctx, credential, input),
});

const EXPIRABLE: readonly ActionStatus[] = TRANSITIONS.expire.from;

/**
 * Reads an action after bringing its deadline up to date; agents see only their principal's.
 * The expiring write runs only for an unfinished action already past its deadline, so the
 * usual read (an MCP call waiting, an agent polling) is one SELECT.
 */
export async function readAction(ctx: Context, credential: CredentialOf<'owner' | 'agent'>, actionId: string): Promise<ActionRow> {
  const now = ctx.clock.now();
  let row = await getAction(ctx.db, credential.workspaceId, actionId);
  if (row && EXPIRABLE.includes(row.status) && row.expiresAt <= now) {
    publishActions(ctx, await expireDue(ctx.db, now, { workspaceId: credential.workspaceId, id: actionId }));
    row = await getAction(ctx.db, credential.workspaceId, actionId);
  }
  if (!row || (credential.kind === 'agent' && row.principal !== credential.principal)) throw fail.notFound('Action');
  return row;
}

export const getActionState = defineOperation({
  name: 'actions.get',
  title: 'Get an action',
  description: 'The current state of an action: the owner sees any, an agent those its principal requested.',
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest', 'mcp'],
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/actions/{actionId}' }],
  mcp: { name: 'get_action' },
  input: z.strictObject({ actionId: uuid }),
  output: action,
  async run({ ctx, credential, input }) {
    return toActionRecord(await readAction(ctx, credential, input.actionId));
  },
});

export const cancelAction = defineOperation({
  name: 'actions.cancel',
  title: 'Cancel a queued action',
  description: 'Cancel an action that is still queued or awaiting approval. Once a device has fetched it, it can no longer be cancelled (409).',
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest', 'mcp'],
  hints: { readOnly: false, destructive: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/actions/{actionId}/cancel' }],
  mcp: { name: 'cancel_action' },
  input: z.strictObject({ actionId: uuid }),
  output: action,
  async run({ ctx, credential, input }) {
    const existing = await readAction(ctx, credential, input.actionId);
    const principal = credential.kind === 'agent' ? credential.principal : null;
    const reason: CancelReason = credential.kind === 'agent' ? 'agent' : 'owner';
    const row = await cancelQueued(ctx.db, credential.workspaceId, existing.id, principal, reason, ctx.clock.now());
    if (!row)
      throw fail.conflict(`The action is ${(await getAction(ctx.db, credential.workspaceId, existing.id))!.status}, neither queued nor awaiting approval.`);
    publishActions(ctx, [row]);
    return toActionRecord(row);
  },
});

const decisionInput = z.strictObject({
  actionId: uuid,
  reason: z.string().min(1).max(500).optional().describe("Why, in the owner's words: kept in the Action."),
});

/**
 * The owner's decision on a waiting action (docs/reference/rules.md "Approvals"), in one transaction:
 * the guarded move, or, when it matched nothing, why: an approval finds the permission
 * withdrawn (the action is cancelled with that reason), its window over (expired), or the
 * action already decided or ended. Any change is published; a refusal answers 409 with the
 * Action as it is now.
 */
async function decide(
  ctx: Context,
  credential: CredentialOf<'owner'>,
  input: z.output<typeof decisionInput>,
  move: 'approve' | 'reject',
): Promise<ActionRecord> {
  await readAction(ctx, credential, input.actionId);
  const now = ctx.clock.now();
  const decision = { workspaceId: credential.workspaceId, id: input.actionId, decidedBy: credential.subject, reason: input.reason ?? null };
  const outcome = await ctx.db.transaction(async (tx) => {
    const decided = move === 'approve' ? await approveStored(tx, decision, now) : await rejectStored(tx, decision, now);
    if (decided) return { row: decided, changed: true, ok: true };
    const ended = (await cancelIfRefused(tx, credential.workspaceId, input.actionId, now)) ?? (await expireDue(tx, now, { id: input.actionId }))[0];
    if (ended) return { row: ended, changed: true, ok: false };
    return { row: (await getAction(tx, credential.workspaceId, input.actionId))!, changed: false, ok: false };
  });
  if (outcome.changed) publishActions(ctx, [outcome.row]);
  const record = toActionRecord(outcome.row);
  if (!outcome.ok) {
    const why = record.cancelReason ? ` (${record.cancelReason})` : record.expiredReason ? ` (${record.expiredReason})` : '';
    throw new DomainError('conflict', `The action is ${record.status}${why}, not awaiting approval.`, { action: record });
  }
  return record;
}

export const approveAction = defineOperation({
  name: 'actions.approve',
  title: 'Approve a waiting action',
  description:
    'Approve an action that is awaiting approval: it is queued for its device, and its deadline (`ttlSeconds`) starts now. The permission it was requested under is checked again first: if it no longer holds, the action is cancelled with the reason and the answer is 409 with the Action. An action that is not awaiting approval is 409 too.',
  credentials: ['owner'],
  access: 'none',
  // An approval lets a device act in the physical world.
  hints: { readOnly: false, destructive: true, idempotent: false, openWorld: true },
  rest: [{ method: 'POST', path: '/v1/actions/{actionId}/approve' }],
  input: decisionInput,
  output: action,
  run: ({ ctx, credential, input }) => decide(ctx, credential, input, 'approve'),
});

export const rejectAction = defineOperation({
  name: 'actions.reject',
  title: 'Reject a waiting action',
  description: 'Reject an action that is awaiting approval: it ends `rejected`, with who, when and the reason in the Action. Otherwise 409.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: false },
  rest: [{ method: 'POST', path: '/v1/actions/{actionId}/reject' }],
  input: decisionInput,
  output: action,
  run: ({ ctx, credential, input }) => decide(ctx, credential, input, 'reject'),
});

/**
 * Withdraws one action whatever stage it is in: a queued one is cancelled, a handed-out one
 * recalled (the device is asked to stop; its report is still stored), a finished one is left
 * as it is. For withdrawals nobody answers for, such as an MCP client going away
 * (docs/reference/rules.md "Actions"). Returns the changed action, if any.
 */
export async function withdrawAction(ctx: Context, workspaceId: string, actionId: string, reason: CancelReason): Promise<ActionRecord | undefined> {
  const now = ctx.clock.now();
  const row = (await cancelQueued(ctx.db, workspaceId, actionId, null, reason, now)) ?? (await requestRecall(ctx.db, workspaceId, actionId, reason, now));
  if (!row) return undefined;
  publishActions(ctx, [row]);
  return toActionRecord(row);
}

/**
 * Inside the transaction of a revocation: cancels the commands in `scope` that may no longer
 * run and recalls the handed-out ones, each with its reason (docs/reference/rules.md "Actions"). The
 * caller publishes the returned rows after the commit, so waiting MCP calls, owners and wake
 * sockets learn it at once and never see a change that rolled back.
 */
export async function withdrawRevoked(tx: Queryable, scope: WithdrawalScope, now: number): Promise<ActionRow[]> {
  return [...(await cancelWithdrawn(tx, scope, now)), ...(await recallWithdrawn(tx, scope, now))];
}

const queryTime = z.coerce.number().int().min(0).optional();

export const listRecentActions = definePagedOperation({
  name: 'actions.list',
  title: 'List recent actions',
  description: `The most recent actions of the workspace, newest first: ${HISTORY_LIMIT} unless \`limit\` says otherwise, older ones on the next pages. The filters narrow the whole history, not one page of it: \`status\` (\`?status=awaiting_approval\` is the owner's approval inbox), \`deviceId\`, \`principal\` (the agent), \`capability\` (the function) and a creation time range \`since\` (included) to \`until\` (excluded), in Unix ms; they combine with AND.`,
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/actions' }],
  input: z
    .strictObject({
      status: z.enum(ACTION_STATUSES).optional().describe('Only actions in this status.'),
      deviceId: uuid.optional().describe('Only actions on this device.'),
      principal: z.string().min(1).max(128).optional().describe('Only actions this agent (principal) requested.'),
      capability: capabilityName.optional().describe('Only actions of this function.'),
      since: queryTime.describe('Only actions created at or after this time (Unix ms).'),
      until: queryTime.describe('Only actions created before this time (Unix ms).'),
    })
    .refine((input) => input.since === undefined || input.until === undefined || input.since < input.until, {
      path: ['until'],
      message: 'must be later than since',
    }),
  output: z.array(action),
  paged: { key: ROW_ORDER_KEY },
  async run({ ctx, credential, input, page }) {
    publishActions(ctx, await expireDue(ctx.db, ctx.clock.now(), { workspaceId: credential.workspaceId }));
    const { rows, next } = await recentActions(ctx.db, credential.workspaceId, page, {
      status: input.status ?? null,
      deviceId: input.deviceId ?? null,
      principal: input.principal ?? null,
      capability: input.capability ?? null,
      since: input.since ?? null,
      until: input.until ?? null,
    });
    return { items: rows.map(toActionRecord), next };
  },
});

export const listRequestedActions = defineOperation({
  name: 'actions.listRequested',
  title: 'List the actions this agent requested',
  description: `The ${HISTORY_LIMIT} most recent actions this agent's principal requested, newest first (the MCP action:// resource list).`,
  credentials: ['agent'],
  access: 'read',
  oauth: ['mcp'],
  hints: { readOnly: true },
  // Agents reach it as the MCP action:// resource list only.
  rest: [],
  input: z.strictObject({}),
  output: z.array(action),
  async run({ ctx, credential }) {
    publishActions(ctx, await expireDue(ctx.db, ctx.clock.now(), { workspaceId: credential.workspaceId }));
    return (await recentActionsOf(ctx.db, credential.workspaceId, credential.principal, HISTORY_LIMIT)).map(toActionRecord);
  },
});

/** Rows per read of the export: one batch is what the export holds in memory at a time. */
const EXPORT_BATCH = 200;

/**
 * The actions in `range`, oldest first, read in keyset batches. Between batches it yields to
 * the event loop: the embedded driver reads synchronously, and other requests are served
 * between two batches however long the history is.
 */
async function* exportedActions(db: Queryable, workspaceId: string, range: { since: number | null; until: number }): AsyncIterable<ActionRecord> {
  let after: PageKey | null = null;
  do {
    const page = await exportActions(db, workspaceId, range, { limit: EXPORT_BATCH, after });
    for (const row of page.rows) yield toActionRecord(row);
    after = page.next;
    if (after) await yieldToRequests();
  } while (after);
}

export const exportHistory = defineStreamedOperation({
  name: 'actions.export',
  title: 'Export the action history',
  description:
    'Every action of the workspace created up to `generatedAt`, oldest first, optionally created in [since, until) (Unix ms). Streamed as it is read; `count` is the number of actions in the document.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/actions/export' }],
  input: z.strictObject({ since: queryTime, until: queryTime }),
  output: z.object({ generatedAt: timestamp, count: z.number().int(), actions: z.array(action) }),
  streamed: { listKey: 'actions', countKey: 'count', item: action },
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    publishActions(ctx, await expireDue(ctx.db, now, { workspaceId: credential.workspaceId }));
    // Actions created while the export is being written belong to the next export: the
    // document is the history as of `generatedAt`, so its end does not run away from a busy workspace.
    const until = Math.min(input.until ?? now + 1, now + 1);
    return { head: { generatedAt: now }, items: exportedActions(ctx.db, credential.workspaceId, { since: input.since ?? null, until }) };
  },
});

const broadcastResult = z.discriminatedUnion('ok', [
  z.object({ deviceId: uuid, ok: z.literal(true), action }),
  z.object({
    deviceId: uuid,
    ok: z.literal(false),
    error: z.object({ code: z.string(), message: z.string(), issues: z.array(z.object({ path: z.string(), message: z.string() })).optional() }),
  }),
]);

export const broadcast = defineOperation({
  name: 'broadcasts.create',
  title: 'Broadcast one function to several devices',
  description:
    'Request one function on up to 20 devices. Each device is checked and queued on its own: results are independent and the broadcast is not atomic.',
  credentials: ['agent'],
  access: 'per-function',
  oauth: ['rest', 'mcp'],
  // Control functions change the physical world; a repeat with the same idempotencyKey replays.
  hints: { readOnly: false, destructive: true, idempotent: true, openWorld: true },
  queuesDeviceActions: true,
  rest: [{ method: 'POST', path: '/v1/broadcasts' }],
  mcp: { name: 'broadcast' },
  input: z.strictObject({
    deviceIds: z
      .array(uuid)
      .min(1)
      .max(20)
      .superRefine((ids, check) => {
        // One action per device: a repeated id would queue the same command twice.
        ids.forEach((id, index) => {
          if (ids.indexOf(id) !== index) check.addIssue({ code: 'custom', path: [index], message: 'duplicate device id' });
        });
      }),
    capability: capabilityName,
    arguments: args,
    idempotencyKey,
    ttlSeconds,
    approvalTtlSeconds,
  }),
  output: z.object({ id: uuid, results: z.array(broadcastResult) }),
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const created: ActionRow[] = [];
    const scope = { workspaceId: credential.workspaceId, principal: credential.principal, key: input.idempotencyKey };
    const request = {
      op: 'broadcast',
      deviceIds: input.deviceIds,
      capability: input.capability,
      arguments: input.arguments,
      ttlSeconds: input.ttlSeconds,
      approvalTtlSeconds: input.approvalTtlSeconds,
    };
    const answer = await ctx.db.transaction(async (tx) =>
      once(tx, scope, request, now, async () => {
        const id = randomUUID();
        const results: z.input<typeof broadcastResult>[] = [];
        for (const deviceId of input.deviceIds) {
          try {
            const row = await queueAction(
              tx,
              ctx,
              credential,
              {
                deviceId,
                capability: input.capability,
                arguments: input.arguments,
                ttlSeconds: input.ttlSeconds,
                approvalTtlSeconds: input.approvalTtlSeconds,
                broadcastId: id,
              },
              now,
            );
            created.push(row);
            results.push({ deviceId, ok: true, action: toActionRecord(row) });
          } catch (error) {
            if (!(error instanceof DomainError)) throw error;
            const issues = error.details.issues;
            results.push({ deviceId, ok: false, error: { code: error.code, message: error.message, ...(issues ? { issues } : {}) } });
          }
        }
        return { id, results };
      }),
    );
    publishActions(ctx, created);
    return answer.value;
  },
});

import { setImmediate as yieldToRequests } from 'node:timers/promises';
import { z } from 'zod';
import { getAction, type ActionRow } from '../store/actions.js';
import { expireDue } from '../store/action-expiry.js';
import { exportActions, recentActions, recentActionsOf } from '../store/action-history.js';
import type { Queryable } from '../store/driver.js';
import { publishActions } from './action-publishing.js';
import { action, toActionRecord, type ActionRecord } from './action-records.js';
import { ACTION_STATUSES, TRANSITIONS, type ActionStatus } from './action-states.js';
import type { OperationContext, CredentialOf } from './context.js';
import { fail } from './errors.js';
import { defineOperation, definePagedOperation, defineStreamedOperation } from './operation.js';
import { ROW_ORDER_KEY, type PageKey } from './paging.js';
import { capabilityName, timestamp, uuid } from './schemas.js';

export const HISTORY_LIMIT = 100;

const EXPIRABLE: readonly ActionStatus[] = TRANSITIONS.expire.from;

/**
 * Reads an action after bringing its deadline up to date; agents see only their principal's.
 * The expiring write runs only for an unfinished action already past its deadline, so the
 * usual read (an MCP call waiting, an agent polling) is one SELECT.
 */
export async function readAction(ctx: OperationContext, credential: CredentialOf<'owner' | 'agent'>, actionId: string): Promise<ActionRow> {
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

/** A time in Unix ms as a query parameter: digits only, so an empty value, `1e3` or `0x10` is refused at the field rather than read as a number. */
const queryTime = z
  .string()
  .regex(/^\d{1,15}$/, 'must be a time in Unix ms: digits only')
  .transform(Number)
  .optional();

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

export const listOwnActions = definePagedOperation({
  name: 'actions.listOwn',
  title: 'List the actions this agent requested',
  description:
    'The actions this agent requested, newest first, narrowed by `status` (`scheduled`: what it scheduled for later and can still cancel with cancel_action) and `deviceId`.',
  credentials: ['agent'],
  access: 'read',
  oauth: ['mcp'],
  hints: { readOnly: true },
  // A model's list of its own actions; REST agents read them one by one (GET /v1/actions/{actionId}).
  rest: [],
  mcp: { name: 'list_actions', listKey: 'actions' },
  input: z.strictObject({
    status: z.enum(ACTION_STATUSES).optional().describe('Only actions in this status (`scheduled`: not yet due).'),
    deviceId: uuid.optional().describe('Only actions on this device.'),
  }),
  output: z.array(action),
  paged: { key: ROW_ORDER_KEY },
  async run({ ctx, credential, input, page }) {
    publishActions(ctx, await expireDue(ctx.db, ctx.clock.now(), { workspaceId: credential.workspaceId }));
    const { rows, next } = await recentActions(ctx.db, credential.workspaceId, page, {
      status: input.status ?? null,
      deviceId: input.deviceId ?? null,
      principal: credential.principal,
      capability: null,
      since: null,
      until: null,
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

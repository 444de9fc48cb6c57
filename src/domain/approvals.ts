import { z } from 'zod';
import { rejectAction as rejectStored } from '../store/action-decisions.js';
import { expireDue } from '../store/action-expiry.js';
import { awaitingApprovals } from '../store/action-history.js';
import { getAction, type ActionRow } from '../store/actions.js';
import { action, toActionRecord } from './action-records.js';
import { ACTION_STATUSES } from './action-states.js';
import { publishActions } from './action-publishing.js';
import { fail, type ErrorIssue } from './errors.js';
import { defineOperation } from './operation.js';
import { decodeCursor, encodeCursor, ROW_ORDER_KEY, type PageKey } from './paging.js';
import { uuid } from './schemas.js';

/**
 * The owner's approvals inbox by pages, and rejecting many waiting actions at once
 * (docs/owners/approvals.md). An agent can queue approvals faster than anyone reads them: the inbox
 * is read a page at a time, and the owner can turn a page of them down in one go.
 */

/** Waiting actions per inbox page, unless the caller asks for another size. */
export const INBOX_PAGE = 50;
/** The most a page of the inbox holds, and the most one bulk rejection names. */
export const INBOX_PAGE_MAX = 100;

const LIST = 'approvals.list';

/** A key past every action's (created_at, rowid): reading backwards from it reads the last page. */
const AFTER_EVERY_KEY: PageKey = [Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER];

const cursor = z.string().min(1).max(1024).optional();

export const listApprovals = defineOperation({
  name: LIST,
  title: 'List the approvals inbox',
  description: `The actions awaiting the owner's approval, oldest first (the one whose window ends soonest on top), ${INBOX_PAGE} a page unless \`limit\` says otherwise (at most ${INBOX_PAGE_MAX}). \`next\` and \`previous\` are cursors: pass one as \`after\` or \`before\` for the neighbouring page. \`total\` counts every waiting action.`,
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/approvals' }],
  input: z.strictObject({
    limit: z.coerce.number().int().min(1).max(INBOX_PAGE_MAX).optional().describe(`Actions per page, 1 to ${INBOX_PAGE_MAX}; ${INBOX_PAGE} unless given.`),
    after: cursor.describe('The `next` cursor of a page: the page after it.'),
    before: cursor.describe('The `previous` cursor of a page: the page before it.'),
  }),
  output: z.object({
    total: z.number().int().describe('Actions awaiting approval in the workspace, on every page.'),
    actions: z.array(action),
    previous: z.string().nullable().describe('Cursor of the page before this one; null on the first page.'),
    next: z.string().nullable().describe('Cursor of the page after this one; null on the last page.'),
  }),
  async run({ ctx, credential, input }) {
    if (input.after !== undefined && input.before !== undefined)
      throw fail.invalid('Name one page: `after` or `before`, not both.', [{ path: 'before', message: 'not with `after`' }]);
    const key = (field: 'after' | 'before'): PageKey | null => {
      const given = input[field];
      if (given === undefined) return null;
      const decoded = decodeCursor(given, LIST, credential.workspaceId, ROW_ORDER_KEY);
      if (!Array.isArray(decoded)) throw fail.invalid('The cursor cannot be read.', [{ path: field, message: (decoded as ErrorIssue).message }]);
      return decoded;
    };
    publishActions(ctx, await expireDue(ctx.db, ctx.clock.now(), { workspaceId: credential.workspaceId }));
    let before = key('before');
    let after = key('after');
    const limit = input.limit ?? INBOX_PAGE;
    let page = await awaitingApprovals(ctx.db, credential.workspaceId, { limit, after, before });
    if (before !== null && !page.more) {
      // Fewer than a page before the cursor (some were decided meanwhile): that is the first
      // page, read from the start so that it is full.
      before = null;
      page = await awaitingApprovals(ctx.db, credential.workspaceId, { limit, after: null, before: null });
    } else if (after !== null && page.rows.length === 0 && page.total > 0) {
      // Nothing after the cursor any more (the last page was decided): the last page there is.
      after = null;
      before = AFTER_EVERY_KEY;
      page = await awaitingApprovals(ctx.db, credential.workspaceId, { limit, after: null, before });
    }
    const { rows, more, total } = page;
    const cursorOf = (row: (ActionRow & { position: number }) | undefined) =>
      row ? encodeCursor(LIST, credential.workspaceId, [row.createdAt, row.position]) : null;
    const first = rows[0];
    const last = rows[rows.length - 1];
    // Reading forwards, a page was named (`after`) only by coming from an earlier one; reading
    // backwards, the later page is where the reader came from.
    const hasPrevious = before !== null ? more : after !== null && first !== undefined;
    const hasNext = before !== null ? before !== AFTER_EVERY_KEY && last !== undefined : more;
    return {
      total,
      actions: rows.map(({ position: _position, ...row }) => toActionRecord(row)),
      previous: hasPrevious ? cursorOf(first) : null,
      next: hasNext ? cursorOf(last) : null,
    };
  },
});

export const rejectActions = defineOperation({
  name: 'actions.rejectMany',
  title: 'Reject several waiting actions',
  description: `Reject up to ${INBOX_PAGE_MAX} actions awaiting approval at once, with one reason. Each is rejected only if it is still awaiting approval when its turn comes (an action approved, rejected or expired meanwhile is left as it is and listed under \`skipped\` with its status). \`rejected\` counts those rejected.`,
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/actions/reject' }],
  input: z.strictObject({
    actionIds: z.array(uuid).min(1).max(INBOX_PAGE_MAX).describe(`The actions to reject, 1 to ${INBOX_PAGE_MAX}.`),
    reason: z.string().min(1).max(500).optional().describe("Why, in the owner's words: kept in each rejected Action."),
  }),
  output: z.object({
    rejected: z.number().int().describe('How many actions this call rejected.'),
    actions: z.array(action).describe('The actions it rejected.'),
    skipped: z.array(
      z.object({ id: uuid, status: z.enum(ACTION_STATUSES).nullable().describe('Its status now; null when no such action is in the workspace.') }),
    ),
  }),
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    publishActions(ctx, await expireDue(ctx.db, now, { workspaceId: credential.workspaceId }));
    const ids = [...new Set(input.actionIds)];
    const decision = { workspaceId: credential.workspaceId, decidedBy: credential.subject, reason: input.reason ?? null };
    // One guarded UPDATE per action, all in one transaction: an action approved a moment
    // earlier no longer matches `status = 'awaiting_approval'` and is left alone.
    const outcome = await ctx.db.transaction(async (tx) => {
      const rejected: ActionRow[] = [];
      const skipped: { id: string; status: (typeof ACTION_STATUSES)[number] | null }[] = [];
      for (const id of ids) {
        const row = await rejectStored(tx, { ...decision, id }, now);
        if (row) rejected.push(row);
        else skipped.push({ id, status: (await getAction(tx, credential.workspaceId, id))?.status ?? null });
      }
      return { rejected, skipped };
    });
    publishActions(ctx, outcome.rejected);
    return { rejected: outcome.rejected.length, actions: outcome.rejected.map(toActionRecord), skipped: outcome.skipped };
  },
});

import { agentStanding, devicePlace, ownActionsAmong, type DevicePlaceRow } from '../store/tasks.js';
import { TRANSITIONS, type ActionStatus } from './action-states.js';
import type { ActionRecord } from './action-records.js';
import { toActionRecord } from './action-records.js';
import { readAction } from './action-reads.js';
import { withdrawAction } from './action-withdrawals.js';
import type { OperationContext, CredentialOf } from './context.js';
import { DomainError } from './errors.js';

/**
 * An agent's view of one of its own actions as a long-running task (docs/agents/tasks.md).
 * The task is the action: nothing else is stored, so any instance answers for it. It belongs
 * to the agent connection that requested it; for anyone else, another connection of the same
 * principal included, it does not exist.
 */
export interface OwnAction {
  action: ActionRecord;
  /** When anything about it last changed: its creation, hand-out, decision, recall or end. */
  lastUpdatedAt: number;
}

export type DevicePlace = DevicePlaceRow;

/** When anything about the action last changed: its creation, hand-out, decision, recall or end. */
export function lastChangeOf(action: ActionRecord): number {
  return Math.max(
    action.createdAt,
    action.dispatchedAt ?? 0,
    action.approval?.decidedAt ?? 0,
    action.cancelRequestedAt ?? 0,
    action.completedAt ?? 0,
    action.reportedLateAt ?? 0,
  );
}

/** Who requested an action: its workspace, principal and agent connection. */
export interface ActionRequester {
  workspaceId: string;
  principal: string;
  connectionId: string | null;
}

/** Whether the action is the connection's own: requested in its workspace, by its principal, over this very connection. */
export function ownsAction(credential: CredentialOf<'agent'>, requester: ActionRequester): boolean {
  return requester.workspaceId === credential.workspaceId && requester.principal === credential.principal && requester.connectionId === credential.connectionId;
}

/** The connection's own action, its deadline brought up to date; undefined when it is not theirs or not there. */
export async function readOwnAction(ctx: OperationContext, credential: CredentialOf<'agent'>, actionId: string): Promise<OwnAction | undefined> {
  try {
    const row = await readAction(ctx, credential, actionId);
    if (!ownsAction(credential, row)) return undefined;
    const action = toActionRecord(row);
    return { action, lastUpdatedAt: lastChangeOf(action) };
  } catch (error) {
    if (error instanceof DomainError && (error.code === 'not_found' || error.code === 'validation_failed')) return undefined;
    throw error;
  }
}

const EXPIRABLE: readonly ActionStatus[] = TRANSITIONS.expire.from;

/**
 * Of `ids`, the connection's own actions, in the order given and at most `limit`: one read for
 * all of them, so ids that are unknown or another's cost nothing more (a listen names up to
 * 200). The few past their deadline and not yet marked are read again one by one, as
 * `readOwnAction` reads them, so their state is brought up to date first.
 */
export async function readOwnActions(ctx: OperationContext, credential: CredentialOf<'agent'>, ids: readonly string[], limit: number): Promise<ActionRecord[]> {
  if (ids.length === 0) return [];
  const now = ctx.clock.now();
  const rows = await ownActionsAmong(ctx.db, credential, ids, limit);
  const own: ActionRecord[] = [];
  for (const row of rows) {
    const due = EXPIRABLE.includes(row.status) && row.expiresAt <= now;
    const action = due ? (await readOwnAction(ctx, credential, row.id))?.action : toActionRecord(row);
    if (action) own.push(action);
  }
  return own;
}

/**
 * Withdraws the connection's own action as its client asked (docs/reference/rules.md "Actions"): a
 * queued or waiting one is cancelled, a handed-out one recalled, a finished one left as it is.
 * False when the action is not the connection's.
 */
export async function withdrawOwnAction(ctx: OperationContext, credential: CredentialOf<'agent'>, actionId: string): Promise<boolean> {
  const own = await readOwnAction(ctx, credential, actionId);
  if (!own) return false;
  await withdrawAction(ctx, credential.workspaceId, actionId, 'client_cancelled');
  return true;
}

/** Names of the device the action ran on, for the words of its result. */
export function placeOfAction(ctx: OperationContext, workspaceId: string, action: ActionRecord): Promise<DevicePlace | undefined> {
  return devicePlace(ctx.db, workspaceId, action.deviceId);
}

/**
 * Whether the agent connection, and the OAuth access token it came with, may still act (not
 * revoked, not expired), and the version of what its workspace's agents may call. A
 * long-lived stream (MCP subscriptions/listen) asks this again and again, since it outlives
 * the authentication of the request that opened it.
 */
export async function agentStandingOf(ctx: OperationContext, credential: CredentialOf<'agent'>): Promise<{ live: boolean; functionsVersion: number }> {
  const oauth = credential.oauth;
  const row = await agentStanding(ctx.db, credential.workspaceId, credential.connectionId, oauth?.tokenId ?? null);
  const now = ctx.clock.now();
  const connectionLive = row !== undefined && row.revokedAt === null && (row.expiresAt === null || row.expiresAt > now);
  // An OAuth token is revoked on its own (POST /oauth/revoke) and expires long before its
  // connection does; a token gone from the table (pruned) is no longer live either.
  const tokenLive = !oauth || (row?.tokenExpiresAt != null && row.tokenRevokedAt === null && row.tokenExpiresAt > now && oauth.expiresAt > now);
  return { live: connectionLive && tokenLive, functionsVersion: row?.functionsVersion ?? -1 };
}

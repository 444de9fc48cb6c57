import { countActiveDevices, countLive, countQueued, countScheduled, type CappedKind } from '../store/capacity.js';
import type { Queryable } from '../store/driver.js';
import { ACTION_RESERVED_BYTES, STORAGE_BUDGETS, workspaceUsage, type StorageBudget } from '../store/usage.js';
import type { CapacityLimits } from './context.js';
import { DomainError } from './errors.js';

/** The storage budgets' names, as the error envelope's `details.budget` and the metrics give them. */
export { STORAGE_BUDGETS };

/**
 * Workspace capacity (docs/reference/rules.md "Errors and limits"). Each check runs inside the transaction that would
 * exceed it, so two concurrent requests cannot both take the last place.
 */
export async function assertDeviceCapacity(tx: Queryable, limits: CapacityLimits, workspaceId: string, adding: number): Promise<void> {
  const current = await countActiveDevices(tx, workspaceId);
  if (current + adding > limits.devicesPerWorkspace) {
    throw new DomainError('capacity_exceeded', `The workspace holds at most ${limits.devicesPerWorkspace} devices.`, { retryAfterSeconds: 3600 });
  }
}

/**
 * Fair queues: each principal holds at most its share of a device's queue, so one principal
 * filling its share never blocks another principal's request (there is no total per device);
 * the workspace's total stays the overall bound.
 */
export async function assertQueueCapacity(tx: Queryable, limits: CapacityLimits, workspaceId: string, deviceId: string, principal: string): Promise<void> {
  const queued = await countQueued(tx, workspaceId, deviceId, principal);
  const share = limits.queuedActionsPerPrincipalPerDevice;
  if (queued.principalOnDevice >= share) {
    throw new DomainError('capacity_exceeded', `A principal holds at most ${share} queued actions per device; other principals' requests are not affected.`, {
      retryAfterSeconds: 1,
    });
  }
  if (queued.workspace >= limits.queuedActionsPerWorkspace) {
    throw new DomainError('capacity_exceeded', `The workspace holds at most ${limits.queuedActionsPerWorkspace} queued actions.`, { retryAfterSeconds: 1 });
  }
}

/**
 * Scheduled actions (docs/agents/actions.md "Scheduling"): a workspace holds at most its limit
 * of them not yet due. They take no place in the queues until then, so this is their only room.
 */
export async function assertScheduledCapacity(tx: Queryable, limits: CapacityLimits, workspaceId: string): Promise<void> {
  if ((await countScheduled(tx, workspaceId)) >= limits.scheduledActionsPerWorkspace) {
    // A place frees when one becomes due or is cancelled: often within minutes, at most in 7 days.
    throw new DomainError('capacity_exceeded', `The workspace holds at most ${limits.scheduledActionsPerWorkspace} scheduled actions that are not yet due.`, {
      retryAfterSeconds: 60,
    });
  }
}

const cappedNames: Record<CappedKind, { limit: Exclude<keyof CapacityLimits, 'storage'>; what: string; retryAfterSeconds: number }> = {
  // Nothing frees a place but the owner revoking something: retry much later, as for devices.
  agentConnections: { limit: 'agentConnectionsPerWorkspace', what: 'live agent connections', retryAfterSeconds: 3600 },
  grants: { limit: 'grantsPerWorkspace', what: 'live grants', retryAfterSeconds: 3600 },
  oauthClients: { limit: 'oauthClientsPerWorkspace', what: 'registered OAuth clients', retryAfterSeconds: 3600 },
  // These expire within minutes by default (setup tokens 10, enrollment codes 10), freeing places.
  setupTokens: { limit: 'setupTokensPerWorkspace', what: 'live setup tokens', retryAfterSeconds: 60 },
  enrollmentCodes: { limit: 'enrollmentCodesPerWorkspace', what: 'live enrollment codes', retryAfterSeconds: 60 },
  webhooks: { limit: 'webhooksPerWorkspace', what: 'live webhooks', retryAfterSeconds: 3600 },
};

/**
 * The owner-created rows a workspace may hold live at once. Called inside the transaction that
 * writes them, after the write, so what is counted is exactly what would be committed (a grant
 * replacing an earlier one takes no new place) and concurrent creates cannot both take the last
 * place: the write transaction is serialized, and a refusal rolls the write back.
 */
export async function assertWithinCap(tx: Queryable, limits: CapacityLimits, kind: CappedKind, workspaceId: string, now: number): Promise<void> {
  const { limit, what, retryAfterSeconds } = cappedNames[kind];
  if ((await countLive(tx, kind, workspaceId, now)) > limits[limit]) {
    throw new DomainError('capacity_exceeded', `The workspace holds at most ${limits[limit]} ${what}.`, { retryAfterSeconds });
  }
}

/**
 * Usage falls only when housekeeping deletes what passed its retention window
 * (HOUSEKEEPING_SWEEP_SECONDS, 10 minutes by default): retrying sooner is pointless.
 */
export const QUOTA_RETRY_AFTER_SECONDS = 600;

const budgetWhat: Record<StorageBudget, string> = {
  actions: 'stored actions',
  action_bytes: 'bytes of stored action arguments and results',
  event_bytes: 'bytes of journal events',
  webhook_deliveries: 'stored webhook deliveries',
};

/**
 * The workspace's storage budgets (docs/operators/budgets.md) for one more action whose arguments are
 * `argumentBytes` bytes, with the room it reserves for its result: the same rule as the guarded insert's `storageRoom`, read inside the
 * transaction that would write it, so the refusal names the budget. The whole write is
 * refused; nothing stored earlier is touched.
 */
export async function assertStorageBudget(tx: Queryable, limits: CapacityLimits, workspaceId: string, argumentBytes: number): Promise<void> {
  const used = await workspaceUsage(tx, workspaceId);
  const adding: Record<StorageBudget, number> = { actions: 1, action_bytes: argumentBytes + ACTION_RESERVED_BYTES, event_bytes: 0, webhook_deliveries: 0 };
  for (const budget of STORAGE_BUDGETS) {
    const limit = limits.storage[budget];
    if (adding[budget] > limit) {
      // Larger than all the workspace may store: no waiting or clean-up makes room, so it is
      // not told the budget is used up (nor to retry), but that the request is too large.
      throw new DomainError(
        'payload_too_large',
        `This request alone needs ${adding[budget]} ${budgetWhat[budget]}, more than the workspace's whole ${budget} budget of ${limit}: it can never be stored, and waiting will not help. Nothing was stored; send smaller arguments.`,
        { budget: { name: budget, limit, used: used[budget] }, issues: [{ path: 'arguments', message: `larger than the ${budget} budget (${limit})` }] },
      );
    }
    const over = adding[budget] > 0 ? used[budget] + adding[budget] > limit : used[budget] >= limit;
    if (over) {
      throw new DomainError('quota_exceeded', `The workspace's ${budget} budget is used up: it may store at most ${limit} ${budgetWhat[budget]}.`, {
        retryAfterSeconds: QUOTA_RETRY_AFTER_SECONDS,
        budget: { name: budget, limit, used: used[budget] },
      });
    }
  }
}

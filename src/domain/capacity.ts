import { countActiveDevices, countLive, countQueued, type CappedKind } from '../store/capacity.js';
import type { Queryable } from '../store/driver.js';
import type { CapacityLimits } from './context.js';
import { DomainError } from './errors.js';

/**
 * Workspace capacity (docs/rules.md "Errors and limits"). Each check runs inside the transaction that would
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

const cappedNames: Record<CappedKind, { limit: keyof CapacityLimits; what: string; retryAfterSeconds: number }> = {
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

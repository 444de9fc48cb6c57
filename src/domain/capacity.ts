import { countActiveDevices, countQueued } from '../store/capacity.js';
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

export async function assertQueueCapacity(tx: Queryable, limits: CapacityLimits, workspaceId: string, deviceId: string): Promise<void> {
  const queued = await countQueued(tx, workspaceId, deviceId);
  if (queued.device >= limits.queuedActionsPerDevice) {
    throw new DomainError('capacity_exceeded', `A device holds at most ${limits.queuedActionsPerDevice} queued actions.`, { retryAfterSeconds: 1 });
  }
  if (queued.workspace >= limits.queuedActionsPerWorkspace) {
    throw new DomainError('capacity_exceeded', `The workspace holds at most ${limits.queuedActionsPerWorkspace} queued actions.`, { retryAfterSeconds: 1 });
  }
}

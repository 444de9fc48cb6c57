import { sessionResourceDevices, subscribeSessionResource, unsubscribeSessionResources, type SessionKey } from '../store/mcp-subscriptions.js';
import type { CredentialOf, OperationContext } from './context.js';
import { DomainError, fail } from './errors.js';
import { devicesWithReadableState } from '../store/callable-functions.js';

/**
 * A 2025-era MCP session's subscriptions to device state resources (docs/agents/state.md):
 * `resources/subscribe` stores one, the session's GET stream (on any instance) reads them and
 * tells each change. Kept in the database because a 2025 session id holds no server state and
 * the subscribe and the stream may reach different instances (migration 0041).
 */

/** The most devices one session follows: as many as one subscriptions/listen stream (src/mcp/subscriptions/state-watch.ts). */
export const SESSION_RESOURCES_PER_SESSION = 64;
/** The most subscriptions kept per agent connection over all its sessions: the newest stay, an abandoned session's go. */
export const SESSION_RESOURCES_PER_CONNECTION = 256;

export type { SessionKey };

export function sessionKeyOf(credential: CredentialOf<'agent'>, session: string): SessionKey {
  return { workspaceId: credential.workspaceId, connectionId: credential.connectionId, session };
}

/** Whether the agent holds a live grant on a read function of the device now: what makes its state resource exist for it. */
export async function readsDeviceState(ctx: OperationContext, credential: CredentialOf<'agent'>, deviceId: string): Promise<boolean> {
  return (await devicesReadByAgent(ctx, credential, [deviceId])).has(deviceId);
}

/** Which of these devices the agent reads the state of now (as `readsDeviceState`), in one read for the lot. */
export function devicesReadByAgent(ctx: OperationContext, credential: CredentialOf<'agent'>, deviceIds: readonly string[]): Promise<Set<string>> {
  return devicesWithReadableState(ctx.db, credential.workspaceId, credential.principal, ctx.clock.now(), deviceIds);
}

const announce = (ctx: OperationContext, key: SessionKey) =>
  ctx.events.publish({ type: 'session-resources', workspaceId: key.workspaceId, session: key.session });

/**
 * Subscribes the session to the device's state: not found unless the caller reads it now (a
 * resource it may not read does not exist for it), `capacity_exceeded` past the session's bound.
 */
export async function subscribeSessionState(ctx: OperationContext, credential: CredentialOf<'agent'>, session: string, deviceId: string): Promise<void> {
  if (!(await readsDeviceState(ctx, credential, deviceId))) throw fail.notFound('Resource');
  const key = sessionKeyOf(credential, session);
  const bounds = { perSession: SESSION_RESOURCES_PER_SESSION, perConnection: SESSION_RESOURCES_PER_CONNECTION };
  if (!(await subscribeSessionResource(ctx.db, key, deviceId, ctx.clock.now(), bounds))) {
    throw new DomainError(
      'capacity_exceeded',
      `This session already follows ${SESSION_RESOURCES_PER_SESSION} device state resources: unsubscribe from one first.`,
    );
  }
  announce(ctx, key);
}

/** Ends the session's subscription to the device's state (none is fine: unsubscribing twice is no error). */
export async function unsubscribeSessionState(ctx: OperationContext, credential: CredentialOf<'agent'>, session: string, deviceId: string): Promise<void> {
  const key = sessionKeyOf(credential, session);
  await unsubscribeSessionResources(ctx.db, key, [deviceId]);
  announce(ctx, key);
}

/** The devices whose state the session follows. */
export function sessionStateDevices(ctx: OperationContext, credential: CredentialOf<'agent'>, session: string): Promise<string[]> {
  return sessionResourceDevices(ctx.db, sessionKeyOf(credential, session));
}

/** Forgets subscriptions the caller may no longer hold (their grant gone), or all of the session's (its token gone). */
export function dropSessionState(ctx: OperationContext, credential: CredentialOf<'agent'>, session: string, deviceIds?: readonly string[]): Promise<void> {
  return unsubscribeSessionResources(ctx.db, sessionKeyOf(credential, session), deviceIds);
}

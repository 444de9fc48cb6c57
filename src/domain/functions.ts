import { z } from 'zod';
import type { Queryable } from '../store/driver.js';
import { callableFunctions, callableFunctionsPage, workspaceFunctions, type FunctionRow } from '../store/callable-functions.js';
import { functionAccess, liveGrantId as liveGrantRow, nextGrantExpiry, type ApprovalMode } from '../store/grants.js';
import type { Access, AuthorizedFunction, OperationContext, CredentialOf } from './context.js';
import { DomainError } from './errors.js';
import { grantConditions, parseStoredConditions } from './grant-conditions.js';
import { definePagedOperation } from './operation.js';
import { FUNCTION_KEY } from './paging.js';
import { approvalMode, uuid } from './schemas.js';

export const callableFunction = z.object({
  deviceId: uuid,
  deviceName: z.string(),
  deviceKind: z.enum(['device', 'gateway', 'service']),
  parentId: uuid.nullable().describe('The gateway, for a child or service device.'),
  parentName: z.string().nullable(),
  capability: z.string(),
  kind: z.enum(['read', 'control']),
  description: z.string().optional(),
  arguments: z.record(z.string(), z.unknown()).describe('JSON Schema of the arguments object.'),
  approval: approvalMode
    .optional()
    .describe('For an agent: whose yes a call needs before the device is asked (docs/reference/rules.md "Approvals"); absent in an owner\'s listing.'),
  conditions: grantConditions
    .optional()
    .describe(
      'For an agent: how far (argument bounds), when (a schedule) and how often (a budget) its grant allows the function (docs/owners/grants.md "Conditions"); null for none; absent in an owner\'s listing.',
    ),
});

export type CallableFunction = z.infer<typeof callableFunction>;

function toCallable(row: FunctionRow & { approval?: ApprovalMode; conditions?: string | null }): CallableFunction {
  return {
    deviceId: row.deviceId,
    deviceName: row.deviceName,
    deviceKind: row.deviceKind,
    parentId: row.parentId,
    parentName: row.parentName,
    capability: row.capability,
    kind: row.kind,
    ...(row.description !== null ? { description: row.description } : {}),
    arguments: JSON.parse(row.arguments) as Record<string, unknown>,
    ...(row.approval !== undefined ? { approval: row.approval } : {}),
    ...(row.conditions !== undefined ? { conditions: parseStoredConditions(row.conditions) } : {}),
  };
}

/** Exactly the functions an agent may call now (live grant ∩ ceiling ∩ usable device), in device then manifest order. */
export async function listCallableFunctions(db: Queryable, credential: CredentialOf<'agent'>, now: number): Promise<CallableFunction[]> {
  return (await callableFunctions(db, credential.workspaceId, credential.principal, credential.access, now)).map(toCallable);
}

/**
 * The agent's callable functions on the devices whose id starts with `deviceIdPrefix` (the
 * same rule as listCallableFunctions, narrowed to the devices one tool call can name).
 */
export async function listCallableFunctionsOnDevices(
  db: Queryable,
  credential: CredentialOf<'agent'>,
  now: number,
  deviceIdPrefix: string,
): Promise<CallableFunction[]> {
  return (await callableFunctions(db, credential.workspaceId, credential.principal, credential.access, now, deviceIdPrefix)).map(toCallable);
}

/**
 * Until when an agent's callable functions, listed after its credential was read, stay its
 * list: while a later request's credential carries the same `functionsVersion` (the
 * workspace's, bumped with every write to grants, capabilities and devices) and the clock is
 * before this, the next expiry among its live grants. A write between the credential's read
 * and the listing makes the recorded version stale, which costs a rebuild, never a stale answer.
 */
export async function callableFunctionsValidUntil(db: Queryable, credential: CredentialOf<'agent'>, now: number): Promise<number> {
  return (await nextGrantExpiry(db, credential.workspaceId, credential.principal, now)) ?? Number.POSITIVE_INFINITY;
}

export const listFunctions = definePagedOperation({
  name: 'functions.list',
  title: 'List callable functions',
  description: 'List device functions. Owners see all; agents see exactly the functions they may call now.',
  credentials: ['owner', 'agent'],
  access: 'read',
  oauth: ['rest', 'mcp'],
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/functions' }],
  mcp: { name: 'list_functions', listKey: 'functions' },
  input: z.strictObject({}),
  output: z.array(callableFunction),
  paged: { key: FUNCTION_KEY },
  // Owners: every function of the workspace's usable devices; agents: exactly the ones they may call now.
  async run({ ctx, credential, page }) {
    const { rows, next } =
      credential.kind === 'owner'
        ? await workspaceFunctions(ctx.db, credential.workspaceId, page)
        : await callableFunctionsPage(ctx.db, credential.workspaceId, credential.principal, credential.access, ctx.clock.now(), page);
    return { items: rows.map(toCallable), next };
  },
});

/**
 * What an agent's listing of its callable functions already established about one of them
 * (the same live grant, ceiling and usable device `authorizeFunction` checks), for
 * `OperationContext.callable`. Undefined for an owner's listing, which names no approval mode.
 */
export function authorizedFromListing(fn: CallableFunction): OperationContext['callable'] {
  if (fn.approval === undefined) return undefined;
  let authorized = authorizedByListing.get(fn);
  if (!authorized) {
    authorized = {
      deviceId: fn.deviceId,
      capability: fn.capability,
      fn: {
        targetId: fn.parentId ?? fn.deviceId,
        kind: fn.kind,
        argumentSchema: JSON.stringify(fn.arguments),
        approval: fn.approval,
        conditions: fn.conditions ?? null,
      },
    };
    authorizedByListing.set(fn, authorized);
  }
  return authorized;
}

/**
 * `authorizedFromListing` once per listed function: the MCP call gate keeps a device's listed
 * functions between calls (src/mcp/call-gate-cache.ts), so each call of a device tool would
 * otherwise serialise the same argument schema again. Nothing changes a listed function or
 * its answer here once made.
 */
const authorizedByListing = new WeakMap<CallableFunction, NonNullable<OperationContext['callable']>>();

type Agent = { workspaceId: string; principal: string; access: Access };

/**
 * The live access check of docs/reference/rules.md "Access" for one function, from one read: the device
 * is in the caller's workspace and usable, a live grant exists for the principal, and the
 * ceiling allows the function's kind. The refusals come in this order: no such device, no
 * grant, no such function, a ceiling too low, a revoked gateway, a revoked device; all but the
 * ceiling are `grant_required`, the code MCP answers for the same cases.
 */
export async function authorizeFunction(db: Queryable, agent: Agent, deviceId: string, capability: string, now: number): Promise<AuthorizedFunction> {
  const access = await functionAccess(db, agent.workspaceId, agent.principal, deviceId, capability, now);
  // Every refusal but the ceiling is `grant_required`, as on MCP, where a function the agent
  // may not call now is simply not one of its tools: an unknown device and another
  // workspace's are answered alike (nothing tells them apart), a revoked one says so.
  const notCallable = (why: string) => new DomainError('grant_required', `Principal "${agent.principal}" may not call ${capability} on this device: ${why}.`);
  if (!access) throw notCallable('no device it may call has this id');
  if (access.approval === null) throw notCallable('it holds no live grant for it');
  if (access.kind === null || access.arguments === null) throw notCallable('the device does not publish this function');
  if (access.kind === 'control' && agent.access !== 'act') {
    throw new DomainError('insufficient_access', `${capability} is a control function; this credential's ceiling is read.`, { requiredAccess: 'act' });
  }
  if (access.parentRevoked === 1) throw notCallable('the gateway of this device is revoked');
  if (access.revokedAt !== null) throw notCallable('the device is revoked');
  return {
    targetId: access.parentId ?? deviceId,
    kind: access.kind,
    argumentSchema: access.arguments,
    approval: access.approval,
    conditions: parseStoredConditions(access.conditions),
  };
}

/**
 * The id of the agent's live grant for one function (the grant whose approval mode
 * `authorizeFunction` reports), or undefined without one: what a user confirmation is bound to.
 */
export function liveGrantId(db: Queryable, agent: Agent, deviceId: string, capability: string, now: number): Promise<string | undefined> {
  return liveGrantRow(db, agent.workspaceId, agent.principal, deviceId, capability, now);
}

export function agentOf(credential: CredentialOf<'agent'>): Agent {
  return { workspaceId: credential.workspaceId, principal: credential.principal, access: credential.access };
}

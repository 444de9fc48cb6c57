import { randomUUID } from 'node:crypto';
import { assertWithinCap } from './capacity.js';
import { z } from 'zod';
import { issueToken } from './tokens.js';
import { insertConnection, listConnections, revokeConnection, type ConnectionPurpose, type ConnectionRow } from '../store/connections.js';
import { publishActions } from './action-publishing.js';
import { withdrawRevoked } from './action-withdrawals.js';
import type { OperationContext } from './context.js';
import { fail } from './errors.js';
import { defineOperation, definePagedOperation } from './operation.js';
import { NEWEST_FIRST_KEY } from './paging.js';
import { access, connection, newConnection, principal, uuid } from './schemas.js';

const MAX_TTL_SECONDS = 31_536_000;

/** The listed shape of a connection: one mapping for setup tokens, agent connections and OAuth clients. */
export function toConnection(row: ConnectionRow, now: number): z.input<typeof connection> {
  const live = row.revokedAt === null && (row.expiresAt === null || row.expiresAt > now);
  const setup = row.purpose === 'device-setup';
  return {
    id: row.id,
    principal: row.principal,
    name: row.name,
    expiresAt: row.expiresAt,
    revoked: row.revokedAt !== null,
    access: row.access,
    ...(row.oauth ? { oauth: row.oauth } : {}),
    purpose: row.purpose,
    canAttach: setup && live && row.attachedCount < row.deviceLimit,
    deviceLimit: row.deviceLimit,
    ...(setup ? { attachedDeviceCount: row.attachedCount } : {}),
    tokenPrefix: row.tokenPrefix,
    createdAt: row.createdAt,
  };
}

async function create(
  ctx: OperationContext,
  owner: { workspaceId: string; subject: string },
  fields: { purpose: ConnectionPurpose; name: string; principal?: string; access: 'read' | 'act'; deviceLimit: number; ttlSeconds: number | null },
) {
  const now = ctx.clock.now();
  const id = randomUUID();
  const issued = issueToken(fields.purpose === 'agent' ? 'agent' : 'setup');
  const row: ConnectionRow = {
    id,
    workspaceId: owner.workspaceId,
    purpose: fields.purpose,
    name: fields.name,
    principal: fields.principal ?? (fields.purpose === 'agent' ? `agent:${id}` : `setup:${id}`),
    access: fields.access,
    tokenPrefix: issued.displayPrefix,
    deviceLimit: fields.deviceLimit,
    attachedCount: 0,
    expiresAt: fields.ttlSeconds === null ? null : now + fields.ttlSeconds * 1000,
    revokedAt: null,
    createdAt: now,
    oauth: null,
  };
  await ctx.db.transaction(async (tx) => {
    await insertConnection(tx, { ...row, tokenHash: issued.hash, createdBy: owner.subject });
    await assertWithinCap(tx, ctx.settings.capacity, fields.purpose === 'agent' ? 'agentConnections' : 'setupTokens', owner.workspaceId, now);
  });
  return { ...toConnection(row, now), token: issued.token };
}

async function revoke(ctx: OperationContext, workspaceId: string, purpose: ConnectionPurpose, id: string) {
  const now = ctx.clock.now();
  const { row, withdrawn } = await ctx.db.transaction(async (tx) => {
    const row = await revokeConnection(tx, workspaceId, purpose, id, now);
    if (!row) throw fail.notFound(purpose === 'agent' ? 'Agent connection' : 'Setup token');
    // An agent connection's commands stop with it (docs/reference/rules.md "Actions"); another
    // connection of the same principal keeps its own.
    return { row, withdrawn: purpose === 'agent' ? await withdrawRevoked(tx, { workspaceId, connectionId: id }, now) : [] };
  });
  publishActions(ctx, withdrawn);
  return toConnection(row, now);
}

// Setup tokens (attach-only; docs/reference/rules.md "Credentials").

export const createSetupToken = defineOperation({
  name: 'setupTokens.create',
  title: 'Create a device setup token',
  description: 'Create an attach-only device setup token. It can attach devices and do nothing else.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [
    { method: 'POST', path: '/v1/device-setup-tokens', status: 201 },
    { method: 'POST', path: '/v1/sdk-tokens', status: 201, deprecated: true },
  ],
  input: z.strictObject({
    name: z.string().min(1).max(64),
    ttlSeconds: z.number().int().min(60).max(86_400).default(600),
    deviceLimit: z.number().int().min(1).max(20).default(1),
  }),
  output: newConnection,
  run: ({ ctx, credential, input }) =>
    create(ctx, credential, { purpose: 'device-setup', access: 'read', name: input.name, deviceLimit: input.deviceLimit, ttlSeconds: input.ttlSeconds }),
});

export const listSetupTokens = definePagedOperation({
  name: 'setupTokens.list',
  title: 'List device setup tokens',
  description: 'List device setup tokens, newest first. Tokens themselves are never shown again.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [
    { method: 'GET', path: '/v1/device-setup-tokens' },
    { method: 'GET', path: '/v1/sdk-tokens', deprecated: true },
  ],
  input: z.strictObject({}),
  output: z.array(connection),
  paged: { key: NEWEST_FIRST_KEY },
  async run({ ctx, credential, page }) {
    const now = ctx.clock.now();
    const { rows, next } = await listConnections(ctx.db, credential.workspaceId, 'device-setup', page);
    return { items: rows.map((row) => toConnection(row, now)), next };
  },
});

export const revokeSetupToken = defineOperation({
  name: 'setupTokens.revoke',
  title: 'Revoke a device setup token',
  description: 'Revoke a setup token. Devices it attached stay attached with their own credentials.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [
    { method: 'POST', path: '/v1/device-setup-tokens/{connectionId}/revoke' },
    { method: 'POST', path: '/v1/sdk-tokens/{connectionId}/revoke', deprecated: true },
  ],
  input: z.strictObject({ connectionId: uuid }),
  output: connection,
  run: ({ ctx, credential, input }) => revoke(ctx, credential.workspaceId, 'device-setup', input.connectionId),
});

// Agent connections (docs/reference/rules.md "Access": one principal each, with an access ceiling).

export const createAgentConnection = defineOperation({
  name: 'agentConnections.create',
  title: 'Create an agent connection',
  description:
    'Create an agent API connection: a token with an access ceiling for one principal. It reaches no device until that principal is granted functions.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: false },
  rest: [{ method: 'POST', path: '/v1/agent-connections', status: 201 }],
  input: z.strictObject({
    name: z.string().min(1).max(64),
    access: access.default('read'),
    principal: principal.optional().describe('Defaults to `agent:<connection id>`. Grants name this principal.'),
    ttlSeconds: z.number().int().min(60).max(MAX_TTL_SECONDS).nullable().default(null).describe('Lifetime of the token; null or absent for no expiry.'),
  }),
  output: newConnection,
  run: ({ ctx, credential, input }) =>
    create(ctx, credential, {
      purpose: 'agent',
      name: input.name,
      access: input.access,
      deviceLimit: 0,
      ttlSeconds: input.ttlSeconds,
      ...(input.principal ? { principal: input.principal } : {}),
    }),
});

export const listAgentConnections = definePagedOperation({
  name: 'agentConnections.list',
  title: 'List agent connections',
  description: 'List agent connections, newest first.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/agent-connections' }],
  input: z.strictObject({}),
  output: z.array(connection),
  paged: { key: NEWEST_FIRST_KEY },
  async run({ ctx, credential, page }) {
    const now = ctx.clock.now();
    const { rows, next } = await listConnections(ctx.db, credential.workspaceId, 'agent', page);
    return { items: rows.map((row) => toConnection(row, now)), next };
  },
});

export const revokeAgentConnection = defineOperation({
  name: 'agentConnections.revoke',
  title: 'Revoke an agent connection',
  description: "Revoke an agent connection: its token answers 401 from the next request on. The principal's grants stay.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [{ method: 'POST', path: '/v1/agent-connections/{connectionId}/revoke' }],
  input: z.strictObject({ connectionId: uuid }),
  output: connection,
  run: ({ ctx, credential, input }) => revoke(ctx, credential.workspaceId, 'agent', input.connectionId),
});

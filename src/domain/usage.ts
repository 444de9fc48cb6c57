import { z } from 'zod';
import { countActiveDevices, countLive, countPending, countScheduled, type CappedKind } from '../store/capacity.js';
import { STORAGE_BUDGETS, workspaceUsage } from '../store/usage.js';
import type { CapacityLimits } from './context.js';
import { defineOperation } from './operation.js';

/**
 * The workspace's use against its limits (docs/operators/configuration.md `WORKSPACE_MAX_*`,
 * docs/operators/budgets.md): what the owner would otherwise learn only from a 429. Read-only; the
 * limits are the ones the checks use.
 */

const measure = z.object({ used: z.number().int(), limit: z.number().int() });

const CAPS: Record<CappedKind, Exclude<keyof CapacityLimits, 'storage'>> = {
  agentConnections: 'agentConnectionsPerWorkspace',
  setupTokens: 'setupTokensPerWorkspace',
  grants: 'grantsPerWorkspace',
  oauthClients: 'oauthClientsPerWorkspace',
  enrollmentCodes: 'enrollmentCodesPerWorkspace',
  webhooks: 'webhooksPerWorkspace',
};

export const usage = z.object({
  capacity: z
    .object({
      devices: measure,
      pendingActions: measure.describe('Actions queued or awaiting approval.'),
      scheduledActions: measure.describe('Actions scheduled for later (`notBefore`), not yet due.'),
      agentConnections: measure,
      setupTokens: measure,
      grants: measure.describe('Live grants (not revoked, not expired).'),
      oauthClients: measure,
      enrollmentCodes: measure,
      webhooks: measure,
    })
    .describe('Rows the workspace holds live at once; a request beyond a limit answers 429 `capacity_exceeded`.'),
  storage: z
    .object(Object.fromEntries(STORAGE_BUDGETS.map((budget) => [budget, measure])) as Record<(typeof STORAGE_BUDGETS)[number], typeof measure>)
    .describe('Storage budgets (docs/operators/budgets.md): an action request beyond one answers 429 `quota_exceeded`.'),
});

export const getUsage = defineOperation({
  name: 'usage.get',
  title: "Get the workspace's usage",
  description: "The workspace's use of each capacity limit and storage budget, beside the limit.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/usage' }],
  input: z.strictObject({}),
  output: usage,
  async run({ ctx, credential }) {
    const { workspaceId } = credential;
    const limits = ctx.settings.capacity;
    const now = ctx.clock.now();
    const caps = await Promise.all(
      (Object.keys(CAPS) as CappedKind[]).map(async (kind) => [kind, { used: await countLive(ctx.db, kind, workspaceId, now), limit: limits[CAPS[kind]] }]),
    );
    const stored = await workspaceUsage(ctx.db, workspaceId);
    return {
      capacity: {
        devices: { used: await countActiveDevices(ctx.db, workspaceId), limit: limits.devicesPerWorkspace },
        pendingActions: { used: await countPending(ctx.db, workspaceId), limit: limits.queuedActionsPerWorkspace },
        scheduledActions: { used: await countScheduled(ctx.db, workspaceId), limit: limits.scheduledActionsPerWorkspace },
        ...(Object.fromEntries(caps) as Record<CappedKind, { used: number; limit: number }>),
      },
      storage: Object.fromEntries(STORAGE_BUDGETS.map((budget) => [budget, { used: stored[budget], limit: limits.storage[budget] }])) as Record<
        (typeof STORAGE_BUDGETS)[number],
        { used: number; limit: number }
      >,
    };
  },
});

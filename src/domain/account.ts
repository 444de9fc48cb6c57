import { z } from 'zod';
import { getWorkspace, workspaceUsage } from '../store/workspaces.js';
import { defineOperation } from './operation.js';
import { timestamp, uuid } from './schemas.js';

export const account = z.object({
  workspaceId: uuid,
  workspaceKey: z.string().describe('The owner session claim that names this workspace.'),
  routingId: z.string().describe('What devices send as `x-service-workspace` (not a secret).'),
  subject: z.string().describe('The signed-in owner (`sub` of the session).'),
  createdAt: timestamp,
  usage: z.object({
    devices: z.number().int().describe('Attached devices that are not revoked, children included.'),
    agentConnections: z.number().int(),
    setupTokens: z.number().int(),
  }),
});

export const getAccount = defineOperation({
  name: 'account.get',
  title: 'Get the account',
  description: "The signed-in owner's workspace and what it holds.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/account' }],
  input: z.strictObject({}),
  output: account,
  async run({ ctx, credential }) {
    const workspace = (await getWorkspace(ctx.db, credential.workspaceId))!;
    return {
      workspaceId: workspace.id,
      workspaceKey: workspace.externalId,
      routingId: workspace.routingId,
      subject: credential.subject,
      createdAt: workspace.createdAt,
      usage: await workspaceUsage(ctx.db, workspace.id),
    };
  },
});

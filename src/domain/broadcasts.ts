import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ActionRow } from '../store/actions.js';
import { publishActions } from './action-publishing.js';
import { action, toActionRecord } from './action-records.js';
import { approvalTtlSeconds, args, argumentsText, idempotencyKey, notBefore, queueAction, ttlSeconds } from './action-requests.js';
import { DomainError } from './errors.js';
import { once } from './idempotency.js';
import { defineOperation } from './operation.js';
import { capabilityName, uuid } from './schemas.js';

/**
 * A device's refusal in a broadcast: the code, message and `issues` a single action request
 * answers, and for a grant condition's refusal the same `details` (docs/owners/grants.md
 * "Conditions").
 */
const deviceRefusal = z.object({
  code: z.string(),
  message: z.string(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  details: z
    .record(z.string(), z.unknown())
    .optional()
    .describe(
      "For `arguments_not_allowed`, `outside_schedule` and `grant_budget_exhausted`: the refusal's `details`, as a single action request answers them (the grant's bounds, the next window, the budget's use).",
    ),
});

const broadcastResult = z.discriminatedUnion('ok', [
  z.object({ deviceId: uuid, ok: z.literal(true), action }),
  z.object({
    deviceId: uuid,
    ok: z.literal(false),
    error: deviceRefusal,
  }),
]);

const broadcastFields = {
  deviceIds: z
    .array(uuid)
    .min(1)
    .max(20)
    .superRefine((ids, check) => {
      // One action per device: a repeated id would queue the same command twice.
      ids.forEach((id, index) => {
        if (ids.indexOf(id) !== index) check.addIssue({ code: 'custom', path: [index], message: 'duplicate device id' });
      });
    }),
  capability: capabilityName,
  idempotencyKey,
  ttlSeconds,
  notBefore: notBefore.optional(),
  approvalTtlSeconds,
};

export const broadcast = defineOperation({
  name: 'broadcasts.create',
  title: 'Broadcast one function to several devices',
  description:
    "Request one function on up to 20 devices. Each device is checked and queued on its own: results are independent and the broadcast is not atomic. A broadcast never asks the agent's user: over MCP a device whose grant is in `user` mode gets `confirmation_required` (call its device tool, which asks); through REST it waits for the owner. With `notBefore` in the future every action is `scheduled` until then.",
  credentials: ['agent'],
  access: 'per-function',
  oauth: ['rest', 'mcp'],
  // Control functions change the physical world; a repeat with the same idempotencyKey replays.
  hints: { readOnly: false, destructive: true, idempotent: true, openWorld: true },
  queuesDeviceActions: true,
  rest: [{ method: 'POST', path: '/v1/broadcasts' }],
  // MCP advertises the JSON-text form alone, so the tool converts to OpenAI's strict mode
  // (docs/agents/tools.md, the fixed tools); a call may still pass the object, as REST does.
  mcp: { name: 'broadcast', advertisedInput: z.strictObject({ ...broadcastFields, arguments: argumentsText }) },
  input: z.strictObject({
    ...broadcastFields,
    arguments: z.union([args, argumentsText]).describe("The function's arguments: an object, or the same object as JSON text."),
  }),
  output: z.object({ id: uuid, results: z.array(broadcastResult) }),
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const created: ActionRow[] = [];
    const scope = { workspaceId: credential.workspaceId, principal: credential.principal, key: input.idempotencyKey };
    const request = {
      op: 'broadcast',
      deviceIds: input.deviceIds,
      capability: input.capability,
      arguments: input.arguments,
      ttlSeconds: input.ttlSeconds,
      approvalTtlSeconds: input.approvalTtlSeconds,
      ...(input.notBefore === undefined ? {} : { notBefore: input.notBefore }),
    };
    const answer = await ctx.db.transaction(async (tx) =>
      once(tx, scope, request, now, async () => {
        const id = randomUUID();
        const results: z.input<typeof broadcastResult>[] = [];
        for (const deviceId of input.deviceIds) {
          try {
            const row = await queueAction(
              tx,
              ctx,
              credential,
              {
                deviceId,
                capability: input.capability,
                arguments: input.arguments,
                ttlSeconds: input.ttlSeconds,
                approvalTtlSeconds: input.approvalTtlSeconds,
                broadcastId: id,
                notBefore: input.notBefore,
              },
              now,
            );
            created.push(row);
            results.push({ deviceId, ok: true, action: toActionRecord(row) });
          } catch (error) {
            if (!(error instanceof DomainError)) throw error;
            const { issues, conditions } = error.details;
            results.push({
              deviceId,
              ok: false,
              error: { code: error.code, message: error.message, ...(issues ? { issues } : {}), ...(conditions ? { details: conditions } : {}) },
            });
          }
        }
        return { id, results };
      }),
    );
    publishActions(ctx, created);
    return answer.value;
  },
});

import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { ClaimedDelivery } from '../store/webhook-claims.js';
import { recordTestSend, type WebhookRow } from '../store/webhooks.js';
import { DomainError } from './errors.js';
import { defineOperation } from './operation.js';
import { uuid } from './schemas.js';
import { formattedRequest } from './webhook-formats.js';
import { foundLive } from './webhooks.js';

/**
 * A webhook's test send: one message now, outside the delivery queue, answered with how the
 * endpoint answered (docs/owners/webhooks.md). The webhooks themselves are in webhooks.ts.
 */

/** The action a test message names: no action has it, and the console says so when its link is opened. */
export const TEST_ACTION_ID = '00000000-0000-0000-0000-000000000000';
/** A test send's deadline: the owner is waiting for the answer on the page. */
const TEST_TIMEOUT_MS = 10_000;
/** One test per webhook per window, a few per workspace; a window as long as the deadline bounds the sends in flight too. */
const TEST_SEND_LIMITS = { windowMs: TEST_TIMEOUT_MS, perWorkspace: 3 };
/** A test send's error when the endpoint did not answer, whatever the network said. */
export const TEST_NO_ANSWER = 'no answer: the endpoint could not be reached or did not answer in time';

/** The delivery a test send makes: a `webhook.test` event, or for a chat format an approval request of a sample action. */
function testDelivery(row: WebhookRow, now: number): ClaimedDelivery {
  const action = {
    id: TEST_ACTION_ID,
    principal: 'test message',
    deviceId: TEST_ACTION_ID,
    capability: 'test',
    arguments: {},
    approval: { expiresAt: now },
    expiresAt: now,
  };
  const event =
    row.format === 'generic'
      ? { id: `test_${randomUUID()}`, type: 'webhook.test', createdAt: now, data: { webhook: { id: row.id } } }
      : { id: `test_${randomUUID()}`, type: 'approval.requested', createdAt: now, data: { action } };
  // A test send is the owner's, made outside the sender's slots: nothing is charged for it.
  return { ...row, id: randomUUID(), webhookId: row.id, attempts: 1, payload: JSON.stringify(event), chargedMs: 0 };
}

export const testWorkspaceWebhook = defineOperation({
  name: 'webhooks.test',
  title: 'Send a test message to a webhook',
  description:
    'Send one test message to the webhook now and answer how its endpoint answered. `generic` webhooks get a signed `webhook.test` event; the chat formats a sample approval request whose links open the console. Test sends are not retried and not listed among the deliveries. One test per webhook every 10 s and three per workspace in 10 s (429 `rate_limited` beyond).',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, openWorld: true },
  rest: [{ method: 'POST', path: '/v1/webhooks/{webhookId}/test' }],
  input: z.strictObject({ webhookId: uuid }),
  output: z.object({
    delivered: z.boolean().describe('The endpoint answered 2xx.'),
    statusCode: z.number().int().nullable().describe("The endpoint's HTTP status, null when there was no answer."),
    error: z.string().nullable().describe('Why it was not delivered, when it was not.'),
  }),
  async run({ ctx, credential, input }) {
    const row = await foundLive(ctx.db, credential.workspaceId, input.webhookId);
    // A test reaches out to an address of the owner's choosing at once: rationed, so it cannot
    // be turned into a flood or a scanner.
    if ((await recordTestSend(ctx.db, credential.workspaceId, row.id, ctx.clock.now(), TEST_SEND_LIMITS)) !== 1) {
      throw new DomainError(
        'rate_limited',
        `One test per webhook every ${TEST_SEND_LIMITS.windowMs / 1000} s, and ${TEST_SEND_LIMITS.perWorkspace} per workspace: retry later.`,
        {
          retryAfterSeconds: TEST_SEND_LIMITS.windowMs / 1000,
        },
      );
    }
    const request = await formattedRequest({ db: ctx.db, clock: ctx.clock, consoleUrl: ctx.settings.publicBaseUrl }, testDelivery(row, ctx.clock.now()));
    const outcome = await ctx.webhooks.post(request.url, { ...request, timeoutMs: TEST_TIMEOUT_MS, signal: new AbortController().signal });
    const statusCode = 'statusCode' in outcome ? outcome.statusCode : null;
    const delivered = statusCode !== null && statusCode >= 200 && statusCode < 300;
    // Only whether the endpoint answered: which network error it was (refused, unreachable, reset) would map the owner's network.
    const error = delivered ? null : 'error' in outcome ? TEST_NO_ANSWER : `HTTP ${statusCode}`;
    return { delivered, statusCode, error };
  },
});

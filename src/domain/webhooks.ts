import { randomBytes, randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Queryable } from '../store/driver.js';
import {
  disableWebhook,
  enableWebhook,
  getWebhook,
  insertWebhook,
  listDeliveries,
  listWebhooks,
  revokeWebhook,
  rotateWebhookSecret,
  type DeliveryRow,
  type WebhookRow,
} from '../store/webhooks.js';
import { appendWorkspaceEvent } from '../store/event-journal.js';
import { assertWithinCap } from './capacity.js';
import { fail } from './errors.js';
import { eventIds } from './event-ids.js';
import { announceJournal } from './event-hub.js';
import { defineOperation, definePagedOperation } from './operation.js';
import { NEWEST_FIRST_KEY } from './paging.js';
import { timestamp, uuid } from './schemas.js';
import { CHAT_EVENTS, formatUrlRefusal, shownUrl, webhookFormat } from './webhook-formats.js';
import { eventType, EVENT_TYPES, webhookSnapshot } from './event-catalogue.js';

/**
 * Webhooks (docs/owners/webhooks.md): the owner's events, delivered to an HTTPS endpoint of theirs
 * from a durable outbox (src/domain/webhook-delivery.ts), signed as Standard Webhooks sign.
 */

/** After a rotation the previous secret still signs deliveries for this long (docs/owners/webhooks.md). */
export const PREVIOUS_SECRET_VALIDITY_MS = 24 * 3_600_000;

const SECRET_PREFIX = 'whsec_';

/** A new signing secret: 32 random bytes, base64, with the `whsec_` prefix Standard Webhooks uses. */
export function newWebhookSecret(): string {
  return SECRET_PREFIX + randomBytes(32).toString('base64');
}

export const webhook = z.object({
  id: uuid,
  url: z
    .string()
    .describe(
      "Where deliveries go, with every part that may be a secret shown as `…` (never shown back): a chat format's path but the words and ids its service shows in the open (a Telegram bot token, a Slack or Discord hook's secret, an ntfy topic), and any query value but `api-version`, `sp`, `sv`, `wait`, `thread_id` and `with_components`.",
    ),
  format: webhookFormat,
  chatId: z.string().nullable().describe('The chat a `telegram` webhook writes to; null for the other formats.'),
  description: z.string().nullable(),
  events: z.array(eventType),
  revoked: z.boolean(),
  revokedAt: timestamp.nullable(),
  previousSecretValidUntil: timestamp.nullable().describe('Until then, deliveries also carry a signature made with the secret the last rotation replaced.'),
  disabled: z
    .boolean()
    .describe('Disabled after its endpoint failed for too long: nothing is sent until the owner enables it (`POST /v1/webhooks/{webhookId}/enable`).'),
  disabledAt: timestamp.nullable(),
  disabledReason: z.string().nullable().describe('Why it was disabled: since when every attempt failed, how many in a row, and the last error.'),
  consecutiveFailures: z.number().int().describe('Failed attempts in a row; 0 once the endpoint answers 2xx.'),
  failingSince: timestamp.nullable().describe('When the current streak of failures began.'),
  backedOffUntil: timestamp.nullable().describe('Until then none of its deliveries is tried: the endpoint is backed off after a failure.'),
  skippedDeliveries: z
    .number()
    .int()
    .describe(
      "Events it was owed but not sent: the workspace's `webhook_deliveries` storage budget was used up, so no delivery was written for them (docs/operators/budgets.md).",
    ),
  skippingSince: timestamp
    .nullable()
    .describe('Since when its events are being skipped for the budget (a `webhook.skipped` event said so); null once a delivery is written again.'),
  createdAt: timestamp,
});

export const newWebhook = webhook.extend({
  secret: z.string().describe('The signing secret (`whsec_` and base64). Shown only in this answer: store it now.'),
});

export const webhookDelivery = z.object({
  id: uuid.describe('Also the `webhook-id` header of every attempt: the same across retries.'),
  eventId: z.string().describe("The event's id, as the payload's `id` and the event stream show it."),
  eventType,
  status: z
    .enum(['pending', 'delivered', 'failed', 'cancelled'])
    .describe(
      '`pending`: not delivered yet, retried at `nextAttemptAt`; `delivered`: a 2xx answer; `failed`: every retry failed; `cancelled`: the webhook was revoked.',
    ),
  attempts: z.number().int(),
  lastAttemptAt: timestamp.nullable(),
  lastStatusCode: z.number().int().nullable().describe("The last attempt's HTTP status, null when there was no answer."),
  lastError: z.string().nullable().describe('Why the last attempt failed, when it did.'),
  nextAttemptAt: timestamp.nullable(),
  createdAt: timestamp,
  finishedAt: timestamp.nullable(),
});

function toWebhook(row: WebhookRow, now: number): z.input<typeof webhook> {
  return {
    id: row.id,
    url: shownUrl(row.format, row.url),
    format: row.format,
    chatId: row.chatId,
    description: row.description,
    events: JSON.parse(row.events) as z.input<typeof webhook>['events'],
    revoked: row.revokedAt !== null,
    revokedAt: row.revokedAt,
    previousSecretValidUntil: row.previousSecret !== null && row.previousSecretUntil !== null && row.previousSecretUntil > now ? row.previousSecretUntil : null,
    disabled: row.disabledAt !== null,
    disabledAt: row.disabledAt,
    disabledReason: row.disabledReason,
    consecutiveFailures: row.failureCount,
    failingSince: row.failingSince,
    backedOffUntil: row.pausedUntil !== null && row.pausedUntil > now ? row.pausedUntil : null,
    skippedDeliveries: row.skippedDeliveries,
    skippingSince: row.skippingSince,
    createdAt: row.createdAt,
  };
}

function toDelivery(row: DeliveryRow, eventId: string): z.input<typeof webhookDelivery> {
  return {
    id: row.id,
    eventId,
    eventType: row.eventType as z.input<typeof eventType>,
    status: row.status,
    attempts: row.attempts,
    lastAttemptAt: row.lastAttemptAt,
    lastStatusCode: row.lastStatusCode,
    lastError: row.lastError,
    nextAttemptAt: row.status === 'pending' ? row.nextAttemptAt : null,
    createdAt: row.createdAt,
    finishedAt: row.finishedAt,
  };
}

const webhookUrl = z
  .url({ protocol: /^https?$/ })
  .max(2048)
  .refine((url) => !/^[a-z]+:\/\/[^/?#]*@/i.test(url), 'must not carry a user name or password')
  .describe('HTTPS only; it must resolve to public addresses (docs/owners/webhooks.md).');

async function found(db: Queryable, workspaceId: string, webhookId: string): Promise<WebhookRow> {
  const row = await getWebhook(db, workspaceId, webhookId);
  if (!row) throw fail.notFound('Webhook');
  return row;
}

/** A webhook of the workspace that can still be changed or sent to: 404 when missing, 409 when revoked. */
export async function foundLive(db: Queryable, workspaceId: string, webhookId: string): Promise<WebhookRow> {
  const row = await found(db, workspaceId, webhookId);
  if (row.revokedAt !== null) throw fail.conflict('The webhook is revoked.');
  return row;
}

export const createWebhook = defineOperation({
  name: 'webhooks.create',
  title: 'Register a webhook',
  description:
    "Register an HTTPS endpoint that receives the workspace's events of the listed types, signed with a secret shown only in this answer. Events from after the registration are delivered, retried for more than a day until the endpoint answers 2xx.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false },
  rest: [{ method: 'POST', path: '/v1/webhooks', status: 201 }],
  input: z
    .strictObject({
      url: webhookUrl,
      format: webhookFormat.default('generic'),
      events: z
        .array(eventType)
        .min(1)
        .max(Object.keys(EVENT_TYPES).length)
        .refine((types) => new Set(types).size === types.length, 'must not repeat a type')
        .optional()
        .describe(
          `The event types to deliver (docs/reference/events.md "Owner events"). Required for \`generic\`; the chat formats carry ${CHAT_EVENTS.join(', ')} only, their default.`,
        ),
      chatId: z
        .string()
        .regex(/^(-?\d{1,20}|@[A-Za-z0-9_]{5,32})$/, 'must be a chat id (a number) or @channelusername')
        .optional()
        .describe('For `telegram` only, and required there: the chat the bot writes to.'),
      description: z.string().min(1).max(200).optional(),
    })
    .superRefine((input, check) => {
      const issue = (path: string, message: string) => check.addIssue({ code: 'custom', path: [path], message });
      if (input.format === 'generic' && input.events === undefined) issue('events', 'required for the generic format');
      if (input.format !== 'generic' && input.events?.some((type) => !(CHAT_EVENTS as readonly string[]).includes(type))) {
        issue('events', `the ${input.format} format carries ${CHAT_EVENTS.join(', ')} only`);
      }
      if ((input.format === 'telegram') !== (input.chatId !== undefined))
        issue('chatId', input.format === 'telegram' ? 'required for telegram' : 'for telegram only');
      const refusal = URL.canParse(input.url) ? formatUrlRefusal(input.format, new URL(input.url)) : undefined;
      if (refusal) issue('url', refusal);
    }),
  output: newWebhook,
  async run({ ctx, credential, input }) {
    const refusal = await ctx.webhooks.refusal(new URL(input.url));
    if (refusal) throw fail.invalid(`The webhook URL is refused: ${refusal}.`, [{ path: 'url', message: refusal }]);
    const now = ctx.clock.now();
    const id = randomUUID();
    const secret = newWebhookSecret();
    const row = await ctx.db.transaction(async (tx) => {
      await insertWebhook(tx, {
        id,
        workspaceId: credential.workspaceId,
        url: input.url,
        description: input.description ?? null,
        events: input.events ?? [...CHAT_EVENTS],
        secret,
        format: input.format,
        chatId: input.chatId ?? null,
        createdBy: credential.subject,
        now,
      });
      await assertWithinCap(tx, ctx.settings.capacity, 'webhooks', credential.workspaceId, now);
      return (await getWebhook(tx, credential.workspaceId, id))!;
    });
    return { ...toWebhook(row, now), secret };
  },
});

export const listWorkspaceWebhooks = definePagedOperation({
  name: 'webhooks.list',
  title: 'List webhooks',
  description: "List the workspace's webhooks, revoked ones included, newest first. Secrets are never shown again.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/webhooks' }],
  input: z.strictObject({}),
  output: z.array(webhook),
  paged: { key: NEWEST_FIRST_KEY },
  async run({ ctx, credential, page }) {
    const now = ctx.clock.now();
    const { rows, next } = await listWebhooks(ctx.db, credential.workspaceId, page);
    return { items: rows.map((row) => toWebhook(row, now)), next };
  },
});

export const getWorkspaceWebhook = defineOperation({
  name: 'webhooks.get',
  title: 'Get a webhook',
  description: 'Get one webhook of the workspace. Its secret is never shown again.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/webhooks/{webhookId}' }],
  input: z.strictObject({ webhookId: uuid }),
  output: webhook,
  run: async ({ ctx, credential, input }) => toWebhook(await found(ctx.db, credential.workspaceId, input.webhookId), ctx.clock.now()),
});

export const rotateWorkspaceWebhookSecret = defineOperation({
  name: 'webhooks.rotateSecret',
  title: 'Rotate a webhook secret',
  description:
    'Give a webhook a new signing secret, shown only in this answer. For 24 hours deliveries carry two signatures, one with each secret, so the endpoint can switch at its own pace.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true },
  rest: [{ method: 'POST', path: '/v1/webhooks/{webhookId}/rotate-secret' }],
  input: z.strictObject({ webhookId: uuid }),
  output: newWebhook,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const secret = newWebhookSecret();
    const row = await ctx.db.transaction(async (tx) => {
      await foundLive(tx, credential.workspaceId, input.webhookId);
      await rotateWebhookSecret(tx, credential.workspaceId, input.webhookId, secret, now + PREVIOUS_SECRET_VALIDITY_MS);
      return (await getWebhook(tx, credential.workspaceId, input.webhookId))!;
    });
    return { ...toWebhook(row, now), secret };
  },
});

export const revokeWorkspaceWebhook = defineOperation({
  name: 'webhooks.revoke',
  title: 'Revoke a webhook',
  description: 'Revoke a webhook: nothing more is sent to it, and its deliveries not yet made are cancelled. Revoking it again changes nothing.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, destructive: true, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/webhooks/{webhookId}/revoke' }],
  input: z.strictObject({ webhookId: uuid }),
  output: webhook,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const row = await ctx.db.transaction(async (tx) => {
      await found(tx, credential.workspaceId, input.webhookId);
      await revokeWebhook(tx, credential.workspaceId, input.webhookId, now);
      return (await getWebhook(tx, credential.workspaceId, input.webhookId))!;
    });
    return toWebhook(row, now);
  },
});

export const enableWorkspaceWebhook = defineOperation({
  name: 'webhooks.enable',
  title: 'Enable a webhook',
  description:
    'Enable a webhook that was disabled after its endpoint failed for too long: its failure record is cleared, its pending deliveries are tried again, and events from now on are delivered (none from while it was disabled). Enabling an enabled webhook changes nothing; 409 on a revoked one.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/webhooks/{webhookId}/enable' }],
  input: z.strictObject({ webhookId: uuid }),
  output: webhook,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const row = await ctx.db.transaction(async (tx) => {
      await foundLive(tx, credential.workspaceId, input.webhookId);
      await enableWebhook(tx, credential.workspaceId, input.webhookId);
      return (await getWebhook(tx, credential.workspaceId, input.webhookId))!;
    });
    return toWebhook(row, now);
  },
});

export const disableWorkspaceWebhook = defineOperation({
  name: 'webhooks.disable',
  title: 'Disable a webhook',
  description:
    'Stop sending to a webhook until it is enabled again (`POST /v1/webhooks/{webhookId}/enable`), keeping it and its secret; events from while it is disabled are not delivered. Disabling a disabled webhook changes nothing; 409 on a revoked one.',
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: false, idempotent: true },
  rest: [{ method: 'POST', path: '/v1/webhooks/{webhookId}/disable' }],
  input: z.strictObject({ webhookId: uuid }),
  output: webhook,
  async run({ ctx, credential, input }) {
    const now = ctx.clock.now();
    const row = await ctx.db.transaction(async (tx) => {
      const current = await foundLive(tx, credential.workspaceId, input.webhookId);
      const disabled = await disableWebhook(tx, current.id, now, `Disabled by ${credential.subject}.`);
      // The same event as an automatic disable (src/domain/webhook-delivery.ts), with the owner as its reason.
      if (disabled)
        await appendWorkspaceEvent(tx, {
          workspaceId: disabled.workspaceId,
          type: 'webhook.disabled',
          subjectId: disabled.id,
          data: webhookSnapshot(disabled),
          createdAt: now,
        });
      return { row: disabled ?? current, changed: disabled !== undefined };
    });
    if (row.changed) announceJournal(ctx, credential.workspaceId);
    return toWebhook(row.row, now);
  },
});

export const listWebhookDeliveries = definePagedOperation({
  name: 'webhooks.deliveries',
  title: 'List webhook deliveries',
  description:
    "List a webhook's deliveries, newest first: one per event sent to it, with its attempts, the last answer or error, and when it is tried next. Finished deliveries are kept 7 days.",
  credentials: ['owner'],
  access: 'none',
  hints: { readOnly: true },
  rest: [{ method: 'GET', path: '/v1/webhooks/{webhookId}/deliveries' }],
  input: z.strictObject({ webhookId: uuid }),
  output: z.array(webhookDelivery),
  paged: { key: NEWEST_FIRST_KEY },
  async run({ ctx, credential, input, page }) {
    await found(ctx.db, credential.workspaceId, input.webhookId);
    const { rows, next } = await listDeliveries(ctx.db, input.webhookId, page);
    // The event's id as the workspace sees it on its stream and in the payload (event-ids.ts).
    const ids = await eventIds(ctx);
    return { items: rows.map((row) => toDelivery(row, ids.show(credential.workspaceId, row.eventId))), next };
  },
});

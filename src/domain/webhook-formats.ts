import { createHmac } from 'node:crypto';
import { z } from 'zod';
import type { ActionRecord } from './action-records.js';
import { getDevice } from '../store/devices.js';
import type { Queryable } from '../store/driver.js';
import type { ClaimedDelivery } from '../store/webhook-claims.js';
import { WEBHOOK_FORMATS, type WebhookFormat } from '../store/webhooks.js';
import type { Clock } from './context.js';
import { humanText, MAX_FIELD_CHARS } from './human-text.js';

const shownText = (text: string) => humanText(text, MAX_FIELD_CHARS);

/**
 * Webhook formats (docs/owners/approval-notifications.md). `generic` is the signed JSON event
 * of docs/owners/webhooks.md, byte for byte; the others turn an approval request into a message the
 * service at the other end accepts as it is, each with an approve and a reject link that open
 * the console at the action (the owner decides there: a link never decides on its own).
 *
 * The shapes follow each service's published format:
 * - ntfy "publish as JSON": POST to the server's root with `topic`, `title`, `message`, `click`
 *   and `actions` of type `view`;
 * - Slack incoming webhooks: `text` (the notification's fallback) and `blocks`, a `section` and
 *   an `actions` block of link buttons;
 * - Discord "execute webhook": `content` (at most 2,000 characters), `embeds`, and
 *   `allowed_mentions` with nothing allowed, so an agent's text cannot ping anyone;
 * - Microsoft Teams Workflows webhooks: a `message` with one Adaptive Card attachment whose
 *   actions are `Action.OpenUrl`;
 * - Telegram Bot API `sendMessage`: `chat_id`, `text` (no parse mode: plain text) and an
 *   `inline_keyboard` of URL buttons. Its URL carries the bot's token: see `shownUrl`.
 */

export { WEBHOOK_FORMATS, type WebhookFormat };

export const webhookFormat = z
  .enum(WEBHOOK_FORMATS)
  .describe(
    '`generic`: the signed JSON event (docs/owners/webhooks.md). `ntfy`, `slack`, `discord`, `teams`, `telegram`: a chat or push message for each approval request, with approve and reject links to the console.',
  );

/** The events a chat format carries: a person is asked to decide, nothing else is worth a ping. */
export const CHAT_EVENTS = ['approval.requested'] as const;

/** Telegram's method URL: `https://api.telegram.org/bot<token>/sendMessage`. */
const TELEGRAM_PATH = /^(.*\/bot)([^/]+)(\/sendMessage)$/;

/** Why `url` cannot take `format`, or undefined. */
export function formatUrlRefusal(format: WebhookFormat, url: URL): string | undefined {
  if (format === 'telegram' && !TELEGRAM_PATH.test(url.pathname))
    return 'a Telegram webhook is the bot API method URL, https://api.telegram.org/bot<token>/sendMessage';
  if (format === 'ntfy' && !/^\/[-_A-Za-z0-9]{1,64}$/.test(url.pathname)) return 'an ntfy webhook is the topic URL, such as https://ntfy.sh/<topic>';
  return undefined;
}

/** A URL's last path segment: where Slack (`/services/T…/B…/<secret>`), Discord (`/api/webhooks/<id>/<token>`) and ntfy (`/<topic>`) put the credential. */
const lastSegment = (url: URL) => url.pathname.split('/').findLast((segment) => segment !== '');

/**
 * The secret part of a URL, as it must never be shown back: whoever holds a chat URL can post
 * as the service. Telegram's bot token; the last path segment of a Slack or Discord hook, and an
 * ntfy topic (on ntfy.sh the topic is its password); the
 * `sig` parameter of a Teams Workflows URL (its last path segment when it has none).
 */
export function urlSecret(format: WebhookFormat, url: string): string | undefined {
  const parsed = new URL(url);
  switch (format) {
    case 'telegram':
      return TELEGRAM_PATH.exec(parsed.pathname)?.[2];
    case 'ntfy':
    case 'slack':
    case 'discord':
      return lastSegment(parsed);
    case 'teams':
      return parsed.searchParams.get('sig') || lastSegment(parsed);
    default:
      return undefined;
  }
}

/** The URL as the API and the console show it: its secret (see `urlSecret`) replaced by `…`. */
export function shownUrl(format: WebhookFormat, url: string): string {
  const secret = urlSecret(format, url);
  if (!secret) return url;
  const parsed = new URL(url);
  // Replaced where it stands, so a secret that is also a word of the host or the path stays where it is.
  if (parsed.searchParams.get('sig') === secret) {
    parsed.searchParams.set('sig', '…');
    return parsed.toString().replace(encodeURIComponent('…'), '…');
  }
  const at = url.lastIndexOf(secret);
  return `${url.slice(0, at)}…${url.slice(at + secret.length)}`;
}

/** Text the URL's secret may have reached (an error message), with the secret taken out. */
export function redacted(format: WebhookFormat, url: string, text: string): string {
  const secret = urlSecret(format, url);
  return secret ? text.replaceAll(secret, '…') : text;
}

/** Where the owner decides on an action: the console's page of it, opened at the decision. */
export function decisionLinks(consoleUrl: string, actionId: string): { open: string; approve: string; reject: string } {
  const open = `${consoleUrl}/console/actions/${encodeURIComponent(actionId)}`;
  return { open, approve: `${open}?decide=approve`, reject: `${open}?decide=reject` };
}

export interface ApprovalMessage {
  action: Pick<ActionRecord, 'id' | 'principal' | 'deviceId' | 'capability' | 'arguments'> & { approval: { expiresAt: number } | null; expiresAt: number };
  deviceName: string | null;
  consoleUrl: string;
}

const ARGUMENTS_SHOWN = 300;

/** The message's words, the same in every format; what an agent or a device wrote is marked and capped. */
function words(message: ApprovalMessage) {
  const { action } = message;
  const device = shownText(message.deviceName ?? action.deviceId);
  // Marked before it is capped, so a hidden character past the cap still shows as one.
  const args = humanText(JSON.stringify(action.arguments), ARGUMENTS_SHOWN);
  const until = new Date(action.approval?.expiresAt ?? action.expiresAt).toISOString().slice(0, 16).replace('T', ' ');
  return {
    title: `Approval needed: ${shownText(action.capability)} on ${device}`,
    body: `${shownText(action.principal)} asks to run ${shownText(action.capability)} on ${device}.`,
    args,
    until: `Waits for a decision until ${until} UTC.`,
    links: decisionLinks(message.consoleUrl, action.id),
  };
}

/** Slack's mrkdwn reads `&`, `<` and `>` as markup (links, mentions): they are escaped as Slack asks. */
const slackEscape = (text: string) => text.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');

/**
 * Discord renders markdown in `content` and in embeds, masked links `[text](url)` included, and
 * reads a backslash before any punctuation as "show this character". Escaped: what makes links,
 * emphasis, code, spoilers, headings, quotes and lists; `_` only where it could emphasise (an
 * underscore inside a word, `set_power`, never does).
 */
const discordEscape = (text: string) => text.replace(/[\\*~`|[\]()<>#]|(?<!\w)_|_(?!\w)/g, '\\$&').replace(/^(\s*)([-+]|\d+\.)/gm, '$1\\$2');

/**
 * Teams renders markdown (links included) in a TextBlock and none in a RichTextBlock's TextRun:
 * every line holding words an agent or a device chose is a TextRun.
 */
const teamsText = (text: string, style: Record<string, string> = {}) => ({
  type: 'RichTextBlock',
  inlines: [{ type: 'TextRun', text, ...style }],
});

type Words = ReturnType<typeof words>;
type ChatFormat = Exclude<WebhookFormat, 'generic'>;

/** Each chat format's request: where it goes and its body, from the message's words. */
const RENDERERS: Record<ChatFormat, (w: Words, text: string, target: { url: string; chatId: string | null }) => { url: string; body: unknown }> = {
  ntfy: (w, text, { url }) => {
    const topic = new URL(url);
    return {
      url: `${topic.origin}/`,
      body: {
        topic: topic.pathname.slice(1),
        title: w.title,
        message: text,
        priority: 4,
        tags: ['bell'],
        click: w.links.open,
        actions: [
          { action: 'view', label: 'Approve', url: w.links.approve, clear: true },
          { action: 'view', label: 'Reject', url: w.links.reject, clear: true },
        ],
      },
    };
  },
  slack: (w, text, { url }) => ({
    url,
    body: {
      text: `${slackEscape(w.title)}: ${slackEscape(w.body)}`,
      blocks: [
        { type: 'section', text: { type: 'mrkdwn', text: `*${slackEscape(w.title)}*\n${slackEscape(text)}` } },
        {
          type: 'actions',
          elements: [
            { type: 'button', text: { type: 'plain_text', text: 'Approve' }, style: 'primary', url: w.links.approve, action_id: 'approve' },
            { type: 'button', text: { type: 'plain_text', text: 'Reject' }, style: 'danger', url: w.links.reject, action_id: 'reject' },
          ],
        },
      ],
    },
  }),
  discord: (w, text, { url }) => ({
    url,
    body: {
      content: `${discordEscape(w.title)}\n${discordEscape(text)}\nApprove: <${w.links.approve}>\nReject: <${w.links.reject}>`.slice(0, 2000),
      embeds: [{ title: discordEscape(w.title).slice(0, 256), description: discordEscape(text).slice(0, 4096), url: w.links.open }],
      allowed_mentions: { parse: [] },
    },
  }),
  teams: (w, _text, { url }) => ({
    url,
    body: {
      type: 'message',
      attachments: [
        {
          contentType: 'application/vnd.microsoft.card.adaptive',
          contentUrl: null,
          content: {
            $schema: 'http://adaptivecards.io/schemas/adaptive-card.json',
            type: 'AdaptiveCard',
            version: '1.4',
            body: [
              teamsText(w.title, { weight: 'Bolder', size: 'Medium' }),
              teamsText(w.body),
              teamsText(`Arguments: ${w.args}`, { fontType: 'Monospace' }),
              { type: 'TextBlock', text: w.until, wrap: true, isSubtle: true },
            ],
            actions: [
              { type: 'Action.OpenUrl', title: 'Approve', url: w.links.approve },
              { type: 'Action.OpenUrl', title: 'Reject', url: w.links.reject },
            ],
          },
        },
      ],
    },
  }),
  telegram: (w, text, { url, chatId }) => ({
    url,
    body: {
      chat_id: chatId,
      text: `${w.title}\n\n${text}`.slice(0, 4096),
      reply_markup: {
        inline_keyboard: [
          [
            { text: 'Approve', url: w.links.approve },
            { text: 'Reject', url: w.links.reject },
          ],
        ],
      },
    },
  }),
};

/** The request for `format` (all but `generic`, which sends the event itself): the URL it goes to and its body. */
export function chatRequest(format: ChatFormat, url: string, chatId: string | null, message: ApprovalMessage): { url: string; body: unknown } {
  const w = words(message);
  return RENDERERS[format](w, `${w.body}\nArguments: ${w.args}\n${w.until}`, { url, chatId });
}

/** `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, keyed with the secret's decoded bytes (Standard Webhooks). */
export function signDelivery(secret: string, id: string, timestampSeconds: number, body: string): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  return `v1,${createHmac('sha256', key).update(`${id}.${timestampSeconds}.${body}`).digest('base64')}`;
}

/** The Standard Webhooks headers of one attempt: signed with the secret, and with the previous one while it is still valid. */
export function deliveryHeaders(delivery: ClaimedDelivery, now: number): Record<string, string> {
  const timestampSeconds = Math.floor(now / 1000);
  const signatures = [signDelivery(delivery.secret, delivery.id, timestampSeconds, delivery.payload)];
  if (delivery.previousSecret !== null && delivery.previousSecretUntil !== null && delivery.previousSecretUntil > now) {
    signatures.push(signDelivery(delivery.previousSecret, delivery.id, timestampSeconds, delivery.payload));
  }
  return {
    'content-type': 'application/json',
    'user-agent': 'dfc-webhooks',
    'webhook-id': delivery.id,
    'webhook-timestamp': String(timestampSeconds),
    'webhook-signature': signatures.join(' '),
  };
}

/**
 * What one attempt sends: the stored event, signed, for `generic`; for a chat format the
 * message its service reads (src/domain/webhook-formats.ts), with the device's name looked up
 * as it is now. A chat format is sent unsigned: those services authenticate the sender by the
 * secret URL (or token) the owner gave, and would not read the signature.
 */
export async function formattedRequest(deps: { db: Queryable; clock: Clock; consoleUrl: string }, delivery: ClaimedDelivery) {
  if (delivery.format === 'generic') return { url: delivery.url, headers: deliveryHeaders(delivery, deps.clock.now()), body: delivery.payload };
  const event = JSON.parse(delivery.payload) as { data: { action: ApprovalMessage['action'] } };
  const device = await getDevice(deps.db, delivery.workspaceId, event.data.action.deviceId);
  const request = chatRequest(delivery.format, delivery.url, delivery.chatId, {
    action: event.data.action,
    deviceName: device?.name ?? null,
    consoleUrl: deps.consoleUrl,
  });
  return { url: request.url, headers: { 'content-type': 'application/json', 'user-agent': 'dfc-webhooks' }, body: JSON.stringify(request.body) };
}

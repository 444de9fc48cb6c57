import { createHmac } from 'node:crypto';
import { z } from 'zod';
import type { ActionRecord } from './action-records.js';
import { getDevice } from '../store/devices.js';
import type { Queryable } from '../store/driver.js';
import type { ClaimedDelivery } from '../store/webhook-claims.js';
import { WEBHOOK_FORMATS, type WebhookFormat } from '../store/webhooks.js';
import type { Clock } from './context.js';
import { humanText, MAX_FIELD_CHARS } from './human-text.js';

/**
 * Chat apps make a link of text that looks like an address: Slack, Discord and Telegram of a bare
 * `https://…`, some of a bare host name (`evil.example`) or address (`10.0.0.1`) too. In what an
 * agent or a device wrote, `://` becomes `[:]//` and a dot of a host name or an IPv4 address
 * becomes `[.]` (the "defanged" form of security reports): the address is read, never opened,
 * and the only links of a message stay the service's own. A dot between digits (`0.5`) stays.
 */
export function unlinked(text: string): string {
  return text
    .replaceAll('://', '[:]//')
    .replace(/(?<![\d.])(\d{1,3})\.(\d{1,3})\.(\d{1,3})\.(\d{1,3})(?![\d])/g, '$1[.]$2[.]$3[.]$4')
    .replace(/(?<=[\p{L}\p{N}_-])[.\u3002\uFF0E\uFF61](?=\p{L})/gu, '[.]');
}

const shownText = (text: string) => unlinked(humanText(text, MAX_FIELD_CHARS));

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

/**
 * What of a chat URL is not secret, by format: the words of the URL its service documents
 * (`/services/…` on Slack, `/api/webhooks/…/slack` on Discord, `/workflows/…/triggers/manual/paths/invoke`
 * on Teams, `sendMessage` on Telegram). An ntfy topic has none: on ntfy.sh the topic is its password.
 */
const PUBLIC_WORDS: Record<WebhookFormat, ReadonlySet<string>> = {
  generic: new Set(),
  ntfy: new Set(),
  slack: new Set(['services']),
  discord: new Set(['api', 'webhooks', 'slack', 'github']),
  teams: new Set(['workflows', 'triggers', 'manual', 'paths', 'invoke', 'powerautomate', 'automations', 'direct']),
  telegram: new Set(['sendMessage']),
};

/** Query parameters whose values say how a request is read, never who may send it. */
const PUBLIC_PARAMETERS = new Set(['api-version', 'sp', 'sv', 'wait', 'thread_id', 'with_components']);
/** Query parameters whose names are shown, their values not: the credential parameters of the services above and of common gateways. */
const NAMED_SECRETS = new Set(['sig', 'code', 'auth', 'token', 'key', 'secret', 'signature', 'access_token', 'api_key', 'apikey', 'password']);

/** Whether path segment `i` of a `format` URL is one of the identifiers its service shows in the open (a Slack team, a Discord webhook id). */
function publicSegment(format: WebhookFormat, segments: readonly string[], i: number, query: URLSearchParams): boolean {
  const segment = segments[i]!;
  if (format === 'generic' || PUBLIC_WORDS[format].has(segment)) return true;
  const previous = segments[i - 1];
  switch (format) {
    case 'slack':
      // `/services/T…/B…/<secret>`: the team and the hook are named in the open, the last segment is the secret.
      return segments[0] === 'services' && ((i === 1 && /^T[A-Z0-9]{1,20}$/.test(segment)) || (i === 2 && /^B[A-Z0-9]{1,20}$/.test(segment)));
    case 'discord':
      // `/api[/v10]/webhooks/<id>/<token>[/slack|/github]`.
      return (previous === 'webhooks' && /^\d{1,20}$/.test(segment)) || (previous === 'api' && /^v\d{1,2}$/.test(segment));
    case 'teams':
      // The workflow's id is no secret when `sig` is: without one, which part is the secret is unknown.
      return previous === 'workflows' && query.has('sig') && /^[0-9A-Za-z-]{1,64}$/.test(segment);
    default:
      return false;
  }
}

const decoded = (text: string) => {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
};

/**
 * A webhook URL as it may be shown back, with every part that may be a secret replaced by `…`,
 * and the parts replaced (as written in the URL, and decoded). Whoever holds a chat URL can post
 * as the service, so the rule masks by default: a chat format's path shows only what its
 * service's documented shape names as public (words, and the ids above), and every other
 * segment is `…`: Telegram's bot token (`bot…`), the secret of a Slack or Discord hook (before
 * Discord's `/slack` or `/github` ending too), an ntfy topic, any part of a shape not known.
 * Every query value is `…` but those of PUBLIC_PARAMETERS, and the name too of a parameter
 * neither list knows; a fragment is `…`. A generic webhook's path is the owner's own endpoint
 * and is shown; its query follows the same rule. The shown URL is built from the parsed one, so
 * a secret in letters beyond ASCII cannot slip through as written.
 */
function maskUrl(format: WebhookFormat, url: string): { shown: string; secrets: string[] } {
  const parsed = new URL(url);
  const secrets: string[] = [];
  const hide = (part: string) => {
    if (part !== '') secrets.push(part, decoded(part));
    return '…';
  };
  const segments = parsed.pathname.split('/').slice(1);
  const path = segments
    .map((segment, i) => {
      if (segment === '' || publicSegment(format, segments, i, parsed.searchParams)) return segment;
      if (format === 'telegram' && segment.startsWith('bot')) return `bot${hide(segment.slice(3))}`;
      return hide(segment);
    })
    .join('/');
  const query = parsed.search
    .slice(1)
    .split('&')
    .filter((pair) => pair !== '')
    .map((pair) => {
      const at = pair.indexOf('=');
      const [name, value] = at === -1 ? [pair, undefined] : [pair.slice(0, at), pair.slice(at + 1)];
      const known = decoded(name).toLowerCase();
      if (PUBLIC_PARAMETERS.has(known)) return pair;
      if (NAMED_SECRETS.has(known)) return value === undefined ? name : `${name}=${hide(value)}`;
      return value === undefined ? hide(name) : `${hide(name)}=${hide(value)}`;
    });
  const fragment = parsed.hash === '' ? '' : `#${hide(parsed.hash.slice(1))}`;
  const shown = `${parsed.protocol}//${parsed.host}/${path}${query.length > 0 ? `?${query.join('&')}` : ''}${fragment}`;
  return { shown, secrets };
}

/** The URL as the API and the console show it: every part that may be a secret (see `maskUrl`) replaced by `…`. */
export function shownUrl(format: WebhookFormat, url: string): string {
  const { shown, secrets } = maskUrl(format, url);
  // Nothing hidden: the URL as the owner wrote it.
  return secrets.length === 0 ? url : shown;
}

/** Text the URL's secrets may have reached (an error message), with the URL and each secret part taken out. */
export function redacted(format: WebhookFormat, url: string, text: string): string {
  const { shown, secrets } = maskUrl(format, url);
  // The longest first, so that a secret holding another is taken out whole.
  return [...new Set(secrets)]
    .sort((a, b) => b.length - a.length)
    .reduce((result, secret) => result.replaceAll(secret, '…'), text.replaceAll(url, shown).replaceAll(new URL(url).href, shown));
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

/** The message's words, the same in every format; what an agent or a device wrote is marked, capped and cannot be a link. */
function words(message: ApprovalMessage) {
  const { action } = message;
  const device = shownText(message.deviceName ?? action.deviceId);
  // Marked before it is capped, so a hidden character past the cap still shows as one.
  const args = unlinked(humanText(JSON.stringify(action.arguments), ARGUMENTS_SHOWN));
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

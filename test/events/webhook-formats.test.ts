import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { redacted } from '../../src/domain/webhook-formats.js';
import { TEST_NO_ANSWER } from '../../src/domain/webhook-test.js';
import { grant, queue } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * Webhook formats (docs/owners/approval-notifications.md): each chat format's delivery of an
 * approval request, received by a real HTTP receiver on a loopback port (the test-only
 * OAUTH_CIMD_ALLOW_LOOPBACK admits it), is checked against the shape the receiving service
 * documents, with its limits; its approve and reject links open the console at the action.
 */

const CONSOLE = 'https://owner.example.test';

/** What each service documents for the request it accepts (field names, types, lengths). */
const link = z.url().startsWith(`${CONSOLE}/console/actions/`);
const SHAPES = {
  // ntfy "Publish as JSON": POST to the root URL; `topic` required; at most 3 actions.
  ntfy: z.strictObject({
    topic: z.string().regex(/^[-_A-Za-z0-9]{1,64}$/),
    title: z.string().min(1),
    message: z.string().min(1),
    priority: z.number().int().min(1).max(5),
    tags: z.array(z.string()),
    click: link,
    actions: z.array(z.strictObject({ action: z.literal('view'), label: z.string().min(1), url: link, clear: z.boolean() })).max(3),
  }),
  // Slack incoming webhooks: `text` with `blocks`; a section's text at most 3,000 characters,
  // a button's label at most 75, its url at most 3,000.
  slack: z.strictObject({
    text: z.string().min(1),
    blocks: z.tuple([
      z.strictObject({ type: z.literal('section'), text: z.strictObject({ type: z.literal('mrkdwn'), text: z.string().min(1).max(3000) }) }),
      z.strictObject({
        type: z.literal('actions'),
        elements: z.array(
          z.strictObject({
            type: z.literal('button'),
            text: z.strictObject({ type: z.literal('plain_text'), text: z.string().min(1).max(75) }),
            style: z.enum(['primary', 'danger']),
            url: link.max(3000),
            action_id: z.string().max(255),
          }),
        ),
      }),
    ]),
  }),
  // Discord "Execute Webhook": `content` at most 2,000 characters; an embed's title at most 256,
  // its description at most 4,096; `allowed_mentions.parse` empty: no mention pings anyone.
  discord: z.strictObject({
    content: z.string().min(1).max(2000),
    embeds: z.array(z.strictObject({ title: z.string().max(256), description: z.string().max(4096), url: link })).max(10),
    allowed_mentions: z.strictObject({ parse: z.array(z.string()).length(0) }),
  }),
  // Teams Workflows webhooks: a `message` whose attachment is an Adaptive Card.
  teams: z.strictObject({
    type: z.literal('message'),
    attachments: z.tuple([
      z.strictObject({
        contentType: z.literal('application/vnd.microsoft.card.adaptive'),
        contentUrl: z.null(),
        content: z.object({
          $schema: z.literal('http://adaptivecards.io/schemas/adaptive-card.json'),
          type: z.literal('AdaptiveCard'),
          version: z.string().regex(/^1\.\d$/),
          body: z
            .array(
              z.union([
                z.object({ type: z.literal('TextBlock'), text: z.string().min(1), wrap: z.literal(true) }),
                z.object({ type: z.literal('RichTextBlock'), inlines: z.array(z.object({ type: z.literal('TextRun'), text: z.string().min(1) })).min(1) }),
              ]),
            )
            .min(1),
          actions: z.array(z.strictObject({ type: z.literal('Action.OpenUrl'), title: z.string().min(1), url: link })),
        }),
      }),
    ]),
  }),
  // Telegram Bot API sendMessage: `chat_id`, `text` of 1 to 4,096 characters, and an inline
  // keyboard of URL buttons; no `parse_mode`, so the text is plain.
  telegram: z.strictObject({
    chat_id: z.union([z.string(), z.number()]),
    text: z.string().min(1).max(4096),
    reply_markup: z.strictObject({ inline_keyboard: z.array(z.array(z.strictObject({ text: z.string().min(1), url: link }))) }),
  }),
};
type Format = keyof typeof SHAPES;

interface Received {
  path: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

const received: Received[] = [];
const receiver = http.createServer((request, response) => {
  const chunks: Buffer[] = [];
  request.on('data', (chunk: Buffer) => chunks.push(chunk));
  request.on('end', () => {
    received.push({ path: request.url ?? '/', headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
    response.writeHead(request.url?.startsWith('/refuse') ? 400 : 200).end();
  });
});
let base = '';
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };

const TOKEN = '123456789:AAE-secret_bot-token';
const URLS: Record<Format, () => string> = {
  ntfy: () => `${base}/approvals-topic`,
  slack: () => `${base}/services/T000/B000/slack`,
  discord: () => `${base}/api/webhooks/1/discord`,
  teams: () => `${base}/workflows/teams`,
  telegram: () => `${base}/bot${TOKEN}/sendMessage`,
};
/** Where each format's request arrives: ntfy posts to the server's root with the topic in the body. */
const ARRIVES: Record<Format, () => string> = { ...URLS, ntfy: () => '/', slack: () => '/services/T000/B000/slack' } as Record<Format, () => string>;

async function until<T>(check: () => T | undefined): Promise<T> {
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

function register(format: Format, extra: Record<string, unknown> = {}) {
  return api.post('/v1/webhooks', {
    token: owner,
    body: { url: URLS[format](), format, ...(format === 'telegram' ? { chatId: '-1001234567890' } : {}), ...extra },
  });
}

const server = useTestServer({ env: { OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05', PUBLIC_BASE_URL: CONSOLE } });
const api = server.api;

beforeAll(async () => {
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  base = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  owner = await server.ownerToken('formats-owner');
  lamp = await attachDevice(api, owner, { name: 'Porch <light> @everyone' });
  agent = await createAgent(api, owner, { name: 'Helper' });
  await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
});
afterAll(async () => {
  receiver.closeAllConnections();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

describe('each chat format delivers an approval request as its service documents it', () => {
  let actionId: string;

  beforeAll(async () => {
    for (const format of Object.keys(SHAPES) as Format[]) expect((await register(format)).status).toBe(201);
    actionId = (await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } })).id;
  });

  it.each(Object.keys(SHAPES) as Format[])('%s', async (format) => {
    const path = new URL(ARRIVES[format](), base).pathname;
    const request = await until(() => received.find((r) => r.path === path));
    expect(request.headers['content-type']).toBe('application/json');
    const body = SHAPES[format].parse(JSON.parse(request.body));
    const text = JSON.stringify(body);
    // The approve and reject links open the console at the action: the owner decides there.
    expect(text).toContain(`${CONSOLE}/console/actions/${actionId}?decide=approve`);
    expect(text).toContain(`${CONSOLE}/console/actions/${actionId}?decide=reject`);
    expect(text).toContain('set_power');
    expect(text).toContain(agent.principal);
    // The chat formats are authenticated by their secret URL, not by a signature they would not read.
    expect(request.headers['webhook-signature']).toBeUndefined();
  });

  it('names the device and escapes what Slack would read as a mention or a link', async () => {
    const slack = await until(() => received.find((r) => r.path === '/services/T000/B000/slack'));
    expect(slack.body).toContain('Porch &lt;light&gt; @everyone');
    expect(slack.body).not.toContain('<light>');
  });

  it('posts ntfy to the server root with the topic in the body', async () => {
    const ntfy = await until(() => received.find((r) => r.path === '/'));
    expect(JSON.parse(ntfy.body).topic).toBe('approvals-topic');
  });

  it('sends the Telegram chat id it was given', async () => {
    const telegram = await until(() => received.find((r) => r.path === `/bot${TOKEN}/sendMessage`));
    expect(JSON.parse(telegram.body).chat_id).toBe('-1001234567890');
  });
});

describe('what an agent or a device wrote cannot make a link or hide text in a chat message', () => {
  const LURE = '[✅ Approve](https://evil.example/login)';
  const LURE_URLS: Record<Format, () => string> = {
    ntfy: () => `${base}/lure-topic`,
    slack: () => `${base}/services/T000/B000/lure`,
    discord: () => `${base}/api/webhooks/1/lure`,
    teams: () => `${base}/workflows/lure`,
    telegram: () => `${base}/bot1:lure/sendMessage`,
  };
  let actionId: string;

  beforeAll(async () => {
    const note = { type: 'object', properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false };
    const door = await attachDevice(api, owner, {
      name: '[Door](https://evil.example/door) \u202Eroop',
      manifest: { capabilities: [{ name: 'unlock', kind: 'control', arguments: note }] },
    });
    await grant(api, owner, agent.principal, door.id, ['unlock'], null, 'owner');
    for (const format of Object.keys(SHAPES) as Format[]) expect((await register(format, { url: LURE_URLS[format]() })).status).toBe(201);
    actionId = (await queue(api, agent.token, door.id, { capability: 'unlock', arguments: { note: `${LURE} \u202Eevil` } })).id;
  });

  const delivered = (format: Format) =>
    until(() => {
      const path = format === 'ntfy' ? '/' : new URL(LURE_URLS[format]()).pathname;
      const hit = received.find((r) => r.path === path && r.body.includes(actionId) && (format !== 'ntfy' || r.body.includes('lure-topic')));
      return hit && (SHAPES[format].parse(JSON.parse(hit.body)) as Record<string, unknown>);
    });

  it.each(Object.keys(SHAPES) as Format[])('%s shows a right-to-left override as a visible marker', async (format) => {
    const text = JSON.stringify(await delivered(format));
    expect(text).not.toContain('\u202E');
    expect(text).toContain('⟨U+202E⟩evil');
    expect(text).toContain('⟨U+202E⟩roop');
  });

  it('discord escapes the markdown of a masked link in the content and the embed', async () => {
    const body = (await delivered('discord')) as { content: string; embeds: { title: string; description: string }[] };
    for (const text of [body.content, body.embeds[0]!.title, body.embeds[0]!.description]) {
      // A masked link needs an unescaped `[…](`: every bracket and parenthesis the agent or device wrote is escaped.
      expect(text).not.toMatch(/(?<!\\)\[[^\]]*(?<!\\)\]\(/);
    }
    expect(body.content).toContain('\\[✅ Approve\\]\\(https\\[:\\]//evil\\[.\\]example/login\\)');
    expect(body.embeds[0]!.title).toContain('\\[Door\\]\\(https\\[:\\]//evil\\[.\\]example/door\\)');
  });

  it('teams puts every agent or device text in a TextRun, which renders no markdown', async () => {
    const body = (await delivered('teams')) as { attachments: { content: { body: { type: string; text?: string }[] } }[] };
    const blocks = body.attachments[0]!.content.body;
    const textBlocks = blocks.filter((block) => block.type === 'TextBlock').map((block) => block.text);
    expect(textBlocks.join('\n')).not.toContain('evil.example');
    // Shown, with its address unable to become a link.
    expect(JSON.stringify(blocks.filter((block) => block.type === 'RichTextBlock'))).toContain('[✅ Approve](https[:]//evil[.]example/login)');
  });

  it('slack escapes what mrkdwn reads as a link, and has no markdown links to read', async () => {
    const body = (await delivered('slack')) as { text: string; blocks: [{ text: { text: string } }] };
    expect(body.blocks[0].text.text).not.toMatch(/<https?:/);
    expect(body.text).not.toMatch(/<https?:/);
  });

  it.each(['telegram', 'ntfy'] as const)('%s sends plain text, with no parse mode or markdown switched on', async (format) => {
    const body = await delivered(format);
    expect(body).not.toHaveProperty('parse_mode');
    expect(body).not.toHaveProperty('markdown');
  });
});

describe('an address an agent or a device wrote is no link in a chat message', () => {
  const BARE_URLS: Record<Format, () => string> = {
    ntfy: () => `${base}/bare-topic`,
    slack: () => `${base}/services/T000/B000/bare`,
    discord: () => `${base}/api/webhooks/1/bare`,
    teams: () => `${base}/workflows/bare`,
    telegram: () => `${base}/bot1:bare/sendMessage`,
  };
  const NOTE = 'log in at https://evil.example/login or www.evil.example, mail root@evil.example, call 10.0.0.1, or тест.рф。com; dim to 0.5';
  let actionId: string;

  beforeAll(async () => {
    const note = { type: 'object', properties: { note: { type: 'string' } }, required: ['note'], additionalProperties: false };
    const gate = await attachDevice(api, owner, {
      name: 'Gate at gate.evil.example',
      manifest: { capabilities: [{ name: 'open.now', kind: 'control', arguments: note }] },
    });
    await grant(api, owner, agent.principal, gate.id, ['open.now'], null, 'owner');
    for (const format of Object.keys(SHAPES) as Format[]) expect((await register(format, { url: BARE_URLS[format]() })).status).toBe(201);
    actionId = (await queue(api, agent.token, gate.id, { capability: 'open.now', arguments: { note: NOTE } })).id;
  });

  it.each(Object.keys(SHAPES) as Format[])('%s: no scheme, host name or address of theirs is left to link, and the text is still there', async (format) => {
    const path = format === 'ntfy' ? '/' : new URL(BARE_URLS[format]()).pathname;
    const hit = await until(() => received.find((r) => r.path === path && r.body.includes(actionId) && (format !== 'ntfy' || r.body.includes('bare-topic'))));
    const body = SHAPES[format].parse(JSON.parse(hit.body));
    // The service's own links out, what is left is what the agent and the device wrote, and the words around it.
    const text = JSON.stringify(body).replaceAll(CONSOLE, '').replace('http://adaptivecards.io/schemas/adaptive-card.json', '');
    expect(text).not.toMatch(/[a-z]:\/\//i);
    for (const address of ['evil.example', 'gate.evil', '10.0.0.1', 'тест.рф', 'рф。com', 'open.now']) expect(text).not.toContain(address);
    const plain = text.replaceAll('\\\\', '');
    for (const shown of [
      'https[:]//evil[.]example/login',
      'www[.]evil[.]example',
      'root@evil[.]example',
      '10[.]0[.]0[.]1',
      'тест[.]рф[.]com',
      'gate[.]evil[.]example',
      'open[.]now',
    ]) {
      expect(plain).toContain(shown);
    }
    // Numbers keep their decimal point.
    expect(plain).toContain('dim to 0.5');
  });
});

describe('a Telegram bot token is never shown back', () => {
  it('is replaced by … in the answer to the registration, the listing and the webhook', async () => {
    const created = await register('telegram');
    expect(created.body.data.url).toBe(`${base}/bot…/sendMessage`);
    const listed = await api.get('/v1/webhooks', { token: owner });
    expect(JSON.stringify(listed.body)).not.toContain(TOKEN);
    const one = await api.get(`/v1/webhooks/${created.body.data.id}`, { token: owner });
    expect(one.body.data).toMatchObject({ url: `${base}/bot…/sendMessage`, format: 'telegram', chatId: '-1001234567890' });
  });
});

describe('the secret part of every chat webhook URL is never shown back', () => {
  const SIG = 'Xs3cr3t-Sig_value';
  it.each([
    ['slack', `/services/T000/B000/slackSecret123`, `/services/T000/B000/…`, 'slackSecret123'],
    ['discord', `/api/webhooks/42/discordToken-abc`, `/api/webhooks/42/…`, 'discordToken-abc'],
    [
      'teams',
      `/workflows/abc/triggers/manual/paths/invoke?api-version=1&sv=1.0&sig=${SIG}`,
      `/workflows/abc/triggers/manual/paths/invoke?api-version=1&sv=1.0&sig=…`,
      SIG,
    ],
    ['ntfy', `/secretTopic42`, `/…`, 'secretTopic42'],
  ] as const)('%s: replaced by … in the answer to the registration, the listing and the webhook', async (format, path, shown, secret) => {
    const created = await api.post('/v1/webhooks', { token: owner, body: { url: `${base}${path}`, format } });
    expect(created.status).toBe(201);
    expect(created.body.data.url).toBe(`${base}${shown}`);
    expect(JSON.stringify((await api.get('/v1/webhooks', { token: owner })).body)).not.toContain(secret);
    expect((await api.get(`/v1/webhooks/${created.body.data.id}`, { token: owner })).body.data.url).toBe(`${base}${shown}`);
  });

  // Shapes the services document beside the usual ones, and shapes no list knows: each secret part is `…`.
  it.each([
    ['discord', '/api/webhooks/42/discordToken-abc/slack', '/api/webhooks/42/…/slack', ['discordToken-abc']],
    ['discord', '/api/webhooks/42/discordToken-abc/github', '/api/webhooks/42/…/github', ['discordToken-abc']],
    ['discord', '/api/v10/webhooks/42/discordToken-abc?wait=true&thread_id=7', '/api/v10/webhooks/42/…?wait=true&thread_id=7', ['discordToken-abc']],
    ['discord', '/api/webhooks/42/tökén-geheim', '/api/webhooks/42/…', ['tökén-geheim', encodeURIComponent('tökén-geheim')]],
    ['slack', '/services/T000/B000/sécret-ü', '/services/T000/B000/…', ['sécret-ü', encodeURIComponent('sécret-ü')]],
    ['slack', '/services/T000/B000/slackSecret9?x-extra=hidden9#frag9', '/services/T000/B000/…?…=…#…', ['slackSecret9', 'x-extra', 'hidden9', 'frag9']],
    ['slack', '/hooks/custom/shape7', '/…/…/…', ['shape7', 'custom']],
    ['teams', '/api/approvals?code=FnKey-abc123', '/…/…?code=…', ['FnKey-abc123', 'approvals']],
    ['teams', '/workflows/teamsSecret5', '/workflows/…', ['teamsSecret5']],
    ['ntfy', '/topicSecret3?auth=QmFzaWMgdXNlcjpwYXNz', '/…?auth=…', ['topicSecret3', 'QmFzaWMgdXNlcjpwYXNz']],
    ['telegram', '/proxy4/bot4242:tokenSecret/sendMessage', '/…/bot…/sendMessage', ['proxy4', '4242:tokenSecret']],
  ] as const)('%s %s: shown as %s', async (format, path, shown, secrets) => {
    const created = await api.post('/v1/webhooks', {
      token: owner,
      body: { url: `${base}${path}`, format, ...(format === 'telegram' ? { chatId: '42' } : {}) },
    });
    expect(created.status).toBe(201);
    expect(created.body.data.url).toBe(`${base}${shown}`);
    const answers = JSON.stringify([
      created.body,
      (await api.get(`/v1/webhooks/${created.body.data.id}`, { token: owner })).body,
      (await api.get('/v1/webhooks', { token: owner })).body,
    ]);
    for (const secret of secrets) expect(answers).not.toContain(secret);
    // A delivery error quoting the URL, as written or as parsed, keeps none of it either.
    const url = `${base}${path}`;
    const error = redacted(format, url, `request to ${url} failed (${new URL(url).href})`);
    for (const secret of secrets) expect(error).not.toContain(secret);
  });

  it('shows a generic webhook its path, and a query value only where it is known not to be a secret', async () => {
    const created = await api.post('/v1/webhooks', {
      token: owner,
      body: { url: `${base}/hooks/receiver?token=genericSecret1&api-version=2&source=dfc`, events: ['approval.requested'] },
    });
    expect(created.body.data.url).toBe(`${base}/hooks/receiver?token=…&api-version=2&…=…`);
    expect(JSON.stringify((await api.get('/v1/webhooks', { token: owner })).body)).not.toContain('genericSecret1');
  });

  it('is taken out of a delivery error that quotes the URL', () => {
    const slack = 'https://hooks.slack.com/services/T0/B0/slackSecret123';
    expect(redacted('slack', slack, `request to ${slack} failed`)).toBe('request to https://hooks.slack.com/services/T0/B0/… failed');
    const teams = `https://prod.example.logic.azure.com/workflows/1/triggers/manual/paths/invoke?sig=${SIG}`;
    expect(redacted('teams', teams, `request to ${teams} failed`)).not.toContain(SIG);
  });
});

describe('a Telegram bot token never reaches a delivery error', () => {
  it('is taken out of an error message that quotes the URL', () => {
    const url = `https://api.telegram.org/bot${TOKEN}/sendMessage`;
    expect(redacted('telegram', url, `request to ${url} failed`)).toBe('request to https://api.telegram.org/bot…/sendMessage failed');
    expect(redacted('slack', 'https://hooks.slack.com/x', 'HTTP 404')).toBe('HTTP 404');
  });
});

describe('POST /v1/webhooks/{webhookId}/test sends one message now and answers how the endpoint replied', () => {
  it('sends a chat format a sample approval request, and says it was delivered', async () => {
    const created = (await register('discord', { url: `${base}/api/webhooks/2/test-send` })).body.data;
    const res = await api.post(`/v1/webhooks/${created.id}/test`, { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.data).toEqual({ delivered: true, statusCode: 200, error: null });
    const sent = received.find((r) => r.path === '/api/webhooks/2/test-send')!;
    SHAPES.discord.parse(JSON.parse(sent.body));
  });

  it('sends a generic webhook a signed webhook.test event', async () => {
    const created = (await api.post('/v1/webhooks', { token: owner, body: { url: `${base}/generic-test`, events: ['approval.requested'] } })).body.data;
    expect(created.format).toBe('generic');
    const res = await api.post(`/v1/webhooks/${created.id}/test`, { token: owner });
    expect(res.body.data.delivered).toBe(true);
    const sent = received.find((r) => r.path === '/generic-test')!;
    expect(JSON.parse(sent.body)).toMatchObject({ type: 'webhook.test', data: { webhook: { id: created.id } } });
    expect(sent.headers['webhook-signature']).toMatch(/^v1,/);
  });

  it('answers the status of an endpoint that refuses', async () => {
    const created = (await register('slack', { url: `${base}/refuse/slack` })).body.data;
    const res = await api.post(`/v1/webhooks/${created.id}/test`, { token: owner });
    expect(res.body.data).toEqual({ delivered: false, statusCode: 400, error: 'HTTP 400' });
  });
});

describe('test sends are rationed and say only whether the endpoint answered', () => {
  let other: string;
  beforeAll(async () => {
    other = await server.ownerToken('formats-test-sends');
  });
  const hook = async (path: string) =>
    (await api.post('/v1/webhooks', { token: other, body: { url: `${base}${path}`, format: 'slack' } })).body.data as { id: string };
  const send = (id: string) => api.post(`/v1/webhooks/${id}/test`, { token: other });

  it('refuses a second test of one webhook within 10 s, and a fourth in the workspace, with 429 and Retry-After', async () => {
    const [a, b, c, d] = [await hook('/rationed/a'), await hook('/rationed/b'), await hook('/rationed/c'), await hook('/rationed/d')];
    expect((await send(a.id)).status).toBe(200);
    const again = await send(a.id);
    expect(again.status).toBe(429);
    expect(again.body.error.code).toBe('rate_limited');
    expect(again.headers.get('retry-after')).toBe('10');
    expect((await send(b.id)).status).toBe(200);
    expect((await send(c.id)).status).toBe(200);
    expect((await send(d.id)).status).toBe(429);
    expect(received.filter((r) => r.path.startsWith('/rationed/'))).toHaveLength(3);
  });

  it('answers the same error for every kind of network failure', async () => {
    const probe = await server.ownerToken('formats-test-probe');
    const closed = (await api.post('/v1/webhooks', { token: probe, body: { url: 'http://127.0.0.1:1/closed', format: 'discord' } })).body.data;
    const res = await api.post(`/v1/webhooks/${closed.id}/test`, { token: probe });
    expect(res.body.data).toEqual({ delivered: false, statusCode: null, error: TEST_NO_ANSWER });
    expect(JSON.stringify(res.body)).not.toContain('ECONNREFUSED');
  });
});

describe('POST /v1/webhooks refuses a format it cannot write, with 400 at the field', () => {
  it.each([
    ['a Telegram webhook without a chat', { url: `http://127.0.0.1:1/bot${TOKEN}/sendMessage`, format: 'telegram' }, 'chatId'],
    ['a chat id on another format', { url: 'http://127.0.0.1:1/hook', format: 'slack', chatId: '42' }, 'chatId'],
    ['a Telegram URL that is not sendMessage', { url: 'http://127.0.0.1:1/bot1/getUpdates', format: 'telegram', chatId: '42' }, 'url'],
    ['an ntfy URL that is not a topic', { url: 'http://127.0.0.1:1/a/b', format: 'ntfy' }, 'url'],
    ['events other than approvals on a chat format', { url: 'http://127.0.0.1:1/hook', format: 'teams', events: ['device.online'] }, 'events'],
    ['a generic webhook without events', { url: 'http://127.0.0.1:1/hook' }, 'events'],
    ['an unknown format', { url: 'http://127.0.0.1:1/hook', format: 'pager', events: ['approval.requested'] }, 'format'],
  ])('%s', async (_, body, field) => {
    const res = await api.post('/v1/webhooks', { token: owner, body });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toContain(field);
  });
});

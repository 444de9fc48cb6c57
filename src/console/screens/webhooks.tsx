import type { Hono } from 'hono';
import type { z } from 'zod';
import { operations } from '../../domain/registry.js';
import type { webhook as webhookSchema, webhookDelivery } from '../../domain/webhooks.js';
import { EVENT_TYPES } from '../../domain/event-catalogue.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Secret, Time, type Viewer } from '../layout.js';

/**
 * Webhooks (docs/owners/approval-notifications.md, docs/owners/webhooks.md): the workspace's webhooks
 * (`webhooks.list`) with how each is doing, added in one of the formats owners read
 * (`webhooks.create`), tried at once with a test message (`webhooks.test`), their deliveries and
 * why they failed (`webhooks.deliveries`), a new secret (`webhooks.rotateSecret`), disabled,
 * enabled and revoked. A secret is shown once; a Telegram bot token never.
 */

type Webhook = z.infer<typeof webhookSchema>;
type Delivery = z.infer<typeof webhookDelivery>;

const FORMATS = [
  ['ntfy', 'ntfy push notification', 'The topic URL, such as https://ntfy.sh/your-secret-topic'],
  ['slack', 'Slack', 'The incoming webhook URL Slack gives, https://hooks.slack.com/services/…'],
  ['discord', 'Discord', "The channel webhook URL from the channel's Integrations, https://discord.com/api/webhooks/…"],
  ['teams', 'Microsoft Teams', 'The URL of a Workflows "Post to a channel when a webhook request is received" flow'],
  ['telegram', 'Telegram bot', 'https://api.telegram.org/bot<token>/sendMessage, and the chat id below'],
  ['generic', 'Signed JSON (your own receiver)', 'Your HTTPS endpoint; deliveries are signed (docs/owners/webhooks.md)'],
] as const;

const stateOf = (w: Webhook) =>
  w.revoked
    ? 'revoked'
    : w.disabled
      ? `disabled: ${w.disabledReason ?? ''}`
      : w.consecutiveFailures > 0
        ? `failing (${w.consecutiveFailures} in a row)`
        : 'sending';

function WebhookRow(props: { webhook: Webhook; viewer: Viewer }) {
  const w = props.webhook;
  const post = (path: string, label: string, id: string, danger = false) => (
    <form method="post" action={`/console/webhooks/${w.id}/${path}`} class="inline">
      <Csrf viewer={props.viewer} />
      <button type="submit" id={`${id}-${w.id}`} class={danger ? 'danger' : undefined}>
        {label}
      </button>
    </form>
  );
  return (
    <tr data-webhook-id={w.id}>
      <td data-label="Where">
        <code>{w.url}</code>
        {w.chatId ? ` (chat ${w.chatId})` : ''}
        {w.description ? <div class="muted">{w.description}</div> : null}
      </td>
      <td data-label="Format">{w.format}</td>
      <td data-label="Events">{w.events.join(', ')}</td>
      <td data-label="State" data-field="state">
        {stateOf(w)}
      </td>
      <td data-label="Manage">
        <a href={`/console/webhooks/${w.id}`} id={`deliveries-${w.id}`}>
          Deliveries
        </a>{' '}
        {w.revoked ? null : (
          <>
            {post('test', 'Send a test', 'test')} {w.format === 'generic' ? post('rotate', 'New secret', 'rotate') : null}{' '}
            {w.disabled ? post('enable', 'Enable', 'enable') : post('disable', 'Disable', 'disable')} {post('revoke', 'Revoke', 'revoke', true)}
          </>
        )}
      </td>
    </tr>
  );
}

/** What the owner typed into the add form, shown again when the service refused it. */
interface Typed {
  format: string;
  url: string;
  chatId: string;
  description: string;
  events: string[];
}

function AddForm(props: { viewer: Viewer; linkBase: string; linkBaseSet: boolean; typed: Typed | undefined }) {
  const { typed } = props;
  return (
    <form method="post" action="/console/webhooks/create" class="fields" id="add-webhook">
      <Csrf viewer={props.viewer} />
      <div>
        <label for="format">Send approvals to</label>
        <select id="format" name="format">
          {FORMATS.map(([value, label]) => (
            <option value={value} selected={typed?.format === value}>
              {label}
            </option>
          ))}
        </select>
      </div>
      <div>
        <label for="url">URL</label>
        <input type="text" id="url" name="url" required maxlength={2048} aria-describedby="url-help" value={typed?.url} />
        <ul class="muted" id="url-help">
          {FORMATS.map(([, label, help]) => (
            <li>
              {label}: {help}
            </li>
          ))}
        </ul>
      </div>
      <div>
        <label for="chatId">Telegram chat id (Telegram only)</label>
        <input type="text" id="chatId" name="chatId" maxlength={40} value={typed?.chatId} />
      </div>
      <fieldset>
        <legend>Events (signed JSON only; the others send approval requests)</legend>
        {Object.keys(EVENT_TYPES).map((type) => (
          <label>
            <input type="checkbox" name={`event-${type}`} value="1" checked={typed ? typed.events.includes(type) : type === 'approval.requested'} /> {type}
          </label>
        ))}
      </fieldset>
      <div>
        <label for="description">Description (optional)</label>
        <input type="text" id="description" name="description" maxlength={200} value={typed?.description} />
      </div>
      <p class={props.linkBaseSet ? 'muted' : 'warning'} id="link-base">
        Approve and reject links open <code>{props.linkBase}/console/actions/…</code>
        {props.linkBaseSet
          ? '.'
          : ': PUBLIC_BASE_URL is not set, so they open only where that address reaches this service. Set PUBLIC_BASE_URL to the address owners use.'}
      </p>
      <div>
        <button type="submit" class="primary" id="create-webhook">
          Add the webhook
        </button>
      </div>
    </form>
  );
}

async function WebhooksPage(
  guards: Guards,
  signed: Signed,
  flash: { done?: string; error?: string; issues?: { path: string; message: string }[]; secret?: string; typed?: Typed },
) {
  const webhooks = await guards.invoke(signed, operations.listWorkspaceWebhooks, { limit: 1000 });
  const { config } = guards.deps;
  return (
    <Page title="Webhooks" viewer={signed.viewer} screen="webhooks">
      <Flash done={flash.done} error={flash.error} issues={flash.issues} />
      {flash.secret ? <Secret id="webhook-secret" label="Signing secret" value={flash.secret} /> : null}
      <p class="muted">Get each approval request where you already look, with links that open the console at the action.</p>
      <div class="table-wrap">
        <table class="stack" id="webhooks">
          <thead>
            <tr>
              <th scope="col">Where</th>
              <th scope="col">Format</th>
              <th scope="col">Events</th>
              <th scope="col">State</th>
              <th scope="col">Manage</th>
            </tr>
          </thead>
          <tbody>
            {webhooks.map((w) => (
              <WebhookRow webhook={w} viewer={signed.viewer} />
            ))}
          </tbody>
        </table>
      </div>
      {webhooks.length === 0 ? <p id="no-webhooks">No webhooks yet.</p> : null}
      <h2>Add a webhook</h2>
      <AddForm viewer={signed.viewer} linkBase={config.publicBaseUrl} linkBaseSet={config.publicBaseUrlSet} typed={flash.typed} />
    </Page>
  );
}

function DeliveriesPage(props: { viewer: Viewer; webhook: Webhook; deliveries: Delivery[] }) {
  return (
    <Page title="Webhook deliveries" viewer={props.viewer}>
      <p>
        <code>{props.webhook.url}</code> ({props.webhook.format}): {stateOf(props.webhook)}.
      </p>
      <div class="table-wrap">
        <table class="stack" id="deliveries">
          <thead>
            <tr>
              <th scope="col">Event</th>
              <th scope="col">Created</th>
              <th scope="col">Status</th>
              <th scope="col">Attempts</th>
              <th scope="col">Last answer</th>
              <th scope="col">Next try</th>
            </tr>
          </thead>
          <tbody>
            {props.deliveries.map((d) => (
              <tr data-delivery-id={d.id}>
                <td data-label="Event">{d.eventType}</td>
                <td data-label="Created">
                  <Time ms={d.createdAt} />
                </td>
                <td data-label="Status" data-field="status">
                  {d.status}
                </td>
                <td data-label="Attempts">{d.attempts}</td>
                <td data-label="Last answer" data-field="last-error">
                  {d.lastError ?? (d.lastStatusCode !== null ? `HTTP ${d.lastStatusCode}` : '')}
                </td>
                <td data-label="Next try">{d.nextAttemptAt !== null ? <Time ms={d.nextAttemptAt} /> : ''}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
      {props.deliveries.length === 0 ? <p>Nothing delivered yet: deliveries appear here when an event of its types happens.</p> : null}
      <p>
        <a href="/console/webhooks">All webhooks</a>
      </p>
    </Page>
  );
}

const TOLD = { rotate: 'A new signing secret: the old one still signs for 24 hours.', disable: 'Disabled.', enable: 'Enabled.', revoke: 'Revoked.' } as const;
const MOVES = {
  rotate: operations.rotateWorkspaceWebhookSecret,
  disable: operations.disableWorkspaceWebhook,
  enable: operations.enableWorkspaceWebhook,
  revoke: operations.revokeWorkspaceWebhook,
};

export function mountWebhooks(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/webhooks',
    guards.page(async (c, signed) => c.html(await WebhooksPage(guards, signed, { done: TOLD[c.req.query('done') as keyof typeof TOLD] }))),
  );

  app.get(
    '/console/webhooks/:webhookId',
    guards.page(async (c, signed) => {
      const webhookId = c.req.param('webhookId') ?? '';
      const webhook = await guards.invoke(signed, operations.getWorkspaceWebhook, { webhookId });
      const deliveries = await guards.invoke(signed, operations.listWebhookDeliveries, { webhookId, limit: 100 });
      return c.html(<DeliveriesPage viewer={signed.viewer} webhook={webhook} deliveries={deliveries} />);
    }),
  );

  app.post(
    '/console/webhooks/create',
    guards.action(async (c, signed, form) => {
      const format = form.get('format') ?? 'generic';
      const events = Object.keys(EVENT_TYPES).filter((type) => form.get(`event-${type}`) === '1');
      const optional = (name: string) => {
        const value = (form.get(name) ?? '').trim();
        return value ? { [name]: value } : {};
      };
      const outcome = await guards.attempt(signed, operations.createWebhook, {
        url: (form.get('url') ?? '').trim(),
        format,
        ...(format === 'generic' ? { events } : {}),
        ...optional('chatId'),
        ...optional('description'),
      });
      if (!outcome.ok) {
        // The form comes back as the owner filled it, so fixing one field does not mean typing all of them again.
        const typed = { format, url: form.get('url') ?? '', chatId: form.get('chatId') ?? '', description: form.get('description') ?? '', events };
        return c.html(
          await WebhooksPage(guards, signed, { error: outcome.message, typed, ...(outcome.issues ? { issues: outcome.issues } : {}) }),
          outcome.status,
        );
      }
      const done = 'Added. Send a test to see it arrive.';
      return c.html(await WebhooksPage(guards, signed, format === 'generic' ? { done, secret: outcome.value.secret } : { done }), 201);
    }),
  );

  app.post(
    '/console/webhooks/:webhookId/test',
    guards.action(async (c, signed) => {
      const outcome = await guards.attempt(signed, operations.testWorkspaceWebhook, {
        webhookId: c.req.param('webhookId'),
      });
      if (!outcome.ok) return c.html(await WebhooksPage(guards, signed, { error: outcome.message }), outcome.status);
      const told = outcome.value.delivered
        ? { done: 'The test message was delivered.' }
        : { error: `The test message was not delivered: ${outcome.value.error ?? ''}` };
      return c.html(await WebhooksPage(guards, signed, told));
    }),
  );

  for (const move of Object.keys(MOVES) as (keyof typeof MOVES)[]) {
    app.post(
      `/console/webhooks/:webhookId/${move}`,
      guards.action(async (c, signed) => {
        const outcome = await guards.attempt(signed, MOVES[move], { webhookId: c.req.param('webhookId') });
        if (!outcome.ok) return c.html(await WebhooksPage(guards, signed, { error: outcome.message }), outcome.status);
        if (move === 'rotate' && 'secret' in outcome.value && outcome.value.secret)
          return c.html(await WebhooksPage(guards, signed, { done: TOLD.rotate, secret: outcome.value.secret }));
        return c.redirect(`/console/webhooks?done=${move}`, 303);
      }),
    );
  }
}

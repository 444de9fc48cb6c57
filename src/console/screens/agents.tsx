import type { Context, Hono } from 'hono';
import type { z } from 'zod';
import { operations } from '../../domain/registry.js';
import type { connection, newConnection } from '../../domain/schemas.js';
import { requestBaseUrl } from '../../http/base-url.js';
import type { HttpEnv } from '../../http/request.js';
import { ClientConfigs } from '../client-configs.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Secret, Term, Time, type Viewer } from '../layout.js';

/** Agents: agent connections and OAuth clients; create (the secret shown once), revoke. */

type Connection = z.infer<typeof connection>;
type Created = z.infer<typeof newConnection> | (Omit<z.infer<typeof newConnection>, 'token'> & { token: string | null });

const TTL_CHOICES = [
  { value: '', label: 'No expiry' },
  { value: '86400', label: '1 day' },
  { value: '2592000', label: '30 days' },
  { value: '31536000', label: '1 year' },
];

const DONE = {
  'agent-revoked': 'Agent connection revoked: its token answers 401 from the next request on.',
  'client-revoked': 'OAuth client revoked.',
} as const;

function ConnectionRows(props: { rows: Connection[]; viewer: Viewer; kind: 'agent' | 'client' }) {
  return (
    <tbody>
      {props.rows.map((row) => (
        <tr data-principal={row.principal}>
          <td data-label="Name">{row.name}</td>
          <td data-label="Agent identity">
            <code>{row.principal}</code>
          </td>
          <td data-label="Access level">{row.access === 'act' ? 'act (read and control)' : 'read'}</td>
          <td data-label={props.kind === 'agent' ? 'Token starts' : 'Client id'}>
            <code>{props.kind === 'agent' ? `${row.tokenPrefix}…` : row.oauth?.clientId}</code>
          </td>
          <td data-label="Expires">
            <Time ms={row.expiresAt} never="never" />
          </td>
          <td data-label="State">{row.revoked ? 'revoked' : 'active'}</td>
          <td>
            {row.revoked ? null : (
              <form method="post" action={props.kind === 'agent' ? `/console/agents/${row.id}/revoke` : '/console/oauth-clients/revoke'} class="inline">
                <Csrf viewer={props.viewer} />
                {props.kind === 'client' ? <input type="hidden" name="clientId" value={row.oauth?.clientId ?? ''} /> : null}
                <button type="submit" class="danger" aria-label={`Revoke ${row.name}`}>
                  Revoke
                </button>
              </form>
            )}
          </td>
        </tr>
      ))}
    </tbody>
  );
}

function Head() {
  return (
    <thead>
      <tr>
        <th scope="col">Name</th>
        <th scope="col">
          <Term api="principal">Agent identity</Term>
        </th>
        <th scope="col">
          <Term api="access (the credential's ceiling)">Access level</Term>
        </th>
        <th scope="col">Credential</th>
        <th scope="col">Expires</th>
        <th scope="col">State</th>
        <th scope="col">
          <span class="muted">Action</span>
        </th>
      </tr>
    </thead>
  );
}

// eslint-disable-next-line max-lines-per-function -- one page's markup, read top to bottom as the page shows
function AgentsPage(props: {
  viewer: Viewer;
  agents: Connection[];
  clients: Connection[];
  created?: { kind: 'agent' | 'client'; value: Created; mcpUrl: string } | undefined;
  error?: string | undefined;
  issues?: { path: string; message: string }[] | undefined;
  done?: string | undefined;
}) {
  const created = props.created;
  return (
    <Page title="Agents" viewer={props.viewer} screen="agents">
      <Flash error={props.error} issues={props.issues} done={props.done} />
      {created ? (
        <section aria-labelledby="created-heading">
          <h2 id="created-heading">
            {created.kind === 'agent' ? 'Agent connection' : 'OAuth client'} {created.value.name}
          </h2>
          <p>
            Agent identity <code id="created-principal">{created.value.principal}</code>: it reaches no device until you{' '}
            <a href={`/console/grants?principal=${encodeURIComponent(created.value.principal)}`}>grant it functions</a>.
          </p>
          {created.kind === 'client' && created.value.oauth ? (
            <p>
              Client id <code id="created-client-id">{created.value.oauth.clientId}</code>
            </p>
          ) : null}
          {created.value.token ? (
            <>
              <Secret id="created-token" label={created.kind === 'agent' ? 'Agent token' : 'Client secret'} value={created.value.token} />
              {created.kind === 'client' && created.value.oauth?.redirectUris.length === 0 ? (
                <p>
                  A server-to-server client: it gets its access tokens at <code>/oauth/token</code> with <code>grant_type=client_credentials</code> and this
                  secret, by HTTP Basic or in the form (docs/agents/oauth.md, "Headless agents").
                </p>
              ) : null}
            </>
          ) : (
            <p class="muted">A public client: it has no secret and signs in with PKCE.</p>
          )}
          <ClientConfigs
            mcpUrl={created.mcpUrl}
            token={created.kind === 'agent' ? created.value.token : null}
            urlOnly={created.kind === 'client' && created.value.oauth?.redirectUris.length === 0}
          />
        </section>
      ) : null}
      <section aria-labelledby="agents-heading">
        <h2 id="agents-heading">Agent connections</h2>
        {props.agents.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <div class="table-wrap">
            <table class="stack" id="agent-connections">
              <Head />
              <ConnectionRows rows={props.agents} viewer={props.viewer} kind="agent" />
            </table>
          </div>
        )}
        <form method="post" action="/console/agents" class="fields">
          <Csrf viewer={props.viewer} />
          <fieldset>
            <legend>New agent connection</legend>
            <div>
              <label for="agent-name">Name</label>
              <input type="text" id="agent-name" name="name" required maxlength={64} placeholder="Support bot" />
            </div>
            <div>
              <label for="agent-access">
                <Term api="access (the credential's ceiling)">Access level</Term>
              </label>
              <select id="agent-access" name="access">
                <option value="read">read: read functions only</option>
                <option value="act">act: read and control functions</option>
              </select>
            </div>
            <div>
              <label for="agent-principal">
                <Term api="principal">Agent identity</Term> (optional)
              </label>
              <input type="text" id="agent-principal" name="principal" maxlength={128} placeholder="agent:support-bot" />
            </div>
            <div>
              <label for="agent-ttl">Token lifetime</label>
              <select id="agent-ttl" name="ttlSeconds">
                {TTL_CHOICES.map((choice) => (
                  <option value={choice.value}>{choice.label}</option>
                ))}
              </select>
            </div>
            <p>
              <button type="submit" class="primary" id="create-agent">
                Create agent connection
              </button>
            </p>
          </fieldset>
        </form>
      </section>
      <section aria-labelledby="clients-heading">
        <h2 id="clients-heading">OAuth clients</h2>
        {props.clients.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <div class="table-wrap">
            <table class="stack" id="oauth-clients">
              <Head />
              <ConnectionRows rows={props.clients} viewer={props.viewer} kind="client" />
            </table>
          </div>
        )}
        <form method="post" action="/console/oauth-clients" class="fields">
          <Csrf viewer={props.viewer} />
          <fieldset>
            <legend>New OAuth client</legend>
            <div>
              <label for="client-name">Name</label>
              <input type="text" id="client-name" name="name" required maxlength={64} />
            </div>
            <fieldset>
              <legend>Kind</legend>
              <label>
                <input type="radio" name="kind" value="confidential" checked /> Confidential (a web app: signs in at a browser, keeps a secret)
              </label>
              <label>
                <input type="radio" name="kind" value="public" /> Public (cannot keep a secret: desktop, CLI)
              </label>
              <label>
                <input type="radio" name="kind" value="server" /> Confidential (server-to-server): no browser, gets tokens with its secret
              </label>
            </fieldset>
            <div>
              <label for="client-redirects">Redirect URIs (one per line; none for server-to-server)</label>
              <textarea id="client-redirects" name="redirectUris" rows={3}></textarea>
            </div>
            <div>
              <label for="client-access">
                <Term api="access (the credential's ceiling)">Access level</Term>
              </label>
              <select id="client-access" name="access">
                <option value="read">read</option>
                <option value="act">act</option>
              </select>
            </div>
            <p>
              <button type="submit" class="primary" id="create-client">
                Create OAuth client
              </button>
            </p>
          </fieldset>
        </form>
      </section>
    </Page>
  );
}

export function mountAgents(app: Hono<HttpEnv>, guards: Guards): void {
  const mcpUrlOf = (c: Context<HttpEnv>) => `${requestBaseUrl(c, guards.deps.config)}/mcp`;
  const lists = async (signed: Signed) => ({
    agents: await guards.invoke(signed, operations.listAgentConnections, {}),
    clients: await guards.invoke(signed, operations.listOAuthClients, {}),
  });

  app.get(
    '/console/agents',
    guards.page(async (c, signed) =>
      c.html(<AgentsPage viewer={signed.viewer} {...await lists(signed)} done={DONE[c.req.query('done') as keyof typeof DONE]} />),
    ),
  );

  app.post(
    '/console/agents',
    guards.action(async (c, signed, form) => {
      const principal = (form.get('principal') ?? '').trim();
      const ttl = form.get('ttlSeconds') ?? '';
      const created = await guards.attempt(signed, operations.createAgentConnection, {
        name: form.get('name') ?? '',
        access: form.get('access') ?? 'read',
        ttlSeconds: ttl === '' ? null : Number(ttl),
        ...(principal ? { principal } : {}),
      });
      if (!created.ok)
        return c.html(<AgentsPage viewer={signed.viewer} {...await lists(signed)} error={created.message} issues={created.issues} />, created.status);
      return c.html(<AgentsPage viewer={signed.viewer} {...await lists(signed)} created={{ kind: 'agent', value: created.value, mcpUrl: mcpUrlOf(c) }} />);
    }),
  );

  app.post(
    '/console/agents/:connectionId/revoke',
    guards.action(async (c, signed) => {
      await guards.invoke(signed, operations.revokeAgentConnection, { connectionId: c.req.param('connectionId') });
      return c.redirect('/console/agents?done=agent-revoked', 303);
    }),
  );

  app.post(
    '/console/oauth-clients',
    guards.action(async (c, signed, form) => {
      const created = await guards.attempt(signed, operations.createOAuthClient, {
        name: form.get('name') ?? '',
        // A server-to-server client never comes back from a browser: it has nowhere to return to.
        redirectUris:
          form.get('kind') === 'server'
            ? []
            : (form.get('redirectUris') ?? '')
                .split(/\r?\n/)
                .map((uri) => uri.trim())
                .filter(Boolean),
        public: form.get('kind') === 'public',
        access: form.get('access') ?? 'read',
      });
      if (!created.ok)
        return c.html(<AgentsPage viewer={signed.viewer} {...await lists(signed)} error={created.message} issues={created.issues} />, created.status);
      return c.html(<AgentsPage viewer={signed.viewer} {...await lists(signed)} created={{ kind: 'client', value: created.value, mcpUrl: mcpUrlOf(c) }} />);
    }),
  );

  app.post(
    '/console/oauth-clients/revoke',
    guards.action(async (c, signed, form) => {
      await guards.invoke(signed, operations.revokeOAuthClient, { clientId: form.get('clientId') ?? '' });
      return c.redirect('/console/agents?done=client-revoked', 303);
    }),
  );
}

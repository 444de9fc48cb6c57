import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Icon, Page, Term, Time, type Viewer } from '../layout.js';
import { allDevices } from './devices.js';
import { ConditionsLink, ConditionsSummary } from './grant-conditions.js';
import { AccessLevel, allGrants, EditGrant, EditGrantForm, knownAgents, staleReason, type Connection, type Grant } from './grant-parts.js';

/**
 * The grants overview: every grant of every agent on every device, one row each, with its
 * access level, approval mode, expiry and state, changed or revoked in place. Search narrows it
 * to an agent, a device or a function; pages keep a large workspace's screen short. Agents
 * without any grant are named too, with the way to grant them something.
 */

export const OVERVIEW_PAGE = 50;

interface Row {
  grant: Grant;
  agent: string;
  device: string;
}

export type Flashed = { error?: string; issues?: { path: string; message: string }[]; done?: string };

function matches(row: Row, query: string): boolean {
  const q = query.toLowerCase();
  return [row.agent, row.grant.principal, row.device, row.grant.capability].some((text) => text.toLowerCase().includes(q));
}

function overviewLink(query: string, page: number): string {
  const params = new URLSearchParams();
  if (query) params.set('q', query);
  if (page > 1) params.set('page', String(page));
  const text = params.toString();
  return text ? `/console/grants?${text}` : '/console/grants';
}

function GrantRow(props: { row: Row; back: string; viewer: Viewer }) {
  const { grant } = props.row;
  const label = `${grant.capability} on ${props.row.device} for ${props.row.agent}`;
  return (
    <tr data-grant-id={grant.id} data-principal={grant.principal} data-function={grant.capability}>
      <td data-label="Agent">
        <a href={`/console/grants?principal=${encodeURIComponent(grant.principal)}`}>{props.row.agent}</a>
        {props.row.agent !== grant.principal ? (
          <div class="muted">
            <code>{grant.principal}</code>
          </div>
        ) : null}
      </td>
      <td data-label="Device">{props.row.device}</td>
      <td data-label="Function">
        <code class="fn">{grant.capability}</code>
      </td>
      <td data-label="Access level">
        <AccessLevel kind={grant.functionKind} />
      </td>
      <td data-label="Approval" data-field="approval">
        {grant.approval}
      </td>
      <td data-label="Expires">
        <Time ms={grant.expiresAt} never="never" />
      </td>
      <td data-label="Conditions" data-field="conditions">
        <ConditionsSummary grant={grant} /> <ConditionsLink grant={grant} label={label} back={props.back} />
      </td>
      <td data-label="State" data-field="state">
        {grant.stale ? (
          <span class="badge stale" title={staleReason(grant.stale)}>
            stale
          </span>
        ) : grant.expired ? (
          <span class="badge expired">expired</span>
        ) : (
          <span class="badge running">live</span>
        )}
        {grant.gatewayId ? <div class="muted">by a gateway grant</div> : null}
      </td>
      <td data-label="Change">
        <EditGrant grant={grant} label={label} back={props.back} viewer={props.viewer} />{' '}
        <button type="submit" form={`revoke-${grant.id}`} class="danger small" aria-label={`Revoke ${label}`}>
          <Icon name="trash-2" />
          Revoke
        </button>
      </td>
    </tr>
  );
}

function SearchForm(props: { query: string }) {
  return (
    <form method="get" action="/console/grants" class="toolbar" role="search">
      <div>
        <label for="q">Search agents, devices and functions</label>
        <input type="search" id="q" name="q" value={props.query} maxlength={128} />
      </div>
      <button type="submit" id="search-grants">
        <Icon name="search" />
        Search
      </button>
      {props.query ? <a href="/console/grants">Show all</a> : null}
    </form>
  );
}

function OverviewTable(props: { rows: Row[]; back: string; viewer: Viewer }) {
  return (
    <div class="table-wrap">
      <table class="stack" id="grants-overview">
        <caption class="visually-hidden">Grants by agent and device</caption>
        <thead>
          <tr>
            <th scope="col">
              <Term api="principal">Agent</Term>
            </th>
            <th scope="col">Device</th>
            <th scope="col">
              <Term api="capability">Function</Term>
            </th>
            <th scope="col">
              <Term api="functionKind">Access level</Term>
            </th>
            <th scope="col">Approval</th>
            <th scope="col">Expires</th>
            <th scope="col">
              <Term api="conditions">Conditions</Term>
            </th>
            <th scope="col">State</th>
            <th scope="col">Change</th>
          </tr>
        </thead>
        <tbody>
          {props.rows.map((row) => (
            <GrantRow row={row} back={props.back} viewer={props.viewer} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The forms the rows' change and revoke buttons post through (`form=`), outside the table. */
function RowForms(props: { rows: Row[]; back: string; viewer: Viewer }) {
  return (
    <>
      {props.rows.map((row) => (
        <>
          <EditGrantForm grant={row.grant} back={props.back} viewer={props.viewer} />
          <form method="post" action="/console/grants/revoke" id={`revoke-${row.grant.id}`} hidden>
            <Csrf viewer={props.viewer} />
            <input type="hidden" name="grantId" value={row.grant.id} />
            <input type="hidden" name="back" value={props.back} />
          </form>
        </>
      ))}
    </>
  );
}

/** Every agent, those without any grant marked, and a field for an identity no agent has yet. */
function AgentsToGrant(props: { agents: Connection[]; granted: Set<string> }) {
  return (
    <>
      <h2>Grant functions to an agent</h2>
      {props.agents.length === 0 ? (
        <p>
          No agents yet: <a href="/console/agents">create one</a>.
        </p>
      ) : (
        <ul id="agents-to-grant">
          {props.agents.map((agent) => (
            <li>
              <a href={`/console/grants?principal=${encodeURIComponent(agent.principal)}`}>{agent.name}</a> <code>{agent.principal}</code>
              {props.granted.has(agent.principal) ? null : <span class="muted"> · nothing granted yet</span>}
            </li>
          ))}
        </ul>
      )}
      <form method="get" action="/console/grants" class="toolbar">
        <div>
          <label for="principal">
            Another <Term api="principal">agent identity</Term>
          </label>
          <input type="text" id="principal" name="principal" required maxlength={128} placeholder="agent:support-bot" />
        </div>
        <button type="submit" id="show-grants">
          Show its grants
        </button>
      </form>
    </>
  );
}

export async function renderOverview(guards: Guards, signed: Signed, query: string, page: number, flash: Flashed) {
  const [agents, devices, grants] = await Promise.all([knownAgents(guards, signed), allDevices(guards, signed), allGrants(guards, signed)]);
  const agentNames = new Map<string, string>(agents.map((a) => [a.principal, a.name]));
  const deviceNames = new Map(devices.map((d) => [d.id, d.name]));
  const rows = grants
    .map((grant) => ({ grant, agent: agentNames.get(grant.principal) ?? grant.principal, device: deviceNames.get(grant.deviceId) ?? grant.deviceId }))
    .filter((row) => !query || matches(row, query))
    .sort((a, b) => a.agent.localeCompare(b.agent) || a.device.localeCompare(b.device) || a.grant.capability.localeCompare(b.grant.capability));
  const pages = Math.max(1, Math.ceil(rows.length / OVERVIEW_PAGE));
  const current = Math.min(Math.max(1, page), pages);
  const shown = rows.slice((current - 1) * OVERVIEW_PAGE, current * OVERVIEW_PAGE);
  const back = overviewLink(query, current);
  return (
    <Page title="Grants" viewer={signed.viewer} screen="grants">
      <Flash {...flash} />
      <p class="lede">
        What each agent may call: every grant of every agent on every device. Change the approval or the expiry in place, set how far, when and how often with
        Conditions, or revoke; open an agent to grant it more functions.
      </p>
      <SearchForm query={query} />
      <p class="muted" id="grant-count">
        {rows.length === 0 ? 'No grants' : `${rows.length} grant${rows.length === 1 ? '' : 's'}`}
        {query ? ` matching “${query}”` : ''}
        {pages > 1 ? ` · page ${current} of ${pages}` : ''}
      </p>
      {shown.length > 0 ? <OverviewTable rows={shown} back={back} viewer={signed.viewer} /> : null}
      {pages > 1 ? (
        <nav class="pager" aria-label="Grant pages">
          {current > 1 ? <a href={overviewLink(query, current - 1)}>Previous page</a> : null}
          {current < pages ? <a href={overviewLink(query, current + 1)}>Next page</a> : null}
        </nav>
      ) : null}
      <RowForms rows={shown} back={back} viewer={signed.viewer} />
      <AgentsToGrant agents={agents} granted={new Set(grants.map((g) => g.principal))} />
    </Page>
  );
}

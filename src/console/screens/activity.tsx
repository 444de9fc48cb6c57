import type { Hono } from 'hono';
import type { z } from 'zod';
import type { action as actionSchema } from '../../domain/action-records.js';
import { ACTION_STATUSES } from '../../domain/action-states.js';
import { DomainError, type ErrorIssue } from '../../domain/errors.js';
import { humanText, MAX_FIELD_CHARS } from '../../domain/human-text.js';
import { operations } from '../../domain/registry.js';
import type { connection } from '../../domain/schemas.js';
import { documentStream } from '../../http/document-stream.js';
import type { HttpEnv } from '../../http/request.js';
import { ArgumentList } from '../arguments.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Time, type Viewer } from '../layout.js';
import { zonedMs, zoneOf } from '../zones.js';
import { reasonOf } from './action.js';
import { allDevices } from './devices.js';

/**
 * Activity (docs/owners/activity-log.md): the workspace's actions, newest first, a page at a
 * time, narrowed by the `actions.list` operation itself (status, device, agent, function, a time
 * range), so a filter reaches the whole history; the filter form is a plain GET. Each row says
 * why an action ended as it did and links to the action's page; a queued one can be cancelled
 * on the spot. On the first page the script adds new actions as they are requested
 * (src/console/pending.tsx) and console.js keeps statuses current. Times typed and exported are
 * the owner's (the browser's zone, `tz`), UTC without script.
 */

type Action = z.infer<typeof actionSchema>;
type Connection = z.infer<typeof connection>;

const PAGE = 50;

interface Filters {
  status: string;
  deviceId: string;
  principal: string;
  capability: string;
  from: string;
  to: string;
  tz: string;
}

const filtersOf = (get: (name: string) => string | undefined): Filters => {
  const read = (name: string) => (get(name) ?? '').trim();
  return {
    status: read('status'),
    deviceId: read('deviceId'),
    principal: read('principal'),
    capability: read('capability'),
    from: read('from'),
    to: read('to'),
    tz: read('tz'),
  };
};

/** The operation's input for the filters: empty fields are no filter; times in the owner's zone. */
function listInput(filters: Filters) {
  const zone = zoneOf(filters.tz);
  const since = zonedMs(filters.from, zone);
  const until = zonedMs(filters.to, zone);
  const given = Object.entries({ status: filters.status, deviceId: filters.deviceId, principal: filters.principal, capability: filters.capability }).filter(
    ([, value]) => value !== '',
  );
  return {
    ...Object.fromEntries(given),
    ...(filters.from ? { since: since ?? filters.from } : {}),
    ...(filters.to ? { until: until ?? filters.to } : {}),
  };
}

function ActionRow(props: { action?: Action; names?: Map<string, string>; agents?: Map<string, string>; viewer: Viewer }) {
  const a = props.action;
  const cancellable = a?.status === 'scheduled' || a?.status === 'queued' || a?.status === 'awaiting_approval';
  return (
    <tr data-action-id={a?.id ?? ''}>
      <td data-label="Created" data-field="created">
        {a ? <Time ms={a.createdAt} /> : ''}
      </td>
      <td data-label="Status" data-field="status">
        {a ? <strong>{a.status}</strong> : ''}
      </td>
      <td data-label="Why" data-field="reason">
        {a ? reasonOf(a) : ''}
      </td>
      <td data-label="Device" data-field="device">
        {a ? (props.names?.get(a.deviceId) ?? a.deviceId) : ''}
      </td>
      <td data-label="Function">
        <code data-field="capability">{a?.capability ?? ''}</code>
      </td>
      <td data-label="Arguments">
        <div data-field="arguments">{a ? <ArgumentList args={a.arguments} /> : ''}</div>
      </td>
      <td data-label="Agent">
        <span data-field="agent-name">{a ? (props.agents?.get(a.principal) ?? '') : ''}</span>{' '}
        <code class="muted" data-field="principal">
          {a ? humanText(a.principal, MAX_FIELD_CHARS) : ''}
        </code>
      </td>
      <td data-label="Outcome" data-field="outcome">
        {a?.error ? `${a.error.code}: ${a.error.message}` : a && a.result !== null ? <pre>{JSON.stringify(a.result)}</pre> : ''}
      </td>
      <td data-label="More">
        <a href={a ? `/console/actions/${a.id}` : '#'} data-field="details">
          Details
        </a>
        {cancellable ? (
          <form method="post" action={`/console/actions/${a.id}/cancel`} class="inline">
            <Csrf viewer={props.viewer} />{' '}
            <button type="submit" class="danger" data-cancel={a.id}>
              Cancel
            </button>
          </form>
        ) : null}
      </td>
    </tr>
  );
}

/** A filter that is "any" when empty, or one of the given values. */
function FilterSelect(props: { id: string; name: string; label: string; selected: string; options: { value: string; text: string }[] }) {
  return (
    <div>
      <label for={props.id}>{props.label}</label>
      <select id={props.id} name={props.name}>
        <option value="">any</option>
        {props.options.map((o) => (
          <option value={o.value} selected={o.value === props.selected}>
            {o.text}
          </option>
        ))}
      </select>
    </div>
  );
}

function FilterForm(props: { filters: Filters; devices: { id: string; name: string }[]; agents: Connection[] }) {
  const f = props.filters;
  return (
    <form method="get" action="/console/activity" class="fields" id="filters">
      <input type="hidden" name="tz" value={f.tz} data-owner-zone />
      <FilterSelect id="status" name="status" label="Status" selected={f.status} options={ACTION_STATUSES.map((s) => ({ value: s, text: s }))} />
      <FilterSelect
        id="deviceId"
        name="deviceId"
        label="Device"
        selected={f.deviceId}
        options={props.devices.map((d) => ({ value: d.id, text: humanText(d.name, MAX_FIELD_CHARS) }))}
      />
      <FilterSelect
        id="filter-principal"
        name="principal"
        label="Agent"
        selected={f.principal}
        options={props.agents.map((a) => ({ value: a.principal, text: `${humanText(a.name, MAX_FIELD_CHARS)} (${a.principal})` }))}
      />
      <div>
        <label for="capability">Function</label>
        <input type="text" id="capability" name="capability" value={f.capability} maxlength={64} />
      </div>
      <div>
        <label for="from">From (included)</label>
        <input type="datetime-local" id="from" name="from" value={f.from} />
      </div>
      <div>
        <label for="to">Until (not included)</label>
        <input type="datetime-local" id="to" name="to" value={f.to} />
      </div>
      <p class="muted" data-zone-label>
        Times are in {f.tz ? zoneOf(f.tz) : 'UTC (without script the console cannot know your time zone)'}.
      </p>
      <div>
        <button type="submit" id="filter">
          Filter
        </button>
      </div>
    </form>
  );
}

/** The page of actions; on the first page the script adds new ones that its filters (the `data-filter-*`) keep. */
function ActionsTable(props: {
  page: Action[];
  names: Map<string, string>;
  agents: Map<string, string>;
  viewer: Viewer;
  filters: Filters;
  live: boolean;
  until: string | undefined;
}) {
  const { filters, until } = props;
  return (
    <div class="table-wrap">
      <table
        class="stack"
        id="actions"
        data-live-rows={props.live ? 'true' : undefined}
        data-filter-status={filters.status || undefined}
        data-filter-deviceid={filters.deviceId || undefined}
        data-filter-principal={filters.principal || undefined}
        data-filter-capability={filters.capability || undefined}
        data-filter-until={until}
      >
        <thead>
          <tr>
            {['Created', 'Status', 'Why', 'Device', 'Function', 'Arguments', 'Agent', 'Outcome', 'More'].map((h) => (
              <th scope="col">{h}</th>
            ))}
          </tr>
        </thead>
        <tbody>
          {props.page.map((a) => (
            <ActionRow action={a} names={props.names} agents={props.agents} viewer={props.viewer} />
          ))}
        </tbody>
      </table>
    </div>
  );
}

/** The history export: days in the owner's zone, sent along as `tz`. */
function ExportForm(props: { tz: string; zone: string }) {
  return (
    <>
      <h2>Export</h2>
      <form method="get" action="/console/activity/export" class="fields" id="export-form">
        <input type="hidden" name="tz" value={props.tz} data-owner-zone />
        <p class="muted">Every action created in the range (both days included, both optional), oldest first, as a JSON document; days are in {props.zone}.</p>
        <div>
          <label for="since">From day</label>
          <input type="date" id="since" name="since" />
        </div>
        <div>
          <label for="until">To day</label>
          <input type="date" id="until" name="until" />
        </div>
        <div>
          <button type="submit" id="export">
            Download the history
          </button>
        </div>
      </form>
    </>
  );
}

async function ActivityPage(guards: Guards, signed: Signed, filters: Filters, cursor: string | undefined) {
  const [devices, agents, clients] = await Promise.all([
    allDevices(guards, signed),
    guards.invoke(signed, operations.listAgentConnections, {}),
    guards.invoke(signed, operations.listOAuthClients, {}),
  ]);
  const input = listInput(filters);
  let page: Action[] = [];
  let next: string | null = null;
  let refused: { message: string; issues: ErrorIssue[] } | undefined;
  try {
    const answer = await guards.call(signed, operations.listRecentActions, { ...input, limit: PAGE, ...(cursor ? { cursor } : {}) });
    if (answer.kind !== 'page') throw new Error('actions.list answers pages');
    page = answer.data;
    next = answer.nextCursor;
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    refused = { message: error.message, issues: error.details.issues ?? [] };
  }
  const names = new Map(devices.map((d) => [d.id, humanText(d.name, MAX_FIELD_CHARS)]));
  // Agent connections and OAuth clients by principal, named as the Approvals screen names them.
  const agentNames = new Map([...agents, ...clients].map((c) => [c.principal, humanText(c.name, MAX_FIELD_CHARS)]));
  const query = new URLSearchParams(Object.entries(filters).filter(([, v]) => v !== ''));
  const older = next ? `/console/activity?${query.toString()}${query.size ? '&' : ''}cursor=${encodeURIComponent(next)}` : undefined;
  const zone = zoneOf(filters.tz);
  const until = 'until' in input && typeof input.until === 'number' ? String(input.until) : undefined;
  return (
    <Page title="Activity" viewer={signed.viewer} screen="activity" live>
      <Flash error={refused?.message} issues={refused?.issues} />
      <FilterForm filters={filters} devices={devices} agents={[...agents, ...clients]} />
      <p class="muted" id="activity-summary">
        {cursor ? 'Older actions' : 'The most recent actions'} that match, {PAGE} a page, newest first.
        {cursor ? '' : ' New ones appear at the top as agents ask for them '}
        {cursor ? (
          ''
        ) : (
          <>
            (<span id="live-count">0</span> so far).
          </>
        )}{' '}
        <span id="live-status" role="status"></span>
      </p>
      <ActionsTable page={page} names={names} agents={agentNames} viewer={signed.viewer} filters={filters} live={!cursor} until={until} />
      {/* The script hides it once a live row arrives: rows are only ever added, never taken away. */}
      {refused ? null : (
        <p id="no-actions" hidden={page.length > 0}>
          No action matches.
        </p>
      )}
      {older ? (
        <p>
          <a href={older} id="older">
            Older actions
          </a>
        </p>
      ) : null}
      <template id="action-row">
        <ActionRow viewer={signed.viewer} />
      </template>
      <ul hidden id="device-names">
        {[...names].map(([id, name]) => (
          <li data-device-id={id}>{name}</li>
        ))}
      </ul>
      <ul hidden id="agent-names">
        {[...agentNames].map(([principal, name]) => (
          <li data-principal={principal}>{name}</li>
        ))}
      </ul>
      <ExportForm tz={filters.tz} zone={zone} />
    </Page>
  );
}

export function mountActivity(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/activity',
    guards.page(async (c, signed) =>
      c.html(
        await ActivityPage(
          guards,
          signed,
          filtersOf((name) => c.req.query(name)),
          c.req.query('cursor'),
        ),
      ),
    ),
  );

  app.get(
    '/console/activity/export',
    guards.page(async (c, signed) => {
      const zone = zoneOf(c.req.query('tz'));
      const since = zonedMs(c.req.query('since'), zone);
      const untilDay = c.req.query('until');
      // The day after the last one, at midnight in the owner's zone: the range ends there.
      const until =
        untilDay && /^\d{4}-\d{2}-\d{2}$/.test(untilDay)
          ? zonedMs(new Date(Date.parse(`${untilDay}T00:00:00Z`) + 86_400_000).toISOString().slice(0, 10), zone)
          : undefined;
      const answer = await guards.call(signed, operations.exportHistory, {
        ...(since !== undefined ? { since } : {}),
        ...(until !== undefined ? { until } : {}),
      });
      if (answer.kind !== 'stream') throw new Error('actions.export answers a stream');
      return c.body(documentStream(answer, 'json', signed.ctx.log, signed.ctx.requestId), 200, {
        'Content-Type': 'application/json',
        'Content-Disposition': `attachment; filename="actions-${zone.replace(/[^A-Za-z0-9_-]+/g, '_')}.json"`,
      });
    }),
  );
}

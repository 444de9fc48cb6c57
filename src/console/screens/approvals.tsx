import type { Hono } from 'hono';
import type { z } from 'zod';
import type { action as actionSchema } from '../../domain/action-records.js';
import { INBOX_PAGE } from '../../domain/approvals.js';
import { humanText, MAX_FIELD_CHARS } from '../../domain/human-text.js';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { ArgumentList } from '../arguments.js';
import { Csrf, Flash, Page, Time, type Viewer } from '../layout.js';
import { NotifyButton } from '../pending.js';
import { allDevices } from './devices.js';

/**
 * The approvals inbox (docs/owners/console.md "Owner console", docs/owners/approvals.md): the actions awaiting the
 * owner's yes a page at a time (`approvals.list`, oldest first, links to the neighbouring
 * pages), each with its agent, device, function, arguments and the end of its approval window;
 * approve, or reject with a reason (`actions.approve`, `actions.reject`), or reject the ones
 * ticked, or the whole page, with one reason (`actions.rejectMany`). What an agent or a device
 * wrote is shown marked and capped (src/domain/human-text.ts). The page is live: the script
 * adds a row when an approval is requested (while the last page has room) and removes it once
 * the action leaves `awaiting_approval`, building rows from the `<template>` below with text only.
 */

type Action = z.infer<typeof actionSchema>;

const DONE = {
  approved: 'Approved: the action is queued for its device, and its deadline starts now.',
  rejected: 'Rejected: the action ends rejected, with your reason kept in it.',
} as const;

/** The form that rejects several actions; each row's checkbox and page entry belong to it. */
const BULK_FORM = 'bulk-reject';
/**
 * Each row's fields in that form are named after its action (`selected-<id>`, `on-page-<id>`):
 * form posts never repeat a parameter (src/http/form.ts).
 */
const SELECTED = 'selected-';
const ON_PAGE = 'on-page-';

/** Where the reader is: the cursor that named this page. */
interface Position {
  after?: string;
  before?: string;
}

interface Inbox {
  pending: Action[];
  names: Names;
  total: number;
  previous: string | null;
  next: string | null;
  position: Position;
}

const pageLink = (position: Position) => {
  const query = new URLSearchParams(position as Record<string, string>).toString();
  return query ? `/console/approvals?${query}` : '/console/approvals';
};

const plural = (n: number, one: string, many: string) => `${n.toLocaleString('en')} ${n === 1 ? one : many}`;

interface Names {
  devices: Map<string, string>;
  agents: Map<string, string>;
}

/**
 * One pending approval. Rendered empty inside the `<template>` for the script, which fills the
 * `data-field` elements with `textContent` and the hidden `actionId` inputs.
 */
function ApprovalRow(props: { action?: Action; names?: Names; viewer: Viewer }) {
  const a = props.action;
  const agentName = a ? props.names?.agents.get(a.principal) : undefined;
  return (
    <tr data-action-id={a?.id ?? ''}>
      <td data-label="Select">
        <label>
          <input type="checkbox" name={`${SELECTED}${a?.id ?? ''}`} data-bulk={SELECTED} form={BULK_FORM} value="1" />{' '}
          <span class="visually-hidden">Select</span>
        </label>
        <input type="hidden" name={`${ON_PAGE}${a?.id ?? ''}`} data-bulk={ON_PAGE} form={BULK_FORM} value="1" />
      </td>
      <td data-label="Agent">
        <span data-field="agent-name">{agentName ?? ''}</span> <code data-field="principal">{a ? humanText(a.principal, MAX_FIELD_CHARS) : ''}</code>
      </td>
      <td data-label="Device" data-field="device">
        {a ? (props.names?.devices.get(a.deviceId) ?? a.deviceId) : ''}
      </td>
      <td data-label="Function">
        <code data-field="capability">{a?.capability ?? ''}</code>
      </td>
      <td data-label="Arguments">
        <div data-field="argument-list">{a ? <ArgumentList args={a.arguments} /> : null}</div>
        <details>
          <summary class="muted">as JSON</summary>
          <pre data-field="arguments">{a ? humanText(JSON.stringify(a.arguments, null, 1), MAX_FIELD_CHARS) : ''}</pre>
        </details>
      </td>
      <td data-label="Decide by" data-field="window">
        {a ? <Time ms={a.approval?.expiresAt ?? a.expiresAt} /> : ''}
      </td>
      <td data-label="Decision">
        <form method="post" action="/console/approvals/approve" class="decision">
          <Csrf viewer={props.viewer} />
          <input type="hidden" name="actionId" value={a?.id ?? ''} />
          <button type="submit" class="primary" data-decision="approve">
            Approve
          </button>
        </form>
        <form method="post" action="/console/approvals/reject" class="decision">
          <Csrf viewer={props.viewer} />
          <input type="hidden" name="actionId" value={a?.id ?? ''} />
          <label>
            Reason (optional) <input type="text" name="reason" maxlength={500} />
          </label>
          <button type="submit" class="danger" data-decision="reject">
            Reject
          </button>
        </form>
      </td>
    </tr>
  );
}

function Pager(props: { inbox: Inbox }) {
  const { previous, next } = props.inbox;
  if (!previous && !next) return null;
  return (
    <nav class="pager" aria-label="Inbox pages">
      {previous ? (
        <a href={pageLink({ before: previous })} rel="prev" data-page="previous">
          ← Previous page
        </a>
      ) : null}{' '}
      {next ? (
        <a href={pageLink({ after: next })} rel="next" data-page="next">
          Next page →
        </a>
      ) : null}
    </nav>
  );
}

function ApprovalsPage(props: { viewer: Viewer; inbox: Inbox; done?: string | undefined; error?: string | undefined }) {
  const { pending, names, total, position, next } = props.inbox;
  // Live rows join only the last page, and only while it has room: the pages stay pages.
  const room = next ? 0 : INBOX_PAGE - pending.length;
  return (
    <Page title="Approvals" viewer={props.viewer} screen="approvals" live>
      <Flash error={props.error} done={props.done} />
      <p class="muted">
        Actions that wait for your yes before their device is asked. An approved action is queued for its device; a rejected one ends there. Without a decision
        by the time shown, the action expires. <span id="live-status" role="status"></span>
      </p>
      <NotifyButton />
      <p class="muted">
        Away from the console? <a href="/console/webhooks">Send approval requests to your phone or chat</a>.
      </p>
      <p id="no-approvals" hidden={pending.length > 0}>
        Nothing waits for your decision.
      </p>
      <p id="inbox-count" hidden={total === 0}>
        {plural(total, 'action waits', 'actions wait')} for your decision
        {total > pending.length ? `; this page shows ${plural(pending.length, 'of them', 'of them')}, ${INBOX_PAGE} a page, oldest first` : ''}.
      </p>
      <Pager inbox={props.inbox} />
      <div class="table-wrap">
        <table class="stack" id="approvals">
          <thead>
            <tr>
              <th scope="col">Select</th>
              <th scope="col">Agent</th>
              <th scope="col">Device</th>
              <th scope="col">Function</th>
              <th scope="col">Arguments</th>
              <th scope="col">Decide by</th>
              <th scope="col">Decision</th>
            </tr>
          </thead>
          <tbody id="approval-rows" data-room={String(room)}>
            {pending.map((a) => (
              <ApprovalRow action={a} names={names} viewer={props.viewer} />
            ))}
          </tbody>
        </table>
      </div>
      <Pager inbox={props.inbox} />
      <form method="post" action="/console/approvals/reject-many" id={BULK_FORM} class="bulk" hidden={pending.length === 0 && room === 0}>
        <Csrf viewer={props.viewer} />
        {position.after ? <input type="hidden" name="after" value={position.after} /> : null}
        {position.before ? <input type="hidden" name="before" value={position.before} /> : null}
        <fieldset>
          <legend>Reject several</legend>
          <label>
            Reason (optional, kept in each) <input type="text" name="reason" maxlength={500} />
          </label>
          <button type="submit" class="danger" name="scope" value="selected" id="reject-selected">
            Reject selected
          </button>{' '}
          <button type="submit" class="danger" name="scope" value="page" id="reject-page">
            Reject all on this page
          </button>
        </fieldset>
      </form>
      <template id="approval-row">
        <ApprovalRow viewer={props.viewer} />
      </template>
      {/* Names the script shows for devices and agents of rows it adds (as text, marked as on the page). */}
      <ul hidden id="names">
        {[...names.devices].map(([id, name]) => (
          <li data-device-id={id}>{name}</li>
        ))}
        {[...names.agents].map(([principal, name]) => (
          <li data-principal={principal}>{name}</li>
        ))}
      </ul>
    </Page>
  );
}

async function inbox(guards: Guards, signed: Signed, position: Position): Promise<Inbox> {
  const [page, devices, agents, clients] = await Promise.all([
    guards.invoke(signed, operations.listApprovals, { limit: INBOX_PAGE, ...position }),
    allDevices(guards, signed),
    guards.invoke(signed, operations.listAgentConnections, {}),
    guards.invoke(signed, operations.listOAuthClients, {}),
  ]);
  const shown = (name: string) => humanText(name, MAX_FIELD_CHARS);
  return {
    pending: page.actions,
    total: page.total,
    previous: page.previous,
    next: page.next,
    position,
    names: {
      devices: new Map(devices.map((d) => [d.id, shown(d.name)])),
      agents: new Map([...agents, ...clients].map((c) => [c.principal, shown(c.name)])),
    },
  };
}

/** The page a request names: a cursor from a pager link or a form's hidden field, nothing else. */
function positionOf(get: (name: string) => string | null | undefined): Position {
  const after = get('after');
  const before = get('before');
  return before ? { before } : after ? { after } : {};
}

export function mountApprovals(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/approvals',
    guards.page(async (c, signed) => {
      const rejected = Number(c.req.query('rejected'));
      const skipped = Number(c.req.query('skipped'));
      const done =
        c.req.query('done') === 'bulk' && Number.isInteger(rejected) && Number.isInteger(skipped)
          ? `Rejected ${plural(rejected, 'action', 'actions')}.${skipped > 0 ? ` ${plural(skipped, 'was', 'were')} no longer waiting (approved, rejected or expired meanwhile) and ${skipped === 1 ? 'was' : 'were'} left as ${skipped === 1 ? 'it was' : 'they were'}.` : ''}`
          : DONE[c.req.query('done') as keyof typeof DONE];
      return c.html(
        <ApprovalsPage
          viewer={signed.viewer}
          inbox={await inbox(
            guards,
            signed,
            positionOf((name) => c.req.query(name)),
          )}
          done={done}
        />,
      );
    }),
  );

  for (const move of ['approve', 'reject'] as const) {
    app.post(
      `/console/approvals/${move}`,
      guards.action(async (c, signed, form) => {
        const reason = (form.get('reason') ?? '').trim();
        const outcome = await guards.attempt(signed, move === 'approve' ? operations.approveAction : operations.rejectAction, {
          actionId: form.get('actionId') ?? '',
          ...(reason ? { reason } : {}),
        });
        if (outcome.ok) return c.redirect(`/console/approvals?done=${move === 'approve' ? 'approved' : 'rejected'}`, 303);
        // Already decided, expired, or refused at approval time (the grant no longer holds):
        // the inbox as it is now, with why.
        return c.html(<ApprovalsPage viewer={signed.viewer} inbox={await inbox(guards, signed, {})} error={outcome.message} />, outcome.status);
      }),
    );
  }

  app.post(
    '/console/approvals/reject-many',
    guards.action(async (c, signed, form) => {
      const position = positionOf((name) => form.get(name));
      const prefix = form.get('scope') === 'page' ? ON_PAGE : SELECTED;
      const actionIds = [...form.keys()].filter((name) => name.startsWith(prefix)).map((name) => name.slice(prefix.length));
      const reason = (form.get('reason') ?? '').trim();
      if (actionIds.length === 0) {
        return c.html(<ApprovalsPage viewer={signed.viewer} inbox={await inbox(guards, signed, position)} error="Tick the actions to reject first." />, 400);
      }
      const outcome = await guards.attempt(signed, operations.rejectActions, {
        actionIds,
        ...(reason ? { reason } : {}),
      });
      if (!outcome.ok)
        return c.html(<ApprovalsPage viewer={signed.viewer} inbox={await inbox(guards, signed, position)} error={outcome.message} />, outcome.status);
      // The same page again: its cursor now names the actions that came after the rejected ones.
      const query = new URLSearchParams({ done: 'bulk', rejected: String(outcome.value.rejected), skipped: String(outcome.value.skipped.length), ...position });
      return c.redirect(`/console/approvals?${query.toString()}`, 303);
    }),
  );
}

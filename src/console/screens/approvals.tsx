import type { Hono } from 'hono';
import type { z } from 'zod';
import type { action as actionSchema } from '../../domain/action-records.js';
import { operations } from '../../domain/registry.js';
import type { connection } from '../../domain/schemas.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Time, type Viewer } from '../layout.js';
import { allDevices } from './devices.js';

/**
 * The approvals inbox (README "Owner console", docs/rules.md "Approvals"): the actions awaiting
 * the owner's yes (`actions.list` with `status=awaiting_approval`), each with its agent,
 * device, function, arguments and the end of its approval window; approve, or reject with a
 * reason (`actions.approve`, `actions.reject`). The page is live: the script adds a row when
 * an approval is requested and removes it once the action leaves `awaiting_approval`, building
 * rows from the `<template>` below with text only.
 */

type Action = z.infer<typeof actionSchema>;
type Connection = z.infer<typeof connection>;

const DONE = {
  approved: 'Approved: the action is queued for its device, and its deadline starts now.',
  rejected: 'Rejected: the action ends rejected, with your reason kept in it.',
} as const;

/** Pending approvals read per page; the inbox follows the cursor to the end. */
const PAGE = 100;

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
      <td data-label="Agent">
        <span data-field="agent-name">{agentName ?? ''}</span> <code data-field="principal">{a?.principal ?? ''}</code>
      </td>
      <td data-label="Device" data-field="device">
        {a ? (props.names?.devices.get(a.deviceId) ?? a.deviceId) : ''}
      </td>
      <td data-label="Function">
        <code data-field="capability">{a?.capability ?? ''}</code>
      </td>
      <td data-label="Arguments">
        <pre data-field="arguments">{a ? JSON.stringify(a.arguments, null, 1) : ''}</pre>
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

function ApprovalsPage(props: { viewer: Viewer; pending: Action[]; names: Names; done?: string | undefined; error?: string | undefined }) {
  return (
    <Page title="Approvals" viewer={props.viewer} screen="approvals" live>
      <Flash error={props.error} done={props.done} />
      <p class="muted">
        Actions that wait for your yes before their device is asked. An approved action is queued for its device; a rejected one ends there. Without a decision
        by the time shown, the action expires. <span id="live-status" role="status"></span>
      </p>
      <p id="no-approvals" hidden={props.pending.length > 0}>
        Nothing waits for your decision.
      </p>
      <div class="table-wrap">
        <table class="stack" id="approvals">
          <thead>
            <tr>
              <th scope="col">Agent</th>
              <th scope="col">Device</th>
              <th scope="col">Function</th>
              <th scope="col">Arguments</th>
              <th scope="col">Decide by</th>
              <th scope="col">Decision</th>
            </tr>
          </thead>
          <tbody id="approval-rows">
            {props.pending.map((a) => (
              <ApprovalRow action={a} names={props.names} viewer={props.viewer} />
            ))}
          </tbody>
        </table>
      </div>
      <template id="approval-row">
        <ApprovalRow viewer={props.viewer} />
      </template>
      {/* Names the script shows for devices and agents of rows it adds (as text). */}
      <ul hidden id="names">
        {[...props.names.devices].map(([id, name]) => (
          <li data-device-id={id}>{name}</li>
        ))}
        {[...props.names.agents].map(([principal, name]) => (
          <li data-principal={principal}>{name}</li>
        ))}
      </ul>
    </Page>
  );
}

async function inbox(guards: Guards, signed: Signed): Promise<{ pending: Action[]; names: Names }> {
  const pending: Action[] = [];
  let cursor: string | undefined;
  do {
    const answer = await guards.call(signed, operations.listActions, { status: 'awaiting_approval', limit: PAGE, ...(cursor ? { cursor } : {}) });
    if (answer.kind !== 'page') throw new Error('actions.list answers pages');
    pending.push(...(answer.data as Action[]));
    cursor = answer.nextCursor ?? undefined;
  } while (cursor);
  const [devices, agents, clients] = await Promise.all([
    allDevices(guards, signed),
    guards.invoke(signed, operations.listAgentConnections, {}) as Promise<Connection[]>,
    guards.invoke(signed, operations.listOAuthClients, {}) as Promise<Connection[]>,
  ]);
  return {
    // Oldest first: the one whose window ends soonest is on top.
    pending: pending.reverse(),
    names: {
      devices: new Map(devices.map((d) => [d.id, d.name])),
      agents: new Map([...agents, ...clients].map((c) => [c.principal, c.name])),
    },
  };
}

export function mountApprovals(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/approvals',
    guards.page(async (c, signed) =>
      c.html(<ApprovalsPage viewer={signed.viewer} {...await inbox(guards, signed)} done={DONE[c.req.query('done') as keyof typeof DONE]} />),
    ),
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
        return c.html(<ApprovalsPage viewer={signed.viewer} {...await inbox(guards, signed)} error={outcome.message} />, outcome.status);
      }),
    );
  }
}

import type { Hono } from 'hono';
import { CANCEL_REASONS, EXPIRED_REASONS } from '../../domain/action-states.js';
import type { ActionRecord } from '../../domain/action-records.js';
import { humanText, MAX_FIELD_CHARS } from '../../domain/human-text.js';
import { operations } from '../../domain/registry.js';
import { TEST_ACTION_ID } from '../../domain/webhook-test.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Time, type Viewer } from '../layout.js';
import { allDevices } from './devices.js';

/**
 * One action (`actions.get`), where the links of notifications and chat messages open the
 * console: what was asked, by whom, on which device, its status and why it ended as it did, and
 * what the owner can still do: approve or reject it while it waits (`?decide=` puts that button
 * first in the keyboard's path; nothing is decided by opening a link), cancel it while it is
 * queued (`actions.cancel`).
 */

/** Why an action ended as it did, in words: a rejection's reason, a cancellation's or an expiry's. */
export function reasonOf(action: ActionRecord): string {
  if (action.approval?.decision === 'rejected') {
    return `Rejected by ${action.approval.decidedBy ?? 'the owner'}${action.approval.reason ? `: ${action.approval.reason}` : ' (no reason given)'}`;
  }
  if (action.cancelReason) return `${action.status === 'cancelled' ? 'Cancelled' : 'Asked to stop'}: ${CANCEL_REASONS[action.cancelReason]}`;
  if (action.expiredReason) return `Expired: ${EXPIRED_REASONS[action.expiredReason]}`;
  return '';
}

const DONE = {
  cancelled: 'Cancelled: the device will not be asked to run it.',
} as const;

function Decision(props: { action: ActionRecord; viewer: Viewer; decide: string | undefined }) {
  const { action, viewer } = props;
  if (action.status === 'awaiting_approval') {
    const approve = (
      <form method="post" action="/console/approvals/approve" class="decision">
        <Csrf viewer={viewer} />
        <input type="hidden" name="actionId" value={action.id} />
        <button type="submit" class="primary" id="approve" autofocus={props.decide === 'approve'}>
          Approve
        </button>
      </form>
    );
    const reject = (
      <form method="post" action="/console/approvals/reject" class="decision">
        <Csrf viewer={viewer} />
        <input type="hidden" name="actionId" value={action.id} />
        <label for="reject-reason">Reason (optional)</label>
        <input type="text" id="reject-reason" name="reason" maxlength={500} autofocus={props.decide === 'reject'} />
        <button type="submit" class="danger" id="reject">
          Reject
        </button>
      </form>
    );
    return (
      <section aria-labelledby="decide-heading">
        <h2 id="decide-heading">Your decision</h2>
        <p>
          It waits for your decision until <Time ms={action.approval?.expiresAt ?? action.expiresAt} />.
        </p>
        {props.decide === 'reject' ? [reject, approve] : [approve, reject]}
      </section>
    );
  }
  if (action.status === 'queued' || action.status === 'scheduled') {
    return (
      <form method="post" action={`/console/actions/${action.id}/cancel`} class="decision">
        <Csrf viewer={viewer} />
        {action.status === 'scheduled' ? (
          <p>
            It is scheduled for <Time ms={action.notBefore ?? action.createdAt} />: it is checked again then, and its device is asked only then.
          </p>
        ) : (
          <p>It is queued: its device has not fetched it yet.</p>
        )}
        <button type="submit" class="danger" id="cancel-action">
          Cancel this action
        </button>
      </form>
    );
  }
  return props.decide ? <p id="decided">There is nothing left to decide: the action is {action.status}.</p> : null;
}

/**
 * What happened to the action and when, from its own timestamps: requested, decided (when it
 * needed a yes), received by the device, asked to stop, finished. Only the steps that happened.
 */
function Timeline(props: { action: ActionRecord }) {
  const a = props.action;
  const approval = a.approval;
  const steps: { step: string; label: string; ms: number | null }[] = [
    { step: 'requested', label: 'Requested by the agent', ms: a.createdAt },
    ...(approval?.decidedAt != null
      ? [
          {
            step: approval.decision ?? 'decided',
            label: `${approval.decision === 'rejected' ? 'Rejected' : 'Approved'} by ${approval.decidedBy ?? 'the owner'}`,
            ms: approval.decidedAt,
          },
        ]
      : []),
    { step: 'received', label: 'Received by the device', ms: a.dispatchedAt },
    { step: 'stop-requested', label: 'Device asked to stop', ms: a.cancelRequestedAt },
    { step: 'finished', label: `Finished: ${a.status}`, ms: a.completedAt },
    { step: 'reported-late', label: 'Result reported after the deadline', ms: a.reportedLateAt },
  ];
  return (
    <ol class="timeline" id="timeline">
      {steps
        .filter((s) => s.ms !== null)
        .map((s) => (
          <li data-step={s.step}>
            {humanText(s.label, MAX_FIELD_CHARS)}: <Time ms={s.ms} />
          </li>
        ))}
    </ol>
  );
}

async function ActionPage(guards: Guards, signed: Signed, actionId: string, decide: string | undefined, done?: string, error?: string) {
  const action = await guards.invoke(signed, operations.getActionState, { actionId });
  const device = (await allDevices(guards, signed)).find((d) => d.id === action.deviceId);
  const reason = reasonOf(action);
  return (
    <Page title="Action" viewer={signed.viewer}>
      <Flash done={done} error={error} />
      <dl class="action-details" id="action" data-action-id={action.id}>
        <dt>Status</dt>
        <dd id="action-status">
          <strong>{action.status}</strong>
        </dd>
        {reason ? (
          <>
            <dt>Why</dt>
            <dd id="action-reason">{reason}</dd>
          </>
        ) : null}
        <dt>Agent</dt>
        <dd>
          <code>{humanText(action.principal, MAX_FIELD_CHARS)}</code>
        </dd>
        <dt>Device</dt>
        <dd>{device ? humanText(device.name, MAX_FIELD_CHARS) : action.deviceId}</dd>
        <dt>Function</dt>
        <dd>
          <code>{action.capability}</code>
        </dd>
        <dt>Arguments</dt>
        <dd>
          <pre>{humanText(JSON.stringify(action.arguments, null, 1), MAX_FIELD_CHARS)}</pre>
        </dd>
        <dt>Timeline</dt>
        <dd>
          <Timeline action={action} />
        </dd>
      </dl>
      <Decision action={action} viewer={signed.viewer} decide={decide} />
      <p>
        <a href="/console/activity">All activity</a> · <a href="/console/approvals">Approvals inbox</a>
      </p>
    </Page>
  );
}

export function mountActionPage(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/actions/:actionId',
    guards.page(async (c, signed) => {
      const actionId = c.req.param('actionId') ?? '';
      if (actionId === TEST_ACTION_ID) {
        return c.html(
          <Page title="Test message" viewer={signed.viewer}>
            <p id="test-message">This link came from a test message: there is no action to decide. Real messages open the action that waits.</p>
          </Page>,
        );
      }
      const decide = c.req.query('decide');
      return c.html(await ActionPage(guards, signed, actionId, decide, DONE[c.req.query('done') as keyof typeof DONE]));
    }),
  );

  app.post(
    '/console/actions/:actionId/cancel',
    guards.action(async (c, signed) => {
      const actionId = c.req.param('actionId') ?? '';
      const outcome = await guards.attempt(signed, operations.cancelAction, { actionId });
      if (outcome.ok) return c.redirect(`/console/actions/${encodeURIComponent(actionId)}?done=cancelled`, 303);
      return c.html(await ActionPage(guards, signed, actionId, undefined, undefined, outcome.message), outcome.status);
    }),
  );
}

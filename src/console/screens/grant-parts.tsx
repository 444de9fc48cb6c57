import type { z } from 'zod';
import type { grant as grantSchema } from '../../domain/grants.js';
import { operations } from '../../domain/registry.js';
import type { connection } from '../../domain/schemas.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Icon, Term, Time, type Viewer } from '../layout.js';

/** What the grant screens share: the grant's state in words, the in-place edit, and reading every grant. */

export type Grant = z.infer<typeof grantSchema>;
export type Connection = z.infer<typeof connection>;

export const APPROVAL_TEXT = {
  none: 'none: a call queues the action',
  owner: 'owner: waits for your approval',
  user: "user: the agent's own MCP client asks its user (as owner over REST)",
} as const;

const APPROVAL_SHORT = { none: 'none', owner: 'owner', user: 'user (agent client)' } as const;

/** Lifetimes offered when changing a grant; "" keeps the expiry it has. */
const EDIT_TTL = [
  { value: '', label: 'Keep expiry' },
  { value: '3600', label: '1 hour from now' },
  { value: '86400', label: '1 day from now' },
  { value: '604800', label: '7 days from now' },
  { value: '2592000', label: '30 days from now' },
  { value: 'none', label: 'No expiry' },
];

export function staleReason(stale: NonNullable<Grant['stale']>): string {
  if (stale.reason === 'function_removed') return 'the device no longer publishes this function';
  if (stale.reason === 'kind_changed') return `the device changed this function from ${stale.grantedKind ?? 'unknown'} to ${stale.currentKind ?? 'unknown'}`;
  return "the device changed this function's arguments since it was granted";
}

/** The access level a grant allows, in words, with the API's term in the tooltip. */
export function AccessLevel(props: { kind: 'read' | 'control' | null }) {
  if (props.kind === 'control')
    return (
      <span class="badge control">
        <Term api="functionKind: control">control</Term>
      </span>
    );
  return (
    <span class="badge">
      <Term api="functionKind: read">read</Term>
    </span>
  );
}

export function GrantState(props: { grant: Grant }) {
  const { grant } = props;
  return (
    <span data-grant-id={grant.id}>
      granted, approval <strong>{grant.approval}</strong>, expires <Time ms={grant.expiresAt} never="never" />
      {grant.gatewayId ? ' (by a gateway grant)' : ''}
      {grant.expired ? <strong class="badge expired"> expired</strong> : null}
      {grant.stale ? <strong class="badge stale"> stale: {staleReason(grant.stale)}</strong> : null}
    </span>
  );
}

/** Where the edit and revoke forms send the owner back to: a console grants page only. */
export function backTo(raw: string | null | undefined): string {
  return raw && /^\/console\/grants(\?[^\s]*)?$/.test(raw) ? raw : '/console/grants';
}

/**
 * A grant's approval mode and expiry, changed in place (`grants.update`). The controls belong to
 * a form of their own (`form=`), so they can sit inside another form's table. A stale grant has
 * nothing to change: it is granted again instead (docs/owners/grants.md "Stale grants: a grant means what the owner saw").
 */
export function EditGrant(props: { grant: Grant; label: string; back: string; viewer: Viewer }) {
  const { grant } = props;
  if (grant.stale) return <span class="muted">grant it again to accept the changed function</span>;
  const form = `edit-${grant.id}`;
  return (
    <span class="edit">
      <label>
        <span class="visually-hidden">Approval for {props.label}</span>
        <select name="newApproval" form={form} aria-label={`Approval for ${props.label}`}>
          {Object.entries(APPROVAL_SHORT).map(([value, text]) => (
            <option value={value} selected={value === grant.approval}>
              {`approval ${text}`}
            </option>
          ))}
        </select>
      </label>{' '}
      <label>
        <span class="visually-hidden">Expiry for {props.label}</span>
        <select name="newExpiry" form={form} aria-label={`Expiry for ${props.label}`}>
          {EDIT_TTL.map((choice) => (
            <option value={choice.value}>{choice.label}</option>
          ))}
        </select>
      </label>{' '}
      <button type="submit" form={form} class="small" data-save={grant.id} aria-label={`Save changes to ${props.label}`}>
        <Icon name="check" />
        Save
      </button>
    </span>
  );
}

/** The form the edit controls of one grant post through; placed outside any other form. */
export function EditGrantForm(props: { grant: Grant; back: string; viewer: Viewer }) {
  return (
    <form method="post" action="/console/grants/update" id={`edit-${props.grant.id}`} hidden>
      <Csrf viewer={props.viewer} />
      <input type="hidden" name="grantId" value={props.grant.id} />
      <input type="hidden" name="back" value={props.back} />
    </form>
  );
}

/** The update's input from the edit form: `newExpiry` "" keeps the expiry, "none" removes it. */
export function updateInput(form: URLSearchParams): Record<string, unknown> {
  const expiry = form.get('newExpiry') ?? '';
  return {
    grantId: form.get('grantId') ?? '',
    ...(form.get('newApproval') ? { approval: form.get('newApproval') } : {}),
    ...(expiry === '' ? {} : { ttlSeconds: expiry === 'none' ? null : Number(expiry) }),
  };
}

/** Every unrevoked grant of the workspace, page after page. */
export async function allGrants(guards: Guards, signed: Signed, principal?: string): Promise<Grant[]> {
  const grants: Grant[] = [];
  let cursor: string | undefined;
  do {
    const answer = await guards.call(signed, operations.listWorkspaceGrants, { ...(principal ? { principal } : {}), ...(cursor ? { cursor } : {}) }, 1000);
    if (answer.kind !== 'page') throw new Error('grants.list answers pages');
    grants.push(...answer.data);
    cursor = answer.nextCursor ?? undefined;
  } while (cursor);
  return grants;
}

/** The workspace's live agents: agent connections and OAuth clients, each one principal. */
export async function knownAgents(guards: Guards, signed: Signed): Promise<Connection[]> {
  const rows = [
    ...(await guards.invoke(signed, operations.listAgentConnections, {})),
    ...(await guards.invoke(signed, operations.listOAuthClients, {})),
  ].filter((row) => !row.revoked);
  // An OAuth client is in both lists: once per principal, so no choice is offered twice.
  return [...new Map(rows.map((row) => [row.principal, row])).values()];
}

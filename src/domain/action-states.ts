/**
 * The action state machine as data: the statuses, what each one means to a waiter, and the
 * named moves between them. The API schema, the MCP wait, the metrics and the store's
 * guarded UPDATEs all derive from this table, so a new status is a compiler-guided change:
 * every `Record<ActionStatus, …>` that lacks it fails to compile.
 *
 * This module imports nothing and holds data only. That is why `src/store`, which must not
 * depend on domain logic, may import it: the store builds each move's `WHERE status …`
 * guard from `TRANSITIONS`.
 */

export const ACTION_STATUSES = ['scheduled', 'awaiting_approval', 'queued', 'received', 'succeeded', 'failed', 'rejected', 'cancelled', 'expired'] as const;

export type ActionStatus = (typeof ACTION_STATUSES)[number];

/**
 * What a new action starts as: `scheduled` when it was asked for with a `notBefore` still to
 * come (docs/agents/actions.md "Scheduling"), else `awaiting_approval` when its grant asks for
 * a human's yes first (docs/reference/rules.md "Approvals"), `queued` otherwise.
 */
export const INITIAL_STATUSES = ['scheduled', 'awaiting_approval', 'queued'] as const satisfies readonly ActionStatus[];

export type InitialStatus = (typeof INITIAL_STATUSES)[number];

export interface StatusInfo {
  /** Final: no move leaves it. */
  terminal: boolean;
  /**
   * How far along the action is. Every move goes to a higher stage, so a waiter that sees a
   * lower stage than it already holds knows the news is stale; all terminal statuses share
   * the last stage.
   */
  stage: number;
}

export const ACTION_STATES: Record<ActionStatus, StatusInfo> = {
  // Before every other stage; -1 keeps the others' numbers, which MCP progress reports (stage + 1).
  scheduled: { terminal: false, stage: -1 },
  awaiting_approval: { terminal: false, stage: 0 },
  queued: { terminal: false, stage: 1 },
  received: { terminal: false, stage: 2 },
  succeeded: { terminal: true, stage: 3 },
  failed: { terminal: true, stage: 3 },
  rejected: { terminal: true, stage: 3 },
  cancelled: { terminal: true, stage: 3 },
  expired: { terminal: true, stage: 3 },
};

export interface Transition {
  from: readonly ActionStatus[];
  to: readonly ActionStatus[];
  /** What makes the move, in the words of docs/reference/action-states.md. */
  by: string;
}

/** Every allowed move. Anything else is refused: the store's guard matches no row, the API answers 409. */
export const TRANSITIONS = {
  due: {
    from: ['scheduled'],
    to: ['queued', 'awaiting_approval'],
    by:
      'its `notBefore` came, and every permission and condition it was requested under still holds (checked again then); ' +
      '`awaiting_approval` where its grant asks the owner, whose approval window starts then',
  },
  approve: {
    from: ['awaiting_approval'],
    to: ['queued'],
    by: '`POST /v1/actions/{id}/approve` (the owner), while the permission it was requested under still holds; its deadline starts then',
  },
  reject: {
    from: ['awaiting_approval'],
    to: ['rejected'],
    by: '`POST /v1/actions/{id}/reject` (the owner), with an optional reason',
  },
  claim: {
    from: ['queued'],
    to: ['received'],
    by: '`POST /v1/device/{id}/next` hands it to exactly one poll, oldest first, only while its permission holds',
  },
  complete: {
    from: ['received'],
    to: ['succeeded', 'failed'],
    by: '`POST /v1/device/{id}/result` before the deadline, `ok: true` or `ok: false`',
  },
  cancel: {
    from: ['scheduled', 'awaiting_approval', 'queued'],
    to: ['cancelled'],
    by:
      '`POST /v1/actions/{id}/cancel` (owner or requesting agent), its MCP client going away, or the permission it was ' +
      'requested under ending, found by the revocation itself or by `next`: grant revoked or expired, agent connection or ' +
      "OAuth client revoked or expired, function removed or changed, device revoked or left out of its gateway's manifest, " +
      'a gateway grant replacement, or a scheduled one found refused when it became due; `cancelReason` says which',
  },
  expire: {
    from: ['scheduled', 'awaiting_approval', 'queued', 'received'],
    to: ['expired'],
    by:
      'the deadline passed without a result, or the approval window without a decision (the expiry sweep, or any read or report of it); ' +
      '`expiredReason` says which',
  },
} as const satisfies Record<string, Transition>;

export type TransitionName = keyof typeof TRANSITIONS;

export interface Mark {
  /** The statuses it applies in; the status itself does not change. */
  on: readonly ActionStatus[];
  /** What it records, in the words of docs/reference/action-states.md. */
  records: string;
  by: string;
}

/**
 * Changes that record news about an action without moving it: each is a guarded `UPDATE`
 * too (its status is in `on`, and it was not made before), so it happens at most once.
 */
export const MARKS = {
  recall: {
    on: ['received'],
    records: '`cancelRequestedAt`, `cancelReason`',
    by: 'the permission behind a handed-out command was withdrawn, or its MCP client went away: the device is asked to stop',
  },
  reportLate: {
    on: ['expired'],
    records: '`reportedLateAt`, `result` or `error`',
    by: '`POST /v1/device/{id}/result` after the deadline of a command the device had fetched: what it did is stored, the status stays',
  },
} as const satisfies Record<string, Mark>;

export type MarkName = keyof typeof MARKS;

/**
 * Why an action was cancelled, or why a handed-out one was recalled (`cancelReason` on the
 * Action; docs/reference/action-states.md "Action states (as implemented)"). A command is cancelled whenever the
 * permission it was requested under no longer holds, not only when someone asks.
 */
export const CANCEL_REASONS = {
  owner: 'the owner cancelled it',
  agent: 'the requesting agent cancelled it',
  client_cancelled: 'the MCP client that asked for it went away or cancelled the call',
  grant_revoked: "the principal's grant for the function was revoked",
  grant_expired: "the principal's grant for the function expired",
  principal_revoked: 'the agent connection or OAuth client that asked for it was revoked',
  principal_expired: 'the agent connection or OAuth client that asked for it expired',
  function_changed: 'the device republished the function with another kind or an incompatible schema',
  function_removed: "the function left the device's manifest",
  device_revoked: 'the device (or its gateway) was revoked',
  device_detached: "the device was left out of its gateway's manifest",
  gateway_grant_replaced: 'a gateway grant replacement left the service device out',
  outside_schedule: "the grant's schedule window closed before it was handed out, or was closed when it would have been approved",
  conditions_changed: "the owner changed the grant's argument bounds and they no longer allow its arguments",
} as const;

export type CancelReason = keyof typeof CANCEL_REASONS;

/** Why an action expired (`expiredReason` on the Action; docs/reference/rules.md "Approvals"). */
export const EXPIRED_REASONS = {
  deadline: 'no result arrived before its deadline',
  approval_timeout: 'nobody approved or rejected it within its approval window',
} as const;

export type ExpiredReason = keyof typeof EXPIRED_REASONS;

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

export const ACTION_STATUSES = ['queued', 'received', 'succeeded', 'failed', 'cancelled', 'expired'] as const;

export type ActionStatus = (typeof ACTION_STATUSES)[number];

/** What every new action starts as. */
export const INITIAL_STATUS = 'queued' satisfies ActionStatus;

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
  queued: { terminal: false, stage: 0 },
  received: { terminal: false, stage: 1 },
  succeeded: { terminal: true, stage: 2 },
  failed: { terminal: true, stage: 2 },
  cancelled: { terminal: true, stage: 2 },
  expired: { terminal: true, stage: 2 },
};

export interface Transition {
  from: readonly ActionStatus[];
  to: readonly ActionStatus[];
  /** What makes the move, in the README's words. */
  by: string;
}

/** Every allowed move. Anything else is refused: the store's guard matches no row, the API answers 409. */
export const TRANSITIONS = {
  claim: {
    from: ['queued'],
    to: ['received'],
    by: '`POST /v1/device/{id}/next` hands it to exactly one poll, oldest first',
  },
  complete: {
    from: ['received'],
    to: ['succeeded', 'failed'],
    by: '`POST /v1/device/{id}/result` before the deadline, `ok: true` or `ok: false`',
  },
  cancel: {
    from: ['queued'],
    to: ['cancelled'],
    by:
      '`POST /v1/actions/{id}/cancel` (owner or requesting agent), a gateway grant replacement that omits a service device, ' +
      "the device's revocation, or a child left out of its gateway's manifest",
  },
  expire: {
    from: ['queued', 'received'],
    to: ['expired'],
    by: 'the deadline passed without a result (the expiry sweep, or any read or report of it)',
  },
} as const satisfies Record<string, Transition>;

export type TransitionName = keyof typeof TRANSITIONS;

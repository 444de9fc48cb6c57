import { approvalRank, grantMatchesFunction } from './grants.js';

/**
 * The condition under which the grant `g` no longer fits the function `f` as it is now
 * published, given the requesting connection `c` (docs/reference/rules.md "Access", "Actions":
 * `function_changed`): the grant recorded another kind or argument schema (a grant without
 * that record never fits: COALESCE turns its NULL into a refusal), or a `read` ceiling faces
 * a function that is no longer `read` (a connection's ceiling is only ever raised, so the
 * function's kind changed after the command was requested).
 */
const FUNCTION_CHANGED = `((c.access = 'read' AND f.kind <> 'read') OR NOT COALESCE(${grantMatchesFunction('g', 'f')}, FALSE))`;

/**
 * The grant `g` asks for a stricter yes than the action `a` had, and `a` has not been handed
 * out: the owner re-granted the function in a stricter approval mode (which revokes the grant
 * `a` was requested under) while `a` was queued. The mode is read live like every other
 * permission (docs/reference/rules.md "Approvals"), so `a` may not run without the yes the grant now
 * wants. An action the owner approved (it had an approval window) had the strictest yes.
 */
const stricterGrant = (a: string) =>
  `(${a}.dispatched_at IS NULL AND ${a}.approval_expires_at IS NULL AND ${approvalRank('g.approval')} < ${approvalRank(`${a}.approval`)})`;

/**
 * Why the action `a` (an alias of `actions`) may no longer move its device, or NULL while it
 * may (docs/reference/rules.md "Actions"): the device and its gateway attached and unrevoked, the
 * requesting connection unrevoked and unexpired (its token no longer authenticates: what it
 * asked for ends with it, as with a grant's expiry; actions older than migration 0013 name none: the
 * principal's grant alone decides), the function still published, the principal's grant for
 * it live at `now` (an SQL parameter), the function still the one it was granted as, and, for
 * one not handed out yet, the schedule window it was queued in still open (`allowed_until`).
 * One row lookup per table, each by its key; at most one unrevoked grant exists per
 * principal, device and capability (index grants_unrevoked).
 */
export function refusal(a: string, now: string): string {
  return `(SELECT CASE
      WHEN d.revoked_at IS NOT NULL OR p.revoked_at IS NOT NULL THEN 'device_revoked'
      WHEN d.detached_at IS NOT NULL THEN 'device_detached'
      WHEN c.revoked_at IS NOT NULL THEN 'principal_revoked'
      WHEN c.expires_at IS NOT NULL AND c.expires_at <= ${now} THEN 'principal_expired'
      WHEN f.name IS NULL THEN 'function_removed'
      WHEN g.id IS NULL THEN 'grant_revoked'
      WHEN g.expires_at IS NOT NULL AND g.expires_at <= ${now} THEN 'grant_expired'
      WHEN ${FUNCTION_CHANGED} THEN 'function_changed'
      WHEN ${stricterGrant(a)} THEN 'grant_revoked'
      WHEN ${a}.dispatched_at IS NULL AND ${a}.allowed_until IS NOT NULL AND ${a}.allowed_until <= ${now} THEN 'outside_schedule'
    END
    FROM devices d
    LEFT JOIN devices p ON p.id = d.parent_id
    LEFT JOIN capabilities f ON f.device_id = d.id AND f.name = ${a}.capability
    LEFT JOIN connections c ON c.id = ${a}.connection_id
    LEFT JOIN grants g ON g.workspace_id = ${a}.workspace_id AND g.principal = ${a}.principal AND g.device_id = ${a}.device_id
      AND g.capability = ${a}.capability AND g.revoked_at IS NULL
    WHERE d.id = ${a}.device_id)`;
}

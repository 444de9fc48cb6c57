import type { z } from 'zod';
import { DatabaseUnavailable } from '../store/driver.js';

/**
 * The closed family of domain errors. Each code maps to exactly one HTTP status in
 * src/http/errors.ts and to an MCP result in src/mcp/errors.ts; 401-class (who are you)
 * and 403-class (you may not) codes are kept apart.
 */
export const errorCodes = [
  'invalid_request',
  'validation_failed',
  'unauthorized',
  'forbidden',
  'insufficient_access',
  'grant_required',
  'arguments_not_allowed',
  'outside_schedule',
  'grant_budget_exhausted',
  'device_limit_reached',
  'not_found',
  'method_not_allowed',
  'conflict',
  'idempotency_key_reused',
  'confirmation_required',
  'confirmation_declined',
  'confirmation_invalid',
  'payload_too_large',
  'rate_limited',
  'capacity_exceeded',
  'quota_exceeded',
  'device_controls_disabled',
  'not_configured',
  'unavailable',
  'internal',
] as const;

export type ErrorCode = (typeof errorCodes)[number];

export interface ErrorIssue {
  path: string;
  message: string;
}

export interface ErrorDetails {
  issues?: ErrorIssue[];
  /** For `insufficient_access`: the scope that would allow the call (OAuth step-up). */
  requiredAccess?: 'read' | 'act';
  /** For `rate_limited` / `capacity_exceeded`. */
  retryAfterSeconds?: number;
  /** For `rate_limited`: the bucket's size and what is left of it. */
  rateLimit?: { limit: number; remaining: number };
  /** For a `conflict` about one action (approve, reject): the Action as it is now. */
  action?: Record<string, unknown>;
  /** For `quota_exceeded`: the storage budget the write would exceed (docs/operators/budgets.md), its limit and what is used. */
  budget?: { name: string; limit: number; used: number };
  /** For `arguments_not_allowed`, `outside_schedule`, `grant_budget_exhausted`: what the grant's conditions allow (docs/owners/grants.md "Conditions"). */
  conditions?:
    | { allowed: Record<string, unknown> }
    | { nextWindowAt: number | null; timeZone: string }
    | { max: number; perSeconds: number; used: number; retryAt: number };
}

export class DomainError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly details: ErrorDetails = {},
  ) {
    super(message);
    this.name = 'DomainError';
  }
}

export function issuesFromZod(error: z.ZodError, prefix: readonly PropertyKey[] = []): ErrorIssue[] {
  return issuesOf(error.issues, prefix);
}

function issuesOf(issues: readonly z.core.$ZodIssue[], prefix: readonly PropertyKey[]): ErrorIssue[] {
  return issues.flatMap((issue) => {
    const path = [...prefix, ...issue.path];
    // One issue per unknown field, pointing at the field itself rather than at its object.
    if (issue.code === 'unrecognized_keys') {
      return issue.keys.map((key) => ({ path: [...path, key].map(String).join('.'), message: 'unknown field' }));
    }
    // A body that fits none of its accepted forms: the issues of the form it came closest to,
    // each at its field, rather than one issue at the body itself.
    if (issue.code === 'invalid_union') {
      const forms = issue.errors.map((branch) => issuesOf(branch, path)).filter((found) => found.length > 0);
      if (forms.length > 0) return forms.reduce((best, found) => (found.length < best.length ? found : best));
    }
    return [{ path: path.map(String).join('.'), message: issue.message }];
  });
}

export const fail = {
  invalid: (message: string, issues?: ErrorIssue[]) => new DomainError('validation_failed', message, issues ? { issues } : {}),
  unauthorized: (message = 'A valid credential is required.') => new DomainError('unauthorized', message),
  forbidden: (message: string) => new DomainError('forbidden', message),
  notFound: (what: string) => new DomainError('not_found', `${what} was not found.`),
  conflict: (message: string) => new DomainError('conflict', message),
};

/** Seconds a caller is asked to wait (Retry-After) when the database does not answer: long enough for a restart or failover. */
export const DATABASE_RETRY_AFTER_SECONDS = 5;

/**
 * The store's "cannot serve now" as the domain says it: 503 `unavailable` with Retry-After
 * (docs/reference/errors.md "Errors"), the same on every surface. The driver's text stays out of the message
 * (it is logged, `cause`); any other error is returned as it is.
 */
export function fromStoreError(error: unknown): unknown {
  if (!(error instanceof DatabaseUnavailable)) return error;
  return new DomainError('unavailable', 'The database is not answering now. Retry later.', { retryAfterSeconds: DATABASE_RETRY_AFTER_SECONDS });
}

/** Why an error happened, in one line: its message, and its cause's, without a stack. */
export function oneLine(error: unknown): string {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e !== undefined && e !== null && depth < 4; depth++) {
    const text = e instanceof Error ? e.message : String(e);
    if (text && !parts.includes(text)) parts.push(text);
    e = e instanceof Error ? e.cause : undefined;
  }
  return parts.join(': ').replace(/\s*\n\s*/g, ' ');
}

/** The two levels `logSweepFailure` writes: the Logger of src/domain/context.ts, not imported (context.ts reaches this file through its imports). */
interface SweepLog {
  warn(record: Record<string, unknown>): void;
  error(record: Record<string, unknown>): void;
}

/**
 * A periodic job (expiry sweep, housekeeping) that failed: it runs again at its next tick. A
 * database out of reach is a degradation, logged as a warn line without a stack (docs/operators/logs-and-metrics.md
 * "Logs"); anything else is a bug, logged at error level with its stack.
 */
export function logSweepFailure(log: SweepLog, msg: string, error: unknown): void {
  if (error instanceof DatabaseUnavailable) log.warn({ msg, error: oneLine(error) });
  else log.error({ msg, error: error instanceof Error ? (error.stack ?? error.message) : String(error) });
}

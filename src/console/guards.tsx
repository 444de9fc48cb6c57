import type { Context } from 'hono';
import type { OperationContext } from '../domain/context.js';
import { workspacePaused } from '../domain/device-controls.js';
import { DomainError, type ErrorIssue } from '../domain/errors.js';
import { call, invoke, type Answer, type OutputOf } from '../domain/invoke.js';
import { csrfMatches, csrfToken, ownerSession } from '../domain/owner-sessions.js';
import type { AnyOperation } from '../domain/operation.js';
import { operations } from '../domain/registry.js';
import { credentialBucket } from '../domain/rate-limits.js';
import { httpStatus } from '../http/errors.js';
import { readForm } from '../http/form.js';
import { formOriginRefusal, readOwnerSessionCookie } from '../http/owner-session.js';
import type { HttpEnv } from '../http/request.js';
import type { ConsoleDeps, Owner } from './deps.js';
import { Page, type Viewer } from './layout.js';

/**
 * What stands before every console page and form: the owner's session (the consent page's
 * cookie), the owner's rate-limit bucket (the one their bearer requests draw from), and on
 * every post the same-origin rule and the session's CSRF token. A page's work then goes
 * through `invoke` with the owner's credential, as the REST route would.
 */

export interface Signed {
  owner: Owner;
  viewer: Viewer;
  /** The domain context of this request, with the owner's credential. */
  ctx: OperationContext;
}

type C = Context<HttpEnv>;
type Outcome<T> = { ok: true; value: T } | { ok: false; message: string; issues?: ErrorIssue[]; status: 400 };

// eslint-disable-next-line max-lines-per-function -- the three guards (page, live, action) share one session check, error page and limiter through this closure
export function createGuards(deps: ConsoleDeps) {
  const { config, limiter, clock, db } = deps;
  const base = config.publicBaseUrl;

  const errorPage = (c: C, title: string, message: string, status: 400 | 403 | 404 | 409 | 413 | 429 | 500 | 503, viewer?: Viewer) =>
    c.html(
      <Page title={title} viewer={viewer}>
        <p class="error" role="alert" id="error">
          {message}
        </p>
        <p>
          <a href="/console">Back to the console</a>
        </p>
      </Page>,
      status,
    );

  /** The signed-in owner of this request, or undefined; counts the request against the owner's bucket. */
  async function signedIn(c: C): Promise<Signed | Response | undefined> {
    const token = readOwnerSessionCookie(c, base);
    const session = await ownerSession({ db, clock }, token);
    if (!session || !token) return undefined;
    // The session's expiry and hash go with the credential: a live feed ends with the session.
    const owner: Owner = {
      kind: 'owner',
      workspaceId: session.workspaceId,
      subject: session.subject,
      expiresAt: session.expiresAt,
      sessionHash: session.tokenHash,
    };
    const bucket = credentialBucket(owner, config.rateLimits)!;
    const taken = await limiter.take(bucket.key, bucket.rule, clock.now());
    if (!taken.allowed) {
      c.header('Retry-After', String(taken.retryAfterSeconds));
      return errorPage(c, 'Slow down', `Too many requests; try again in ${taken.retryAfterSeconds} s.`, 429);
    }
    c.set('credential', owner);
    const ctx = c.get('context')(owner, 'rest');
    // Every page says when the owner has paused device control, so it is not forgotten.
    const paused = await workspacePaused(ctx, owner.workspaceId);
    return { owner, viewer: { subject: session.subject, csrf: csrfToken(token), paused }, ctx };
  }

  /** A DomainError an operation threw, as a page (anything else is a bug: the app's 500). */
  const domainErrorPage = (c: C, error: unknown, viewer: Viewer) => {
    if (!(error instanceof DomainError)) throw error;
    if (error.details.retryAfterSeconds !== undefined) c.header('Retry-After', String(error.details.retryAfterSeconds));
    return errorPage(c, 'Not done', error.message, httpStatus[error.code] as 400, viewer);
  };

  /** How many actions wait for the owner: every page's navigation shows it (approvals.list counts them). */
  const pendingApprovals = async (signed: Signed) => (await invoke(operations.listApprovals, signed.ctx, { limit: 1 })).total;

  return {
    deps,
    errorPage,
    pendingApprovals,

    /** A GET page for the signed-in owner; anyone else is sent to sign in. */
    page(handler: (c: C, signed: Signed) => Response | Promise<Response>) {
      return async (c: C) => {
        const signed = await signedIn(c);
        if (signed instanceof Response) return signed;
        if (!signed) return c.redirect('/console/sign-in', 302);
        try {
          signed.viewer.pending = await pendingApprovals(signed);
          return await handler(c, signed);
        } catch (error) {
          return domainErrorPage(c, error, signed.viewer);
        }
      };
    },

    /**
     * A live feed for the signed-in owner, read by the page's script (an EventSource sends the
     * cookie, not a bearer). Without a session it is a plain 401: there is no page to send an
     * EventSource to. `feed` is aborted when the browser goes away; the handler aborts it when
     * the feed ends on its own.
     */
    live(handler: (c: C, signed: Signed, feed: AbortController) => Response | Promise<Response>) {
      return async (c: C) => {
        const signed = await signedIn(c);
        if (signed instanceof Response) return signed;
        if (!signed) return c.text('Not signed in.\n', 401);
        const feed = new AbortController();
        c.req.raw.signal.addEventListener('abort', () => feed.abort(), { once: true });
        try {
          return await handler(c, signed, feed);
        } catch (error) {
          feed.abort();
          if (!(error instanceof DomainError)) throw error;
          if (error.details.retryAfterSeconds !== undefined) c.header('Retry-After', String(error.details.retryAfterSeconds));
          return c.text(`${error.message}\n`, httpStatus[error.code] as 400);
        }
      };
    },

    /** A form post of the signed-in owner: same origin, a live session, its CSRF token. */
    action(handler: (c: C, signed: Signed, form: URLSearchParams) => Response | Promise<Response>) {
      return async (c: C) => {
        const refusal = formOriginRefusal(c, config);
        if (refusal) return errorPage(c, 'Refused', refusal, 403);
        const signed = await signedIn(c);
        if (signed instanceof Response) return signed;
        if (!signed) return errorPage(c, 'Signed out', 'Your sign-in has ended. Sign in again and repeat what you did.', 403);
        const form = await readForm(c.req.raw, (message, status) => errorPage(c, 'This form cannot be read', message, status, signed.viewer));
        if (form instanceof Response) return form;
        const token = readOwnerSessionCookie(c, base)!;
        if (!csrfMatches(token, form.get('csrf') ?? undefined)) {
          return errorPage(c, 'Refused', 'The form is stale or was not sent by this console. Reload the page and try again.', 403, signed.viewer);
        }
        try {
          return await handler(c, signed, form);
        } catch (error) {
          return domainErrorPage(c, error, signed.viewer);
        }
      };
    },

    /** An operation through the one chokepoint every surface uses. */
    invoke: <O extends AnyOperation>(signed: Signed, operation: O, input: unknown): Promise<OutputOf<O>> => invoke(operation, signed.ctx, input),
    call: <O extends AnyOperation>(signed: Signed, operation: O, input: unknown, limit?: number, signal?: AbortSignal): Promise<Answer<OutputOf<O>>> =>
      call(operation, signed.ctx, input, limit, signal),

    /** An operation whose refusal the screen shows next to its form rather than on a page of its own. */
    async attempt<O extends AnyOperation>(signed: Signed, operation: O, input: unknown): Promise<Outcome<OutputOf<O>>> {
      try {
        return { ok: true, value: await invoke(operation, signed.ctx, input) };
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        return { ok: false, message: error.message, status: httpStatus[error.code] as 400, ...(error.details.issues ? { issues: error.details.issues } : {}) };
      }
    },
  };
}

export type Guards = ReturnType<typeof createGuards>;

import type { Hono, Context } from 'hono';
import type { CredentialOf, OperationContext } from '../domain/context.js';
import { invoke } from '../domain/invoke.js';
import {
  approveAuthorization,
  checkAuthorizationRequest,
  consentPick,
  consentView,
  type AuthorizationParams,
  type ConsentView,
} from '../domain/oauth/authorize.js';
import { operations } from '../domain/registry.js';
import { DomainError, issuesFromZod, type ErrorIssue } from '../domain/errors.js';
import { UnsafeAuthorizationRequest } from '../domain/oauth/errors.js';
import { csrfMatches, csrfToken, ownerSession, type LiveOwnerSession } from '../domain/owner-sessions.js';
import { originRefusal, PAGE_CSP, pageForm, sessionToken } from './browser.js';
import type { OAuthEndpointDeps } from './deps.js';
import { conditionsInputOf, typedConditionsOf } from './consent-conditions.js';
import { ConsentPage, ErrorPage } from './pages.js';

/**
 * The authorization endpoint and its consent page: GET checks the request and shows the
 * signed-in owner what the client asks for (or sends them to sign in, session.tsx); POST
 * carries the owner's decision and redirects back to the client with a code or an error.
 */

const AUTHORIZATION_PARAMS = ['response_type', 'client_id', 'redirect_uri', 'code_challenge', 'code_challenge_method', 'state', 'scope', 'resource'] as const;

const errorPage = (c: Context, message: string, status: 400 | 403 = 400) =>
  c.html(<ErrorPage title="This authorization request cannot be completed" message={message} />, status);

/** A request refused as unsafe: a 400 page, or a 429 page with Retry-After when a budget refused it (docs/reference/rules.md "Errors and limits"). */
const unsafeRequestPage = (c: Context, error: UnsafeAuthorizationRequest) => {
  if (error.retryAfterSeconds === undefined) return errorPage(c, error.message);
  c.header('Retry-After', String(error.retryAfterSeconds));
  return c.html(<ErrorPage title="Try again shortly" message={error.message} />, 429);
};

/** The request's parameters, carried by the consent form's hidden fields. */
const fieldsOf = (params: AuthorizationParams): Record<string, string> =>
  Object.fromEntries(AUTHORIZATION_PARAMS.flatMap((name) => (params[name] === undefined ? [] : [[name, params[name]]])));

/** The consent page's CSP: its form may post here, and the approval redirects to the client's origin. */
const consentCsp = (view: ConsentView) => PAGE_CSP.replace("form-action 'self'", `form-action 'self' ${new URL(view.redirectUri).origin}`);

const authorizationParams = (get: (name: string) => string | undefined, repeated: readonly string[] = []): AuthorizationParams => ({
  ...(Object.fromEntries(AUTHORIZATION_PARAMS.map((name) => [name, get(name)])) as AuthorizationParams),
  repeated,
});

/**
 * The device functions the owner picked on the consent page, by device; a pick the page did not
 * offer is refused, and so is a control function when the token will carry read only.
 */
function picksOf(view: ConsentView, form: URLSearchParams, approved: 'read' | 'act'): { byDevice: Map<string, string[]> } | { error: string } {
  const offered = new Map(
    view.offered.flatMap((device) => device.functions.map((fn) => [consentPick(device.id, fn.name), { deviceId: device.id, fn }] as const)),
  );
  const byDevice = new Map<string, string[]>();
  // Each checked box is its own field, `grant:<device id>:<function>` (a form may not repeat a name).
  const picked = [...form.keys()].filter((key) => key.startsWith('grant:')).map((key) => key.slice('grant:'.length));
  for (const pick of new Set(picked)) {
    const found = offered.get(pick);
    if (!found) return { error: 'A device function you picked is no longer offered. Start again from the application.' };
    if (found.fn.kind === 'control' && approved === 'read')
      return { error: `${found.fn.name} is a control function: it cannot be granted with read only. Uncheck it, or approve with control.` };
    byDevice.set(found.deviceId, [...(byDevice.get(found.deviceId) ?? []), found.fn.name]);
  }
  return { byDevice };
}

/** One device's picks as `grants.create` takes them: the console's defaults and the conditions the owner set. */
const grantInput = (view: ConsentView, deviceId: string, capabilities: string[], conditions: Record<string, unknown> | undefined) => ({
  principal: view.principal,
  deviceId,
  capabilities,
  approval: view.grantDefaults.approval,
  ttlSeconds: view.grantDefaults.ttlSeconds,
  ...(conditions ? { conditions } : {}),
});

/**
 * The issues `grants.create`'s own input schema finds in the conditions, checked before the
 * authorization is approved so that refused conditions grant nothing and issue no code.
 */
function conditionsIssues(view: ConsentView, byDevice: Map<string, string[]>, conditions: Record<string, unknown> | undefined): ErrorIssue[] {
  const first = [...byDevice][0];
  if (!first || !conditions) return [];
  const parsed = operations.createGrants.input.safeParse(grantInput(view, first[0], first[1], conditions));
  return parsed.success ? [] : issuesFromZod(parsed.error).filter((issue) => issue.path.startsWith('conditions'));
}

/**
 * The picked functions, granted through the operation the console's grant form calls, with its
 * defaults and the conditions the owner set, as the owner of this session; each device's grants
 * in one transaction.
 */
async function grantPicks(
  c: Context,
  owner: LiveOwnerSession,
  view: ConsentView,
  byDevice: Map<string, string[]>,
  conditions: Record<string, unknown> | undefined,
): Promise<void> {
  const credential: CredentialOf<'owner'> = {
    kind: 'owner',
    workspaceId: owner.workspaceId,
    subject: owner.subject,
    expiresAt: owner.expiresAt,
    sessionHash: owner.tokenHash,
  };
  const ctx = (c.get('context' as never) as (credential: CredentialOf<'owner'>, surface: 'rest') => OperationContext)(credential, 'rest');
  for (const [deviceId, capabilities] of byDevice) await invoke(operations.createGrants, ctx, grantInput(view, deviceId, capabilities, conditions));
}

/** RFC 6749 §4.1.2 / RFC 9207: back to the client, with state echoed and iss on every answer. */
function redirectBack(
  deps: OAuthEndpointDeps,
  c: Context,
  to: { redirectUri: string; state: string | undefined },
  params: Record<string, string>,
  status: 302 | 303,
) {
  const url = new URL(to.redirectUri);
  for (const [key, value] of Object.entries(params)) url.searchParams.set(key, value);
  if (to.state !== undefined) url.searchParams.set('state', to.state);
  url.searchParams.set('iss', deps.oauthFor(c).issuer);
  return c.redirect(url.toString(), status);
}

/** The owner's decision: approve (with the picks and their conditions) or deny, then back to the client. */
async function postAuthorization(c: Context, deps: OAuthEndpointDeps) {
  const { oauth, log } = deps;
  const refusal = originRefusal(deps, c);
  if (refusal) return errorPage(c, refusal, 403);
  const form = await pageForm(c);
  if (form instanceof Response) return form;
  const token = sessionToken(deps, c);
  const owner = await ownerSession(oauth, token);
  if (!owner || !token) return errorPage(c, 'Your sign-in has ended. Start again from the application.', 403);
  if (!csrfMatches(token, form.get('csrf') ?? undefined))
    return errorPage(c, 'The form is stale or was not sent by this page. Start again from the application.', 403);
  const params = authorizationParams((name) => form.get(name) ?? undefined);
  try {
    const checked = await checkAuthorizationRequest(deps.oauthFor(c), params, owner);
    if (!checked.ok) return redirectBack(deps, c, checked.to, { error: checked.error.code, error_description: checked.error.description }, 303);
    const to = { redirectUri: checked.value.redirectUri, state: checked.value.state };
    const decision = form.get('decision');
    if (decision !== 'approve' && decision !== 'approve-read') {
      log.info({ msg: 'authorization denied', clientId: checked.value.client.clientId });
      return redirectBack(deps, c, to, { error: 'access_denied', error_description: 'The owner denied the request.' }, 303);
    }
    const view = await consentView(oauth, owner, checked.value);
    const approved = decision === 'approve-read' || view.granted === 'read' ? 'read' : 'act';
    const typed = typedConditionsOf(form);
    const picked = new Set([...form.keys()].filter((key) => key.startsWith('grant:')).map((key) => key.slice('grant:'.length)));
    const conditions = conditionsInputOf(typed);
    /** The page again, with what was typed and why it was refused (400): nothing is granted. */
    const again = (error: string, issues: readonly ErrorIssue[] = []) => {
      c.header('Content-Security-Policy', consentCsp(view));
      return c.html(
        <ConsentPage
          view={view}
          subject={owner.subject}
          csrf={csrfToken(token)}
          fields={fieldsOf(params)}
          error={error}
          conditions={{ typed, issues }}
          picked={picked}
        />,
        400,
      );
    };
    const picks = picksOf(view, form, approved);
    if ('error' in picks) return again(picks.error);
    if (conditions && picks.byDevice.size === 0) return again('Conditions apply to the functions you check: check at least one, or clear the conditions.');
    const issues = conditionsIssues(view, picks.byDevice, conditions);
    if (issues.length > 0) return again('The conditions are not valid: nothing was granted. Correct them beside each field, or clear them.', issues);
    let approval: { code: string };
    try {
      approval = await approveAuthorization(oauth, owner, checked.value, decision === 'approve-read' ? 'read' : checked.value.requested);
      await grantPicks(c, owner, view, picks.byDevice, conditions);
    } catch (error) {
      // The owner's own workspace is full: they are the one to tell, on the page they are looking at.
      if (!(error instanceof DomainError)) throw error;
      // A picked function that went away since the page was shown (a device revoked meanwhile).
      if (error.code !== 'capacity_exceeded')
        return errorPage(c, `Not every picked function could be granted: ${error.message} Start again from the application.`);
      c.header('Retry-After', String(error.details.retryAfterSeconds ?? 3600));
      return c.html(<ErrorPage title="This workspace is full" message={error.message} />, 429);
    }
    const { code } = approval;
    log.info({ msg: 'authorization approved', clientId: checked.value.client.clientId, granted: [...picks.byDevice.values()].flat().length });
    return redirectBack(deps, c, to, { code }, 303);
  } catch (error) {
    if (error instanceof UnsafeAuthorizationRequest) return unsafeRequestPage(c, error);
    throw error;
  }
}

export function mountAuthorizationEndpoint(app: Hono, deps: OAuthEndpointDeps): void {
  const { oauth } = deps;

  app.get('/oauth/authorize', async (c) => {
    const params = authorizationParams(
      (name) => c.req.query(name),
      AUTHORIZATION_PARAMS.filter((name) => (c.req.queries(name)?.length ?? 0) > 1),
    );
    try {
      const token = sessionToken(deps, c);
      const owner = await ownerSession(oauth, token);
      const checked = await checkAuthorizationRequest(deps.oauthFor(c), params, owner);
      if (!checked.ok) return redirectBack(deps, c, checked.to, { error: checked.error.code, error_description: checked.error.description }, 302);
      if (!owner || !token) {
        const here = new URL(c.req.url);
        return c.redirect(`/oauth/sign-in?next=${encodeURIComponent(`/oauth/authorize${here.search}`)}`, 302);
      }
      const view = await consentView(oauth, owner, checked.value);
      // The approve/deny post answers with a redirect to the client: form-action must allow its origin.
      c.header('Content-Security-Policy', consentCsp(view));
      return c.html(<ConsentPage view={view} subject={owner.subject} csrf={csrfToken(token)} fields={fieldsOf(params)} />);
    } catch (error) {
      if (error instanceof UnsafeAuthorizationRequest) return unsafeRequestPage(c, error);
      throw error;
    }
  });

  app.post('/oauth/authorize', (c) => postAuthorization(c, deps));
}

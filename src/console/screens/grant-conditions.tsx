import type { Hono } from 'hono';
import { boundWords, budgetWords, periodWords, scheduleWords } from '../../domain/grant-conditions.js';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Flash, Page, Term } from '../layout.js';
import { allDevices } from './devices.js';
import { ConditionsForm } from './grant-conditions-form.js';
import { conditionsOf, typedFrom, typedFromForm, type Issue, type Property, type Typed } from './grant-conditions-typed.js';
import { allGrants, backTo, GrantState, type Grant } from './grant-parts.js';

/**
 * A grant's conditions (docs/owners/grants.md "Conditions"): in words on the grant screens, with
 * a budget's use, and edited on a page of their own with a control that fits each argument of
 * the function's schema (a range for numbers, a choice list for enums and yes-or-no, a length
 * for text), weekly windows with a time zone, and a budget. A refused form comes back with what
 * was typed and the service's issues beside the field they name.
 */

/** "this hour" for one whole unit, else "in the last 10 minutes": the budget is a sliding window. */
function periodSpan(perSeconds: number): string {
  const words = periodWords(perSeconds);
  return /^an? /.test(words) ? `this ${words.replace(/^an? /, '')}` : `in the last ${words}`;
}

/** A budget's use in words: "7 of 10 this hour". */
export function budgetUseWords(max: number, perSeconds: number, used: number): string {
  return `${used} of ${max} ${periodSpan(perSeconds)}`;
}

/** What a grant's conditions mean, one line each, with its budget's use; "no conditions" when it has none. */
export function ConditionsSummary(props: { grant: Grant }) {
  const { conditions, budgetUse } = props.grant;
  if (!conditions) return <span class="muted">no conditions</span>;
  const budget = conditions.budget;
  return (
    <ul class="conditions" data-conditions={props.grant.id}>
      {Object.entries(conditions.arguments ?? {}).map(([name, bound]) => (
        <li data-condition="argument">{boundWords(name, bound)}</li>
      ))}
      {conditions.schedule ? <li data-condition="schedule">only {scheduleWords(conditions.schedule)}</li> : null}
      {budget ? (
        <li data-condition="budget">
          {budgetWords(budget)}
          {budgetUse ? (
            <>
              {' · '}
              <strong data-field="budget-use" class={budgetUse.used >= budget.max ? 'badge expired' : undefined}>
                {budgetUseWords(budget.max, budget.perSeconds, budgetUse.used)}
              </strong>
            </>
          ) : null}
        </li>
      ) : null}
    </ul>
  );
}

/** The link from a grant row to its conditions page. */
export function ConditionsLink(props: { grant: Grant; label: string; back: string }) {
  if (props.grant.stale || props.grant.expired) return null;
  const href = `/console/grants/conditions?grantId=${encodeURIComponent(props.grant.id)}&back=${encodeURIComponent(props.back)}`;
  return (
    <a href={href} class="small" aria-label={`Conditions of ${props.label}`} data-conditions-link={props.grant.id}>
      Conditions
    </a>
  );
}

async function renderConditions(
  guards: Guards,
  signed: Signed,
  grantId: string,
  back: string,
  flash: { error?: string; issues?: Issue[]; typed?: (properties: Record<string, Property>) => Typed },
) {
  const grant = (await allGrants(guards, signed)).find((g) => g.id === grantId);
  if (!grant) return undefined;
  const device = (await allDevices(guards, signed)).find((d) => d.id === grant.deviceId);
  const fn = device?.capabilities.find((c) => c.name === grant.capability);
  const properties = ((fn?.arguments as { properties?: Record<string, Property> } | undefined)?.properties ?? {}) as Record<string, Property>;
  const typed = flash.typed ? flash.typed(properties) : typedFrom(grant.conditions);
  return (
    <Page title={`Conditions of ${grant.capability}`} viewer={signed.viewer} screen="grants">
      <Flash error={flash.error} issues={flash.issues} />
      <p>
        <a href={back}>Back to grants</a>
      </p>
      <p>
        <code class="fn">{grant.capability}</code> on {device?.name ?? grant.deviceId} for <code>{grant.principal}</code>: <GrantState grant={grant} />
      </p>
      <h2>
        What the <Term api="conditions">conditions</Term> say now
      </h2>
      <ConditionsSummary grant={grant} />
      <ConditionsForm grant={grant} properties={properties} typed={typed} issues={flash.issues ?? []} back={back} viewer={signed.viewer} />
    </Page>
  );
}

export function mountGrantConditions(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/grants/conditions',
    guards.page(async (c, signed) => {
      const page = await renderConditions(guards, signed, c.req.query('grantId') ?? '', backTo(c.req.query('back')), {});
      return page ? c.html(page) : guards.errorPage(c, 'Not found', 'No such grant.', 404, signed.viewer);
    }),
  );

  app.post(
    '/console/grants/conditions',
    guards.action(async (c, signed, form) => {
      const grantId = form.get('grantId') ?? '';
      const back = backTo(form.get('back'));
      const grant = (await allGrants(guards, signed)).find((g) => g.id === grantId);
      if (!grant) return guards.errorPage(c, 'Not found', 'No such grant.', 404, signed.viewer);
      const device = (await allDevices(guards, signed)).find((d) => d.id === grant.deviceId);
      const schema = device?.capabilities.find((fn) => fn.name === grant.capability)?.arguments as { properties?: Record<string, Property> } | undefined;
      const properties = grant.gatewayId ? {} : (schema?.properties ?? {});
      const typed = typedFromForm(form, properties);
      const conditions = form.get('clear') === '1' ? null : conditionsOf(typed, properties);
      const outcome = await guards.attempt(signed, operations.updateWorkspaceGrant, { grantId, conditions });
      if (!outcome.ok) {
        const page = await renderConditions(guards, signed, grantId, back, {
          error: outcome.message,
          ...(outcome.issues ? { issues: outcome.issues } : {}),
          typed: () => typed,
        });
        return c.html(page!, outcome.status);
      }
      return c.redirect(`${back}${back.includes('?') ? '&' : '?'}done=updated`, 303);
    }),
  );
}

import type { Hono } from 'hono';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Icon, Page, Term, type Viewer } from '../layout.js';
import { allDevices } from './devices.js';
import {
  AccessLevel,
  allGrants,
  APPROVAL_TEXT,
  backTo,
  EditGrant,
  EditGrantForm,
  GrantState,
  knownAgents,
  staleReason,
  updateInput,
  type Grant,
} from './grant-parts.js';
import { ConditionsLink, ConditionsSummary } from './grant-conditions.js';
import { NewGrantConditions } from './new-grant-conditions.js';
import {
  boundsTyped,
  conditionsOf,
  NOTHING_TYPED,
  typedArgsFromForm,
  typedFromForm,
  type Issue,
  type Property,
  type Scope,
  type Typed,
} from './grant-conditions-typed.js';
import { renderOverview, type Flashed } from './grants-overview.js';
import { BROWSER_GRANT_DEFAULTS } from '../../domain/grant-defaults.js';

/**
 * Grants: the overview of every grant (grants-overview.tsx), and one agent's grants as a matrix
 * of devices × functions with each function's access level, the live grant with its expiry and
 * approval mode changed in place, grant and revoke, and the stale grants with why
 * (docs/owners/grants.md "Stale grants: a grant means what the owner saw").
 */

type Device = Awaited<ReturnType<typeof allDevices>>[number];

/**
 * What `user` approval is and is not (docs/agents/confirmation.md): the owner picks it here, so this
 * is where it has to be said that the service cannot verify the yes.
 */
const USER_APPROVAL_NOTE =
  "Approval user: the confirmation is asked and answered inside the agent's own MCP client. This service cannot verify that a person saw or answered it: a client that answers by itself passes, and the action records the client as the confirmer. Choose owner for a yes you give yourself.";

/**
 * New grants start with the safer choices preselected (docs/owners/console-guide.md "Safer
 * defaults"): owner approval, so a control function moves nothing without the owner's yes, and an
 * expiry, so a forgotten grant ends by itself. The API's own defaults (none, no expiry) are
 * unchanged; the screen says what is preselected and why.
 */
const DEFAULT_APPROVAL = BROWSER_GRANT_DEFAULTS.approval;
const DEFAULT_TTL = String(BROWSER_GRANT_DEFAULTS.ttlSeconds);

const TTL_CHOICES = [
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '604800', label: '7 days' },
  { value: '2592000', label: '30 days' },
  { value: '', label: 'No expiry' },
];

const DONE = {
  granted: 'Granted.',
  updated: 'Grant changed: the next request follows it.',
  revoked: 'Grant revoked: it stops allowing anything from the next request on.',
} as const;

/** A grant that allows calls now, so the function needs no checkbox to be granted. */
const holds = (grant: Grant) => !grant.stale && !grant.expired;

/** The top-level arguments of a function's schema. */
const propertiesOf = (fn: Device['capabilities'][number]) =>
  ((fn.arguments as { properties?: Record<string, Property> } | undefined)?.properties ?? {}) as Record<string, Property>;

/** Where a device's grant form holds its conditions fields (grant-conditions-form.tsx `Scope`). */
const conditionsScope = (deviceId: string): Scope => ({ id: `grant-${deviceId}-c-`, name: 'c:' });

/** What the owner sent in a device's grant form, kept when the service refused it. */
interface Retained {
  checked: string[];
  approval: string;
  ttl: string;
  typed: Typed;
  args: Record<string, Typed['args']>;
  /** Whether any condition was typed, for any function. */
  typedAny: boolean;
  issues: Issue[];
}

/** The conditions of a device's grant form, read from what was sent: `null` for none. */
function newConditions(
  form: URLSearchParams,
  device: Device | undefined,
  capabilities: string[],
): { retained: Omit<Retained, 'issues'>; conditions: Record<string, unknown> | null } {
  const scope = conditionsScope(device?.id ?? '');
  const typed = typedFromForm(form, {}, scope);
  const args: Retained['args'] = {};
  for (const fn of device?.capabilities ?? []) {
    const properties = propertiesOf(fn);
    if (Object.keys(properties).length > 0) args[fn.name] = typedArgsFromForm(form, properties, `${scope.name}${fn.name}:`);
  }
  const conditions = conditionsOf(typed, {});
  // Bounds typed for a function being granted go with the request; the service refuses them
  // (at conditions.arguments) when it names more than one function.
  const bounded = (device?.capabilities ?? []).filter((fn) => capabilities.includes(fn.name) && args[fn.name] && boundsTyped(args[fn.name]!, propertiesOf(fn)));
  let withBounds = conditions;
  if (bounded.length > 0) {
    const fn = bounded[0]!;
    const bounds = conditionsOf({ ...NOTHING_TYPED, args: args[fn.name]! }, propertiesOf(fn))?.arguments;
    withBounds = { ...(conditions ?? {}), arguments: bounds };
  }
  return {
    retained: {
      checked: capabilities,
      approval: form.get('approval') ?? DEFAULT_APPROVAL,
      ttl: form.get('ttlSeconds') ?? DEFAULT_TTL,
      typed,
      args,
      typedAny: conditions !== null || (device?.capabilities ?? []).some((fn) => args[fn.name] && boundsTyped(args[fn.name]!, propertiesOf(fn))),
    },
    conditions: withBounds,
  };
}

function FunctionRow(props: { device: Device; fn: Device['capabilities'][number]; held: Grant[]; back: string; viewer: Viewer; checked: boolean }) {
  const { device, fn } = props;
  const box = `grant-${device.id}-${fn.name}`;
  const label = `${fn.name} on ${device.name}`;
  return (
    <tr data-function={fn.name}>
      <td>
        {props.held.some(holds) ? (
          <span class="muted">
            <Icon name="check" /> granted
          </span>
        ) : (
          <>
            <input type="checkbox" id={box} name={`fn:${fn.name}`} value="on" checked={props.checked} />{' '}
            <label for={box}>
              grant <code class="fn">{fn.name}</code>
            </label>
          </>
        )}
      </td>
      <td data-label="Function">
        <code class="fn">{fn.name}</code>
        {fn.description ? <div class="muted">{fn.description}</div> : null}
      </td>
      <td data-label="Access level">
        <AccessLevel kind={fn.kind} />
      </td>
      <td data-label="Now">
        {props.held.length === 0 ? (
          <span class="muted">not granted</span>
        ) : (
          props.held.map((grant) => (
            <div>
              <GrantState grant={grant} />{' '}
              <button type="submit" class="danger small" formaction="/console/grants/revoke" name="grantId" value={grant.id} aria-label={`Revoke ${label}`}>
                Revoke
              </button>
              <div>
                <EditGrant grant={grant} label={label} back={props.back} viewer={props.viewer} />
              </div>
              <div data-field="conditions">
                <ConditionsSummary grant={grant} /> <ConditionsLink grant={grant} label={label} back={props.back} />
              </div>
            </div>
          ))
        )}
      </td>
    </tr>
  );
}

/** The conditions of a device's grant form: bounds offered for the functions that can be granted here and have arguments. */
function DeviceGrantConditions(props: { device: Device; grants: Grant[]; retained: Retained | undefined }) {
  const { device, retained } = props;
  const boundable = device.capabilities
    .filter((fn) => !props.grants.some((g) => g.capability === fn.name && holds(g)))
    .map((fn) => ({ name: fn.name, properties: propertiesOf(fn) }))
    .filter((fn) => Object.keys(fn.properties).length > 0);
  return (
    <NewGrantConditions
      scope={conditionsScope(device.id)}
      functions={boundable}
      typed={retained?.typed ?? NOTHING_TYPED}
      args={retained?.args ?? {}}
      issues={retained?.issues ?? []}
      open={retained !== undefined && (retained.typedAny || retained.issues.some((i) => i.path.startsWith('conditions')))}
      note="The schedule and the budget apply to each function you check (each has its own budget count). Argument bounds apply when you check one function only."
    />
  );
}

function DeviceGrants(props: { device: Device; grants: Grant[]; principal: string; back: string; viewer: Viewer; retained: Retained | undefined }) {
  const { device, retained } = props;
  const formId = `grant-${device.id}`;
  const approval = retained?.approval ?? DEFAULT_APPROVAL;
  const ttl = retained?.ttl ?? DEFAULT_TTL;
  return (
    <form method="post" action="/console/grants" id={formId} data-device-name={device.name}>
      <Csrf viewer={props.viewer} />
      <input type="hidden" name="principal" value={props.principal} />
      <input type="hidden" name="deviceId" value={device.id} />
      <input type="hidden" name="back" value={props.back} />
      <fieldset>
        <legend>
          {device.name} <span class="muted">({device.kind})</span>
        </legend>
        <div class="table-wrap">
          <table class="stack">
            <thead>
              <tr>
                <th scope="col">Grant</th>
                <th scope="col">
                  <Term api="capability">Function</Term>
                </th>
                <th scope="col">
                  <Term api="kind">Access level</Term>
                </th>
                <th scope="col">Now</th>
              </tr>
            </thead>
            <tbody>
              {device.capabilities.map((fn) => (
                <FunctionRow
                  device={device}
                  fn={fn}
                  held={props.grants.filter((g) => g.capability === fn.name)}
                  back={props.back}
                  viewer={props.viewer}
                  checked={retained?.checked.includes(fn.name) ?? false}
                />
              ))}
            </tbody>
          </table>
        </div>
        <DeviceGrantConditions device={device} grants={props.grants} retained={retained} />
        <div class="fields">
          <div>
            <label for={`${formId}-approval`}>Approval for the checked functions</label>
            <select id={`${formId}-approval`} name="approval">
              {Object.entries(APPROVAL_TEXT).map(([value, text]) => (
                <option value={value} selected={value === approval}>
                  {text}
                </option>
              ))}
            </select>
          </div>
          <div>
            <label for={`${formId}-ttl`}>Expiry</label>
            <select id={`${formId}-ttl`} name="ttlSeconds">
              {TTL_CHOICES.map((choice) => (
                <option value={choice.value} selected={choice.value === ttl}>
                  {choice.label}
                </option>
              ))}
            </select>
          </div>
          <div>
            <button type="submit" class="primary" aria-label={`Grant checked functions of ${device.name}`}>
              Grant checked functions
            </button>
          </div>
        </div>
      </fieldset>
    </form>
  );
}

async function renderAgent(guards: Guards, signed: Signed, principal: string, flash: Flashed, kept?: { deviceId: string; retained: Retained }) {
  const agent = (await knownAgents(guards, signed)).find((row) => row.principal === principal);
  const devices = (await allDevices(guards, signed)).filter((d) => !d.revoked && d.capabilities.length > 0);
  const grants = await allGrants(guards, signed, principal);
  const stale = grants.filter((g) => g.stale !== null);
  const names = new Map(devices.map((d) => [d.id, d.name]));
  const back = `/console/grants?principal=${encodeURIComponent(principal)}`;
  return (
    <Page title={agent ? `Grants of ${agent.name}` : 'Grants'} viewer={signed.viewer} screen="grants">
      <Flash {...flash} />
      <p>
        <a href="/console/grants">All grants</a>
      </p>
      <h2>
        What <code id="grants-principal">{principal}</code> may call
      </h2>
      {stale.length > 0 ? (
        <section class="warning" id="stale-grants" aria-labelledby="stale-heading">
          <h3 id="stale-heading">Stale grants</h3>
          <p>These allow nothing until you grant the function again: the device changed what you granted.</p>
          <ul>
            {stale.map((grant) => (
              <li>
                <code class="fn">{grant.capability}</code> on {names.get(grant.deviceId) ?? grant.deviceId}: {staleReason(grant.stale!)}
              </li>
            ))}
          </ul>
        </section>
      ) : null}
      <p class="notice" id="safer-defaults">
        Preselected for new grants: <strong>owner approval</strong> and an expiry of <strong>7 days</strong>. Control functions move real devices: with owner
        approval nothing moves without your yes, and a grant you forget ends by itself. Choose otherwise when you mean to.
      </p>
      <p class="muted" id="user-approval-note">
        {USER_APPROVAL_NOTE}
      </p>
      {devices.length === 0 ? (
        <p class="muted">No device publishes functions yet.</p>
      ) : (
        devices.map((device) => (
          <DeviceGrants
            device={device}
            grants={grants.filter((g) => g.deviceId === device.id)}
            principal={principal}
            back={back}
            viewer={signed.viewer}
            retained={kept?.deviceId === device.id ? kept.retained : undefined}
          />
        ))
      )}
      {grants.map((grant) => (
        <EditGrantForm grant={grant} back={back} viewer={signed.viewer} />
      ))}
    </Page>
  );
}

export function mountGrants(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/grants',
    guards.page(async (c, signed) => {
      const principal = (c.req.query('principal') ?? '').trim();
      const flash = { done: DONE[c.req.query('done') as keyof typeof DONE] };
      if (principal) return c.html(await renderAgent(guards, signed, principal, flash));
      return c.html(await renderOverview(guards, signed, (c.req.query('q') ?? '').trim().slice(0, 128), Number(c.req.query('page') ?? '1') || 1, flash));
    }),
  );

  const done = (back: string, what: keyof typeof DONE) => `${back}${back.includes('?') ? '&' : '?'}done=${what}`;

  app.post(
    '/console/grants',
    guards.action(async (c, signed, form) => {
      const principal = form.get('principal') ?? '';
      const capabilities = [...form.keys()].filter((key) => key.startsWith('fn:')).map((key) => key.slice('fn:'.length));
      const ttl = form.get('ttlSeconds') ?? '';
      const deviceId = form.get('deviceId') ?? '';
      const device = (await allDevices(guards, signed)).find((d) => d.id === deviceId);
      const { retained, conditions } = newConditions(form, device, capabilities);
      const outcome = await guards.attempt(signed, operations.createGrants, {
        principal,
        deviceId,
        capabilities,
        approval: form.get('approval') ?? DEFAULT_APPROVAL,
        ttlSeconds: ttl === '' ? null : Number(ttl),
        ...(conditions ? { conditions } : {}),
      });
      if (!outcome.ok) {
        const error = capabilities.length === 0 ? 'Check at least one function to grant.' : outcome.message;
        const kept = { deviceId, retained: { ...retained, issues: outcome.issues ?? [] } };
        return c.html(await renderAgent(guards, signed, principal, { error, issues: outcome.issues }, kept), outcome.status);
      }
      return c.redirect(done(`/console/grants?principal=${encodeURIComponent(principal)}`, 'granted'), 303);
    }),
  );

  app.post(
    '/console/grants/update',
    guards.action(async (c, signed, form) => {
      const outcome = await guards.attempt(signed, operations.updateWorkspaceGrant, updateInput(form));
      const back = backTo(form.get('back'));
      if (!outcome.ok) return guards.errorPage(c, 'Not changed', outcome.message, outcome.status, signed.viewer);
      return c.redirect(done(back, 'updated'), 303);
    }),
  );

  app.post(
    '/console/grants/revoke',
    guards.action(async (c, signed, form) => {
      await guards.invoke(signed, operations.revokeWorkspaceGrants, { grantId: form.get('grantId') ?? '' });
      const principal = form.get('principal');
      return c.redirect(done(principal ? `/console/grants?principal=${encodeURIComponent(principal)}` : backTo(form.get('back')), 'revoked'), 303);
    }),
  );
}

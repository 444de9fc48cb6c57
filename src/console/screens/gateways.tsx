import type { Hono } from 'hono';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Icon, Page, Term, type Viewer } from '../layout.js';
import { allDevices } from './devices.js';
import { allGrants, APPROVAL_TEXT, knownAgents, type Connection, type Grant } from './grant-parts.js';
import type { Flashed } from './grants-overview.js';
import { conditionsOf, NOTHING_TYPED, typedFromForm, type Issue, type Scope, type Typed } from './grant-conditions-typed.js';
import { NewGrantConditions } from './new-grant-conditions.js';

/**
 * Gateway grants (`gatewayGrants.replace`, docs/owners/grants.md "Giving and revoking grants"): one agent granted a gateway
 * and its linked devices in one step, read or control, replacing that agent's earlier grants on
 * them. The same safer choices are preselected as for single grants: owner approval, 7 days; the
 * agent is never preselected. When the agent already has grants there, a confirmation page names
 * the grants the new ones replace before anything changes (as revoking a device asks first).
 */

type Device = Awaited<ReturnType<typeof allDevices>>[number];

/** Where the gateway form holds its conditions fields: a schedule and a budget only. */
const CONDITIONS_SCOPE: Scope = { id: 'gateway-c-', name: 'c:' };

/** The conditions typed in the gateway form and the service's issues about them, kept when it refused them. */
interface Kept {
  typed: Typed;
  issues: Issue[];
}

const TTL_CHOICES = [
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '604800', label: '7 days' },
  { value: '2592000', label: '30 days' },
  { value: '', label: 'No expiry' },
];

function GatewayForm(props: { gateways: Device[]; agents: Connection[]; linked: (id: string) => number; viewer: Viewer; kept: Kept | undefined }) {
  return (
    <form method="post" action="/console/gateways" class="fields" id="gateway-grant">
      <Csrf viewer={props.viewer} />
      <div>
        <label for="gateway">Gateway</label>
        <select id="gateway" name="deviceId">
          {props.gateways.map((g) => (
            <option value={g.id}>{`${g.name} (${props.linked(g.id)} linked devices)`}</option>
          ))}
        </select>
      </div>
      <div>
        <label for="gateway-agent">
          <Term api="principal">Agent</Term>
        </label>
        <select id="gateway-agent" name="principal" required>
          <option value="" selected>
            Choose an agent
          </option>
          {props.agents.map((a) => (
            <option value={a.principal}>{`${a.name} (${a.principal})`}</option>
          ))}
        </select>
      </div>
      <fieldset>
        <legend>
          <Term api="mode">Access level</Term>
        </legend>
        <label>
          <input type="radio" name="mode" value="read" checked /> read: see state, change nothing
        </label>
        <label>
          <input type="radio" name="mode" value="control" /> control: read and change the devices
        </label>
      </fieldset>
      <div>
        <label>
          <input type="checkbox" name="includeServices" value="true" /> Include the gateway's service devices (integration-wide functions)
        </label>
      </div>
      <div>
        <label for="gateway-approval">Approval</label>
        <select id="gateway-approval" name="approval">
          {Object.entries(APPROVAL_TEXT).map(([value, text]) => (
            <option value={value} selected={value === 'owner'}>
              {text}
            </option>
          ))}
        </select>
      </div>
      <div>
        <label for="gateway-ttl">Expiry</label>
        <select id="gateway-ttl" name="ttlSeconds">
          {TTL_CHOICES.map((choice) => (
            <option value={choice.value} selected={choice.value === '604800'}>
              {choice.label}
            </option>
          ))}
        </select>
      </div>
      <NewGrantConditions
        scope={CONDITIONS_SCOPE}
        functions={[]}
        typed={props.kept?.typed ?? NOTHING_TYPED}
        args={{}}
        issues={props.kept?.issues ?? []}
        open={props.kept !== undefined && (conditionsOf(props.kept.typed, {}) !== null || props.kept.issues.some((i) => i.path.startsWith('conditions')))}
        note="A schedule and a budget for every grant the gateway grant writes, each function counted on its own. Argument bounds are set per grant, on its Conditions page."
      />
      <p class="notice">Preselected: owner approval and 7 days, as for single grants.</p>
      <div>
        <button type="submit" class="primary" id="grant-gateway">
          <Icon name="network" />
          Grant the gateway and its devices
        </button>
      </div>
    </form>
  );
}

async function render(guards: Guards, signed: Signed, flash: Flashed, kept?: Kept) {
  const devices = await allDevices(guards, signed);
  const gateways = devices.filter((d) => d.kind === 'gateway' && !d.revoked);
  const agents = await knownAgents(guards, signed);
  const linked = (id: string) => devices.filter((d) => d.parentId === id && !d.revoked).length;
  return (
    <Page title="Gateway grants" viewer={signed.viewer} screen="gateways">
      <Flash {...flash} />
      <p class="lede">
        Grant an agent a gateway and every device linked to it in one step. <strong>Read</strong> grants the read functions only, <strong>control</strong> all
        functions. It replaces that agent's earlier grants on the gateway and its devices; devices linked later stay ungranted until you grant again.
      </p>
      {gateways.length === 0 ? (
        <p class="muted" id="no-gateways">
          No gateways attached. A gateway is a device that brings its own linked devices (a hub, a bridge).
        </p>
      ) : agents.length === 0 ? (
        <p>
          No agents yet: <a href="/console/agents">create one</a> first.
        </p>
      ) : (
        <GatewayForm gateways={gateways} agents={agents} linked={linked} viewer={signed.viewer} kept={kept} />
      )}
    </Page>
  );
}

/** The fields of the grant form, carried through the confirmation page as they were sent. */
const FORM_FIELDS = ['deviceId', 'principal', 'mode', 'includeServices', 'approval', 'ttlSeconds'] as const;

function ConfirmReplace(props: { form: URLSearchParams; gateway: Device; agent: string; replaced: Grant[]; names: Map<string, string>; viewer: Viewer }) {
  return (
    <Page title="Replace gateway grants" viewer={props.viewer} screen="gateways">
      <p class="warning">
        <strong>{props.agent}</strong> already has {props.replaced.length} grant{props.replaced.length === 1 ? '' : 's'} on{' '}
        <strong>{props.gateway.name}</strong> and its devices. Granting the gateway replaces all of them:
      </p>
      <ul id="replaced-grants">
        {props.replaced.map((g) => (
          <li data-grant-id={g.id}>
            {props.names.get(g.deviceId) ?? g.deviceId}: <code>{g.capability}</code>
          </li>
        ))}
      </ul>
      <form method="post" action="/console/gateways">
        <Csrf viewer={props.viewer} />
        {FORM_FIELDS.map((name) => {
          const value = props.form.get(name);
          return value === null ? null : <input type="hidden" name={name} value={value} />;
        })}
        {[...props.form.entries()]
          .filter(([name]) => name.startsWith(CONDITIONS_SCOPE.name))
          .map(([name, value]) => (
            <input type="hidden" name={name} value={value} />
          ))}
        <input type="hidden" name="confirm" value="replace" />
        <button type="submit" class="danger" id="confirm-replace">
          Replace these grants
        </button>{' '}
        <a href="/console/gateways">Cancel</a>
      </form>
    </Page>
  );
}

/** The principal's grants that a gateway grant would replace: on the gateway, its devices, or written by it. */
async function replacedGrants(guards: Guards, signed: Signed, gateway: Device, devices: Device[], principal: string): Promise<Grant[]> {
  const family = new Set(devices.filter((d) => d.id === gateway.id || d.parentId === gateway.id).map((d) => d.id));
  return (await allGrants(guards, signed, principal)).filter((g) => g.principal === principal && (family.has(g.deviceId) || g.gatewayId === gateway.id));
}

export function mountGateways(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/gateways',
    guards.page(async (c, signed) => {
      const devices = Number(c.req.query('devices'));
      const done = c.req.query('done') === 'granted' ? `Granted: ${Number.isFinite(devices) ? devices : 0} devices received grants.` : undefined;
      return c.html(await render(guards, signed, { done }));
    }),
  );

  app.post(
    '/console/gateways',
    guards.action(async (c, signed, form) => {
      const principal = form.get('principal') ?? '';
      if (principal !== '' && form.get('confirm') !== 'replace') {
        const devices = await allDevices(guards, signed);
        const gateway = devices.find((d) => d.id === form.get('deviceId') && d.kind === 'gateway');
        const replaced = gateway ? await replacedGrants(guards, signed, gateway, devices, principal) : [];
        if (gateway && replaced.length > 0) {
          const agent = (await knownAgents(guards, signed)).find((a) => a.principal === principal);
          const names = new Map(devices.map((d) => [d.id, d.name]));
          return c.html(
            <ConfirmReplace
              form={form}
              gateway={gateway}
              agent={agent ? `${agent.name} (${principal})` : principal}
              replaced={replaced}
              names={names}
              viewer={signed.viewer}
            />,
          );
        }
      }
      const ttl = form.get('ttlSeconds') ?? '';
      const typed = typedFromForm(form, {}, CONDITIONS_SCOPE);
      const conditions = conditionsOf(typed, {});
      const outcome = await guards.attempt(signed, operations.grantGateway, {
        deviceId: form.get('deviceId') ?? '',
        principal,
        mode: form.get('mode') ?? '',
        includeServices: form.get('includeServices') === 'true',
        approval: form.get('approval') ?? 'owner',
        ttlSeconds: ttl === '' ? null : Number(ttl),
        ...(conditions ? { conditions } : {}),
      });
      if (!outcome.ok) {
        return c.html(
          await render(guards, signed, { error: outcome.message, issues: outcome.issues }, { typed, issues: outcome.issues ?? [] }),
          outcome.status,
        );
      }
      return c.redirect(`/console/gateways?done=granted&devices=${outcome.value.devices}`, 303);
    }),
  );
}

import type { Hono } from 'hono';
import type { z } from 'zod';
import type { grant as grantSchema } from '../../domain/grants.js';
import { operations } from '../../domain/registry.js';
import type { connection } from '../../domain/schemas.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Time, type Viewer } from '../layout.js';
import { allDevices } from './devices.js';

/**
 * Grants of one principal: a matrix of devices × functions with the function's kind (read or
 * control), the live grant with its expiry and approval mode, grant and revoke, and the stale
 * grants with why (README "Stale grants").
 */

type Grant = z.infer<typeof grantSchema>;
type Device = Awaited<ReturnType<typeof allDevices>>[number];

const APPROVAL_TEXT = {
  none: 'none: a call queues the action',
  owner: 'owner: waits for your approval',
  user: "user: the agent's own MCP client asks its user (as owner over REST)",
} as const;

/**
 * What `user` approval is and is not (docs/confirmation.md): the owner picks it here, so this
 * is where it has to be said that the service cannot verify the yes.
 */
const USER_APPROVAL_NOTE =
  "Approval user: the confirmation is asked and answered inside the agent's own MCP client. This service cannot verify that a person saw or answered it: a client that answers by itself passes, and the action records the client as the confirmer. Choose owner for a yes you give yourself.";

const TTL_CHOICES = [
  { value: '', label: 'No expiry' },
  { value: '3600', label: '1 hour' },
  { value: '86400', label: '1 day' },
  { value: '2592000', label: '30 days' },
];

const DONE = { granted: 'Granted.', revoked: 'Grant revoked: it stops allowing anything from the next request on.' } as const;

export function staleReason(stale: NonNullable<Grant['stale']>): string {
  if (stale.reason === 'function_removed') return 'the device no longer publishes this function';
  if (stale.reason === 'kind_changed') return `the device changed this function from ${stale.grantedKind ?? 'unknown'} to ${stale.currentKind ?? 'unknown'}`;
  return "the device changed this function's arguments since it was granted";
}

function GrantState(props: { grant: Grant }) {
  const { grant } = props;
  return (
    <span data-grant-id={grant.id}>
      granted, approval <strong>{grant.approval}</strong>, expires <Time ms={grant.expiresAt} never="never" />
      {grant.gatewayId ? ' (by a gateway grant)' : ''}
      {grant.expired ? <strong> · expired</strong> : null}
      {grant.stale ? <strong> · stale: {staleReason(grant.stale)}</strong> : null}
    </span>
  );
}

// eslint-disable-next-line max-lines-per-function -- one device's grant form markup; console screens are being reworked in parallel, split after that
function DeviceGrants(props: { device: Device; grants: Grant[]; principal: string; viewer: Viewer }) {
  const { device } = props;
  const formId = `grant-${device.id}`;
  return (
    <form method="post" action="/console/grants" id={formId} data-device-name={device.name}>
      <Csrf viewer={props.viewer} />
      <input type="hidden" name="principal" value={props.principal} />
      <input type="hidden" name="deviceId" value={device.id} />
      <fieldset>
        <legend>
          {device.name} <span class="muted">({device.kind})</span>
        </legend>
        <div class="table-wrap">
          <table class="stack">
            <thead>
              <tr>
                <th scope="col">Grant</th>
                <th scope="col">Function</th>
                <th scope="col">Kind</th>
                <th scope="col">Now</th>
              </tr>
            </thead>
            <tbody>
              {device.capabilities.map((fn) => {
                const held = props.grants.filter((g) => g.capability === fn.name);
                const box = `${formId}-${fn.name}`;
                return (
                  <tr data-function={fn.name}>
                    <td>
                      <input type="checkbox" id={box} name={`fn:${fn.name}`} value="on" />{' '}
                      <label for={box}>
                        grant <code>{fn.name}</code>
                      </label>
                    </td>
                    <td data-label="Function">
                      <code>{fn.name}</code>
                      {fn.description ? <div class="muted">{fn.description}</div> : null}
                    </td>
                    <td data-label="Kind">{fn.kind}</td>
                    <td data-label="Now">
                      {held.length === 0 ? (
                        <span class="muted">not granted</span>
                      ) : (
                        held.map((grant) => (
                          <div>
                            <GrantState grant={grant} />{' '}
                            <button
                              type="submit"
                              class="danger"
                              formaction="/console/grants/revoke"
                              name="grantId"
                              value={grant.id}
                              aria-label={`Revoke ${fn.name} on ${device.name}`}
                            >
                              Revoke
                            </button>
                          </div>
                        ))
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
        <div class="fields">
          <div>
            <label for={`${formId}-approval`}>Approval for the checked functions</label>
            <select id={`${formId}-approval`} name="approval">
              {Object.entries(APPROVAL_TEXT).map(([value, text]) => (
                <option value={value}>{text}</option>
              ))}
            </select>
          </div>
          <div>
            <label for={`${formId}-ttl`}>Expiry</label>
            <select id={`${formId}-ttl`} name="ttlSeconds">
              {TTL_CHOICES.map((choice) => (
                <option value={choice.value}>{choice.label}</option>
              ))}
            </select>
          </div>
          <div>
            <button type="submit" class="primary" aria-label={`Grant the checked functions of ${device.name}`}>
              Grant checked functions
            </button>
          </div>
        </div>
      </fieldset>
    </form>
  );
}

// eslint-disable-next-line max-lines-per-function -- the grants routes share one render closure for their answers and flash messages; console screens are being reworked in parallel, split after that
export function mountGrants(app: Hono<HttpEnv>, guards: Guards): void {
  const render = async (signed: Signed, principal: string, flash: { error?: string; issues?: { path: string; message: string }[]; done?: string } = {}) => {
    const known = [
      ...((await guards.invoke(signed, operations.listAgentConnections, {})) as z.infer<typeof connection>[]),
      ...((await guards.invoke(signed, operations.listOAuthClients, {})) as z.infer<typeof connection>[]),
    ].filter((row) => !row.revoked);
    const devices = principal ? (await allDevices(guards, signed)).filter((d) => !d.revoked && d.capabilities.length > 0) : [];
    const grants = principal ? ((await guards.invoke(signed, operations.listGrants, { principal })) as Grant[]) : [];
    const stale = grants.filter((g) => g.stale !== null);
    const names = new Map(devices.map((d) => [d.id, d.name]));
    return (
      <Page title="Grants" viewer={signed.viewer} screen="grants">
        <Flash {...flash} />
        <form method="get" action="/console/grants" class="fields">
          <div>
            <label for="principal">Principal</label>
            <input type="text" id="principal" name="principal" value={principal} list="principals" required maxlength={128} placeholder="agent:support-bot" />
            <datalist id="principals">
              {known.map((row) => (
                <option value={row.principal}>{row.name}</option>
              ))}
            </datalist>
          </div>
          <div>
            <button type="submit" id="show-grants">
              Show grants
            </button>
          </div>
        </form>
        {known.length > 0 ? (
          <p class="muted">
            Principals of your agents:{' '}
            {known.map((row, index) => (
              <>
                {index > 0 ? ', ' : ''}
                <a href={`/console/grants?principal=${encodeURIComponent(row.principal)}`}>{row.principal}</a> ({row.name})
              </>
            ))}
          </p>
        ) : null}
        {principal ? (
          <>
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
                      <code>{grant.capability}</code> on {names.get(grant.deviceId) ?? grant.deviceId}: {staleReason(grant.stale!)}
                    </li>
                  ))}
                </ul>
              </section>
            ) : null}
            <p class="muted" id="user-approval-note">
              {USER_APPROVAL_NOTE}
            </p>
            {devices.length === 0 ? (
              <p class="muted">No device publishes functions yet.</p>
            ) : (
              devices.map((device) => (
                <DeviceGrants device={device} grants={grants.filter((g) => g.deviceId === device.id)} principal={principal} viewer={signed.viewer} />
              ))
            )}
          </>
        ) : null}
      </Page>
    );
  };

  app.get(
    '/console/grants',
    guards.page(async (c, signed) =>
      c.html(await render(signed, (c.req.query('principal') ?? '').trim(), { done: DONE[c.req.query('done') as keyof typeof DONE] })),
    ),
  );

  const back = (principal: string, done: keyof typeof DONE) => `/console/grants?principal=${encodeURIComponent(principal)}&done=${done}`;

  app.post(
    '/console/grants',
    guards.action(async (c, signed, form) => {
      const principal = form.get('principal') ?? '';
      const capabilities = [...form.keys()].filter((key) => key.startsWith('fn:')).map((key) => key.slice('fn:'.length));
      const ttl = form.get('ttlSeconds') ?? '';
      const outcome = await guards.attempt(signed, operations.createGrants, {
        principal,
        deviceId: form.get('deviceId') ?? '',
        capabilities,
        approval: form.get('approval') ?? 'none',
        ttlSeconds: ttl === '' ? null : Number(ttl),
      });
      if (!outcome.ok)
        return c.html(
          await render(signed, principal, {
            error: capabilities.length === 0 ? 'Check at least one function to grant.' : outcome.message,
            issues: outcome.issues,
          }),
          outcome.status,
        );
      return c.redirect(back(principal, 'granted'), 303);
    }),
  );

  app.post(
    '/console/grants/revoke',
    guards.action(async (c, signed, form) => {
      await guards.invoke(signed, operations.revokeGrants, { grantId: form.get('grantId') ?? '' });
      return c.redirect(back(form.get('principal') ?? '', 'revoked'), 303);
    }),
  );
}

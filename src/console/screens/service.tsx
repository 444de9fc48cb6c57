import type { Hono } from 'hono';
import type { z } from 'zod';
import type { deviceControls } from '../../domain/device-controls.js';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards } from '../guards.js';
import { Csrf, Flash, Icon, Page, Time } from '../layout.js';

/**
 * Device control and the service's state: the owner's pause switch for this workspace
 * (`deviceControls.get` / `deviceControls.set`), the service-wide kill switch (as GET /healthz
 * reports it), and readiness.
 */

type Controls = z.infer<typeof deviceControls>;

const DONE = {
  paused: 'Device control is paused: agents are refused and devices are handed nothing until you resume.',
  resumed: "Device control resumed: agents' requests reach devices again.",
} as const;

function PauseSwitch(props: { controls: Controls; csrf: { subject: string; csrf: string } }) {
  const { controls } = props;
  return (
    <section aria-labelledby="pause-heading">
      <h2 id="pause-heading">Pause device control</h2>
      <div class="switch" id="pause-switch" data-paused={controls.paused ? 'true' : 'false'}>
        <span class="state" id="pause-state">
          {controls.paused ? (
            <span class="badge paused">
              <Icon name="circle-pause" /> Paused
            </span>
          ) : (
            <span class="badge running">
              <Icon name="play" /> Running
            </span>
          )}
        </span>
        <form method="post" action="/console/service/device-controls" class="inline">
          <Csrf viewer={props.csrf} />
          <input type="hidden" name="paused" value={controls.paused ? 'false' : 'true'} />
          {controls.paused ? (
            <button type="submit" class="primary" id="resume-controls">
              <Icon name="play" />
              Resume device control
            </button>
          ) : (
            <button type="submit" class="danger" id="pause-controls">
              <Icon name="pause" />
              Pause device control
            </button>
          )}
        </form>
      </div>
      <p class="muted">
        {controls.paused ? (
          <>
            Paused since <Time ms={controls.pausedAt} /> by <strong>{controls.pausedBy ?? ''}</strong>.{' '}
          </>
        ) : null}
        While paused, every agent request that would start something on a device in this workspace is refused (<code>device_controls_disabled</code>), over the
        API and MCP, and devices are handed nothing: commands already queued wait (you can still cancel them) until they expire or you resume. Reading devices,
        grants and activity keeps working. The switch is kept in the database: it holds across restarts.
      </p>
    </section>
  );
}

export function mountService(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/service',
    guards.page(async (c, signed) => {
      const health = await guards.invoke(signed, operations.getHealth, {});
      const controls = await guards.invoke(signed, operations.getDeviceControls, {});
      // The same operation as GET /readyz; not ready is its 503 `unavailable`, shown as a state, not an error page.
      const readiness = await guards.attempt(signed, operations.getReadiness, {});
      return c.html(
        <Page title="Device control" viewer={signed.viewer} screen="service">
          <Flash done={DONE[c.req.query('done') as keyof typeof DONE]} />
          <PauseSwitch controls={controls} csrf={signed.viewer} />
          <h2>Service</h2>
          <dl>
            <dt>Service-wide kill switch</dt>
            <dd id="device-controls">
              {health.deviceControlsEnabled ? (
                <strong>enabled: agents' actions reach devices</strong>
              ) : (
                <strong class="warning">switched off (kill switch): no action is queued or handed to a device; reads keep working</strong>
              )}{' '}
              <span class="muted">(set by the operator with DEVICE_CONTROLS_ENABLED, for every workspace)</span>
            </dd>
            <dt>Identity provider</dt>
            <dd>{health.authConfigured ? 'external' : 'development (not for production)'}</dd>
            {health.commit ? (
              <>
                <dt>Commit</dt>
                <dd>
                  <code>{health.commit}</code>
                </dd>
              </>
            ) : null}
          </dl>
          <section id="readiness">
            <h2>Readiness</h2>
            {readiness.ok ? (
              <p>
                <strong>ready</strong>: {readiness.value.dependencies.map((d) => `${d.name} answers`).join(', ')} (as <code>GET /readyz</code> reports it).
              </p>
            ) : (
              <p>
                <strong class="warning">not ready</strong>: {readiness.message} Requests that need the missing dependency answer 503 until it is back.
              </p>
            )}
          </section>
        </Page>,
      );
    }),
  );

  app.post(
    '/console/service/device-controls',
    guards.action(async (c, signed, form) => {
      // Only the two values the switch sends: anything else, a missing field included, must not
      // read as "resume" and is left to the operation's schema to refuse (400).
      const sent = form.get('paused');
      const paused = sent === 'true' ? true : sent === 'false' ? false : sent;
      await guards.invoke(signed, operations.setDeviceControls, { paused });
      return c.redirect(`/console/service?done=${paused ? 'paused' : 'resumed'}`, 303);
    }),
  );
}

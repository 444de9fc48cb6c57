import type { Hono } from 'hono';
import { operations } from '../../domain/registry.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards } from '../guards.js';
import { Page } from '../layout.js';

/** Service state: the kill switch (as GET /healthz reports it) and readiness. */

interface Health {
  service: string;
  commit?: string;
  authConfigured: boolean;
  deviceControlsEnabled: boolean;
}

interface Readiness {
  status: 'ready';
  dependencies: { name: string; state: 'up' }[];
}

export function mountService(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/service',
    guards.page(async (c, signed) => {
      const health = (await guards.invoke(signed, operations.getHealth, {})) as Health;
      // The same operation as GET /readyz; not ready is its 503 `unavailable`, shown as a state, not an error page.
      const readiness = await guards.attempt<Readiness>(signed, operations.getReadiness, {});
      return c.html(
        <Page title="Service" viewer={signed.viewer} screen="service">
          <dl>
            <dt>Device controls</dt>
            <dd id="device-controls">
              {health.deviceControlsEnabled ? (
                <strong>enabled: agents' actions reach devices</strong>
              ) : (
                <strong class="warning">switched off (kill switch): no action is queued or handed to a device; reads keep working</strong>
              )}
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
}

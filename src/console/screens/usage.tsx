import type { Hono } from 'hono';
import type { z } from 'zod';
import { operations } from '../../domain/registry.js';
import type { usage as usageSchema } from '../../domain/usage.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards } from '../guards.js';
import { Page, Term } from '../layout.js';

/**
 * The workspace's usage against its limits (`usage.get`): what holds a place (devices, agents,
 * grants …) and what is stored (docs/operators/budgets.md), each with a meter, so the owner sees a limit
 * coming before the agents' 429 answers say it is reached.
 */

type Usage = z.infer<typeof usageSchema>;
type Measure = { used: number; limit: number };

const CAPACITY: { key: keyof Usage['capacity']; label: string; api: string }[] = [
  { key: 'devices', label: 'Devices', api: 'WORKSPACE_MAX_DEVICES' },
  { key: 'pendingActions', label: 'Actions waiting (queued or awaiting approval)', api: 'queued actions per workspace' },
  { key: 'agentConnections', label: 'Agent connections', api: 'agentConnections' },
  { key: 'oauthClients', label: 'OAuth clients', api: 'oauthClients' },
  { key: 'grants', label: 'Live grants', api: 'grants' },
  { key: 'setupTokens', label: 'Live setup tokens', api: 'setupTokens' },
  { key: 'enrollmentCodes', label: 'Live enrollment codes', api: 'enrollmentCodes' },
  { key: 'webhooks', label: 'Webhooks', api: 'webhooks' },
];

const STORAGE: { key: keyof Usage['storage']; label: string; bytes: boolean }[] = [
  { key: 'actions', label: 'Stored actions', bytes: false },
  { key: 'action_bytes', label: 'Arguments and results stored', bytes: true },
  { key: 'event_bytes', label: 'Event journal', bytes: true },
  { key: 'webhook_deliveries', label: 'Webhook deliveries stored', bytes: false },
];

function amount(n: number, bytes: boolean): string {
  if (!bytes) return n.toLocaleString('en');
  const units = ['bytes', 'KiB', 'MiB', 'GiB'];
  let value = n;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${unit === 0 ? value : value.toFixed(1)} ${units[unit]}`;
}

function Meter(props: { id: string; label: string; api: string; measure: Measure; bytes?: boolean }) {
  const { used, limit } = props.measure;
  const share = limit > 0 ? Math.min(100, Math.round((used / limit) * 100)) : 0;
  return (
    <div class="card" id={props.id}>
      <Term api={props.api}>{props.label}</Term>
      <div>
        <strong>{amount(used, props.bytes ?? false)}</strong> of {amount(limit, props.bytes ?? false)} <span class="muted">({share} %)</span>
      </div>
      <span class={share >= 80 ? 'meter high' : 'meter'} role="img" aria-label={`${share} percent used`}>
        <span class={`w${Math.ceil(share / 5) * 5}`}></span>
      </span>
    </div>
  );
}

export function mountUsage(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/usage',
    guards.page(async (c, signed) => {
      const usage = await guards.invoke(signed, operations.getUsage, {});
      return c.html(
        <Page title="Usage and limits" viewer={signed.viewer} screen="usage">
          <p class="lede">
            What this workspace holds and stores, against the limits the service sets. A request beyond a limit is refused (429); old actions and events are
            deleted by retention, which gives stored space back.
          </p>
          <h2>What holds a place</h2>
          <div class="cards">
            {CAPACITY.map((item) => (
              <Meter id={`usage-${item.key}`} label={item.label} api={item.api} measure={usage.capacity[item.key]} />
            ))}
          </div>
          <h2>What is stored</h2>
          <div class="cards">
            {STORAGE.map((item) => (
              <Meter id={`usage-${item.key}`} label={item.label} api={`storage budget ${item.key}`} measure={usage.storage[item.key]} bytes={item.bytes} />
            ))}
          </div>
        </Page>,
      );
    }),
  );
}

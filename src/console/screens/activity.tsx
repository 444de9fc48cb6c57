/* eslint-disable max-lines-per-function -- one page handler: the filter query, the read and the render, reworked in parallel for server-side filters; split after that */
import type { Hono } from 'hono';
import type { z } from 'zod';
import type { action as actionSchema } from '../../domain/action-records.js';
import { ACTION_STATUSES } from '../../domain/action-states.js';
import { operations } from '../../domain/registry.js';
import { documentStream } from '../../http/document-stream.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards } from '../guards.js';
import { Page, Time } from '../layout.js';
import { allDevices } from './devices.js';

/**
 * Activity: the workspace's actions, newest first, a page at a time (the `actions.list`
 * operation), narrowed by status, device and principal, their statuses kept current by the
 * script from the event stream (the live feed); and the history export download (the
 * `actions.export` operation) for a date range.
 */

type Action = z.infer<typeof actionSchema>;

const PAGE = 50;

/** A UTC calendar day (`YYYY-MM-DD`) as Unix ms at its start, or undefined. */
const dayStart = (day: string | undefined) => (day && /^\d{4}-\d{2}-\d{2}$/.test(day) ? Date.parse(`${day}T00:00:00Z`) : undefined);

export function mountActivity(app: Hono<HttpEnv>, guards: Guards): void {
  app.get(
    '/console/activity',
    guards.page(async (c, signed) => {
      const status = c.req.query('status') ?? '';
      const deviceId = c.req.query('deviceId') ?? '';
      const principal = (c.req.query('principal') ?? '').trim();
      const cursor = c.req.query('cursor');
      const answer = await guards.call(signed, operations.listActions, cursor ? { cursor, limit: PAGE } : { limit: PAGE });
      if (answer.kind !== 'page') throw new Error('actions.list answers pages');
      const devices = await allDevices(guards, signed);
      const names = new Map(devices.map((d) => [d.id, d.name]));
      const page = answer.data as Action[];
      const shown = page.filter((a) => (!status || a.status === status) && (!deviceId || a.deviceId === deviceId) && (!principal || a.principal === principal));
      const filters = new URLSearchParams({ status, deviceId, principal });
      const older = answer.nextCursor ? `/console/activity?${filters}&cursor=${encodeURIComponent(answer.nextCursor)}` : undefined;
      return c.html(
        <Page title="Activity" viewer={signed.viewer} screen="activity" live>
          <section class="notice" id="live-feed">
            <h2>Live feed</h2>
            <p>
              The statuses and outcomes below change as the actions do, from the owner's event stream. Without script, reload the page to see them.{' '}
              <span id="live-status" role="status"></span>
            </p>
          </section>
          <h2>History</h2>
          <form method="get" action="/console/activity" class="fields">
            <div>
              <label for="status">Status</label>
              <select id="status" name="status">
                <option value="">any</option>
                {ACTION_STATUSES.map((s) => (
                  <option value={s} selected={s === status}>
                    {s}
                  </option>
                ))}
              </select>
            </div>
            <div>
              <label for="deviceId">Device</label>
              <select id="deviceId" name="deviceId">
                <option value="">any</option>
                {devices.map((d) => (
                  <option value={d.id} selected={d.id === deviceId}>
                    {d.name}
                  </option>
                ))}
              </select>
            </div>
            <div>
              <label for="filter-principal">Principal</label>
              <input type="text" id="filter-principal" name="principal" value={principal} maxlength={128} />
            </div>
            <div>
              <button type="submit" id="filter">
                Filter
              </button>
            </div>
          </form>
          <p class="muted">
            {shown.length} of the {page.length} {cursor ? 'older ' : 'most recent '}actions on this page match.
          </p>
          <div class="table-wrap">
            <table class="stack" id="actions">
              <thead>
                <tr>
                  <th scope="col">Created</th>
                  <th scope="col">Status</th>
                  <th scope="col">Device</th>
                  <th scope="col">Function</th>
                  <th scope="col">Arguments</th>
                  <th scope="col">Principal</th>
                  <th scope="col">Outcome</th>
                </tr>
              </thead>
              <tbody>
                {shown.map((a) => (
                  <tr data-action-id={a.id}>
                    <td data-label="Created">
                      <Time ms={a.createdAt} />
                    </td>
                    <td data-label="Status" data-field="status">
                      <strong>{a.status}</strong>
                      {a.cancelReason ? ` (${a.cancelReason})` : ''}
                    </td>
                    <td data-label="Device">{names.get(a.deviceId) ?? a.deviceId}</td>
                    <td data-label="Function">
                      <code>{a.capability}</code>
                    </td>
                    <td data-label="Arguments">
                      <pre>{JSON.stringify(a.arguments)}</pre>
                    </td>
                    <td data-label="Principal">
                      <code>{a.principal}</code>
                    </td>
                    <td data-label="Outcome" data-field="outcome">
                      {a.error ? `${a.error.code}: ${a.error.message}` : a.result !== null ? <pre>{JSON.stringify(a.result)}</pre> : ''}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          {older ? (
            <p>
              <a href={older}>Older actions</a>
            </p>
          ) : null}
          <h2>Export</h2>
          <form method="get" action="/console/activity/export" class="fields">
            <p class="muted">Every action created in the range (days in UTC; both optional), oldest first, as a JSON document.</p>
            <div>
              <label for="since">From (UTC day, included)</label>
              <input type="date" id="since" name="since" />
            </div>
            <div>
              <label for="until">To (UTC day, included)</label>
              <input type="date" id="until" name="until" />
            </div>
            <div>
              <button type="submit" id="export">
                Download the history
              </button>
            </div>
          </form>
        </Page>,
      );
    }),
  );

  app.get(
    '/console/activity/export',
    guards.page(async (c, signed) => {
      const since = dayStart(c.req.query('since'));
      const untilDay = dayStart(c.req.query('until'));
      const answer = await guards.call(signed, operations.exportActions, {
        ...(since !== undefined ? { since } : {}),
        ...(untilDay !== undefined ? { until: untilDay + 86_400_000 } : {}),
      });
      if (answer.kind !== 'stream') throw new Error('actions.export answers a stream');
      return c.body(documentStream(answer, 'json', signed.ctx.log, signed.ctx.requestId), 200, {
        'Content-Type': 'application/json',
        'Content-Disposition': 'attachment; filename="actions.json"',
      });
    }),
  );
}

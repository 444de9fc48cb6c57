import { expireDue } from '../store/action-expiry.js';
import { recallWithdrawn } from '../store/action-withdrawals.js';
import { markQuietDevicesOffline } from '../store/devices.js';
import type { Db } from '../store/driver.js';
import { logSweepFailure } from './errors.js';
import { actionChangeOf } from './action-publishing.js';
import type { Clock, Logger } from './context.js';
import { ONLINE_WINDOW_MS } from './devices.js';
import { announceJournal, type EventHub } from './event-hub.js';

/** Devices reported offline per sweep: a mass outage is reported over a few sweeps, in short statements. */
const OFFLINE_BATCH = 500;

/**
 * Moves queued or received actions past their deadline to `expired` every `intervalMs`, so
 * history is true even for a device that never calls again (reads also expire on the spot).
 * It also recalls handed-out commands whose permission ended without an event, a grant
 * expiring (docs/reference/rules.md "Actions"): `next` refuses such queued ones itself, but a device
 * holding one learns it only from a recall. And it journals `device.offline` for devices
 * quiet for the online window (docs/reference/events.md "Owner events"), which no request would ever reveal.
 * Returns a function that stops the sweep.
 */
export function startExpirySweep(deps: { db: Db; events: EventHub; clock: Clock; log: Logger }, intervalMs: number): () => void {
  let running = false;
  const timer = setInterval(() => {
    if (running) return;
    running = true;
    const started = performance.now();
    // Started inside a promise so that even a synchronous throw (the clock, the driver) is
    // caught below: a timer callback that throws ends the process.
    Promise.resolve()
      .then(async () => {
        const rows = [...(await expireDue(deps.db, deps.clock.now())), ...(await recallWithdrawn(deps.db, null, deps.clock.now()))];
        for (const row of rows) deps.events.publish(actionChangeOf(row));
        const quiet = await markQuietDevicesOffline(deps.db, deps.clock.now() - ONLINE_WINDOW_MS, OFFLINE_BATCH);
        for (const workspaceId of new Set(quiet)) announceJournal(deps, workspaceId);
        // docs/operators/logs-and-metrics.md "Logs": a sweep that changed something is news (info); an idle one is for diagnosis (debug).
        const line = { msg: 'expiry sweep', expired: rows.length, offline: quiet.length, durationMs: Math.round((performance.now() - started) * 100) / 100 };
        if (rows.length + quiet.length > 0) deps.log.info(line);
        else deps.log.debug(line);
      })
      .catch((error: unknown) => logSweepFailure(deps.log, 'expiry sweep failed', error))
      .finally(() => {
        running = false;
      });
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

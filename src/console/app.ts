import type { Context, Hono } from 'hono';
import type { HttpEnv } from '../http/request.js';
import { mountAssets } from './assets.js';
import type { ConsoleDeps } from './deps.js';
import { mountConsoleEvents } from './live-updates.js';
import { mountPending } from './pending-routes.js';
import { mountActionPage } from './screens/action.js';
import { mountDevicePage } from './screens/device.js';
import { mountWebhooks } from './screens/webhooks.js';
import { mountActivity } from './screens/activity.js';
import { mountAgents } from './screens/agents.js';
import { mountApprovals } from './screens/approvals.js';
import { mountAttach } from './screens/attach.js';
import { mountDevices } from './screens/devices.js';
import { mountEnrollments } from './screens/enrollments.js';
import { mountGateways } from './screens/gateways.js';
import { mountGrantConditions } from './screens/grant-conditions.js';
import { mountGrants } from './screens/grants.js';
import { mountService } from './screens/service.js';
import { mountUsage } from './screens/usage.js';
import { createGuards } from './guards.js';
import { mountSignIn } from './sign-in.js';

/**
 * The owner console (docs/owners/console.md "Owner console"): server-rendered pages at /console on the API's
 * own origin, signed in with the consent page's owner session. Every page action is an
 * operation of the registry called through `invoke` with the owner's credential, exactly as
 * the REST route would call it; the console has no private API.
 */

/**
 * Scripts and styles from this origin only (the two served files, no inline code), images from
 * here (icons, favicon) or data: (the setup token's QR code), the web app manifest from here, the event stream read from here only, forms posted
 * here only, never framed.
 */
export const CONSOLE_CSP =
  "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

export function mountConsole(app: Hono<HttpEnv>, deps: ConsoleDeps): void {
  const headers = async (c: Context, next: () => Promise<void>) => {
    await next();
    c.header('Content-Security-Policy', CONSOLE_CSP);
    c.header('X-Frame-Options', 'DENY');
    c.header('X-Content-Type-Options', 'nosniff');
    // `same-origin`, not `no-referrer`: with the latter browsers send `Origin: null` on form
    // posts, and the posts check their Origin.
    c.header('Referrer-Policy', 'same-origin');
    c.header('Cross-Origin-Opener-Policy', 'same-origin');
    if (!c.res.headers.has('Cache-Control')) c.header('Cache-Control', 'no-store');
  };
  app.use('/console', headers);
  app.use('/console/*', headers);

  mountAssets(app);
  const guards = createGuards(deps);
  mountSignIn(app, deps, guards);
  mountDevices(app, guards);
  mountDevicePage(app, guards);
  mountAttach(app, guards);
  mountAgents(app, guards);
  mountGrantConditions(app, guards);
  mountGrants(app, guards);
  mountGateways(app, guards);
  mountEnrollments(app, guards);
  mountApprovals(app, guards);
  mountActivity(app, guards);
  mountUsage(app, guards);
  mountService(app, guards);
  mountConsoleEvents(app, guards);
  mountPending(app, guards);
  mountActionPage(app, guards);
  mountWebhooks(app, guards);
}

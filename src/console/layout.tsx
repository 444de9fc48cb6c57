import type { Child } from 'hono/jsx';
import { ASSETS } from './assets.js';
import { OWNER_LIVE_SCRIPT, PendingBadge } from './pending.js';
import { STATIC, type IconName } from './icons.js';

/**
 * The console's page frame and the small pieces every screen uses. hono/jsx escapes every
 * interpolated string, so device names, function descriptions, argument values and agent names
 * (all chosen by someone other than the owner) are text, never markup; no page writes raw HTML.
 */

export type Screen = 'devices' | 'attach' | 'agents' | 'grants' | 'gateways' | 'enrollments' | 'approvals' | 'activity' | 'webhooks' | 'usage' | 'service';

/** The screens in the navigation; at phone width it is a bar at the bottom with approvals first. */
const NAV: { screen: Screen; href: string; label: string; icon: IconName }[] = [
  { screen: 'devices', href: '/console', label: 'Devices', icon: 'cpu' },
  { screen: 'attach', href: '/console/attach', label: 'Attach', icon: 'circle-plus' },
  { screen: 'agents', href: '/console/agents', label: 'Agents', icon: 'bot' },
  { screen: 'grants', href: '/console/grants', label: 'Grants', icon: 'key-round' },
  { screen: 'gateways', href: '/console/gateways', label: 'Gateways', icon: 'network' },
  { screen: 'enrollments', href: '/console/enrollments', label: 'Enrollment', icon: 'ticket' },
  { screen: 'approvals', href: '/console/approvals', label: 'Approvals', icon: 'inbox' },
  { screen: 'activity', href: '/console/activity', label: 'Activity', icon: 'activity' },
  { screen: 'webhooks', href: '/console/webhooks', label: 'Webhooks', icon: 'webhook' },
  { screen: 'usage', href: '/console/usage', label: 'Usage', icon: 'gauge' },
  { screen: 'service', href: '/console/service', label: 'Control', icon: 'settings' },
];

/** Who is signed in, and the token their forms carry (src/console/app.ts checks it on every post). */
export interface Viewer {
  subject: string;
  csrf: string;
  /** Actions awaiting the owner's approval when the page was rendered (the script keeps it current). */
  pending?: number;
  /** The owner has paused device control for the workspace (src/domain/device-controls.ts). */
  paused?: boolean;
}

/** An icon of the console's set (src/console/icons.ts), drawn in the text colour; decorative, so hidden from screen readers. */
export function Icon(props: { name: IconName }) {
  return <span class={`icon icon-${props.name}`} aria-hidden="true"></span>;
}

/** A plain word on the screen with the API's term in its tooltip, e.g. "agent" for `principal`. */
export function Term(props: { api: string; children: Child }) {
  return (
    <span class="term" title={`In the API: ${props.api}`}>
      {props.children}
    </span>
  );
}

/**
 * `live` marks a page the script keeps current from the owner's event stream
 * (`/console/events`); without script the page is what the server rendered, and a reload shows
 * the truth.
 */
export function Page(props: { title: string; viewer?: Viewer | undefined; screen?: Screen; refreshTo?: string; live?: boolean; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <meta name="color-scheme" content="light dark" />
        <meta name="theme-color" content="#1d4ed8" />
        {props.refreshTo ? <meta http-equiv="refresh" content={`0;url=${props.refreshTo}`} /> : null}
        <title>{`${props.title} · Owner console`}</title>
        <link rel="icon" href={STATIC.favicon.path} type="image/svg+xml" />
        <link rel="icon" href={STATIC.png192.path} type="image/png" sizes="192x192" />
        <link rel="apple-touch-icon" href={STATIC.png192.path} />
        <link rel="manifest" href={STATIC.manifest.path} />
        <link rel="stylesheet" href={ASSETS.css.path} />
        <script src={ASSETS.js.path} defer></script>
        <script src={OWNER_LIVE_SCRIPT.path} defer></script>
      </head>
      <body data-live={props.live ? 'true' : undefined}>
        <a class="skip" href="#main">
          Skip to the page
        </a>
        <header class="top">
          <a class="brand" href="/console">
            <span class="brand-mark">
              <Icon name="shield-check" />
            </span>
            Owner console
          </a>
          {props.viewer ? (
            <nav aria-label="Console" class="console">
              <ul>
                {NAV.map((item) => (
                  <li class={item.screen === 'approvals' ? 'first-on-phone' : undefined}>
                    <a href={item.href} aria-current={item.screen === props.screen ? 'page' : undefined}>
                      <Icon name={item.icon} />
                      {item.label}
                      {item.screen === 'approvals' ? <PendingBadge count={props.viewer?.pending ?? 0} /> : null}
                    </a>
                  </li>
                ))}
              </ul>
            </nav>
          ) : null}
          {props.viewer ? (
            <form method="post" action="/console/sign-out" class="account">
              <span class="muted who">
                Signed in as <strong id="signed-in-as">{props.viewer.subject}</strong>
              </span>
              <input type="hidden" name="csrf" value={props.viewer.csrf} />
              <button type="submit" id="sign-out" class="small">
                <Icon name="log-out" />
                Sign out
              </button>
            </form>
          ) : null}
        </header>
        <main id="main">
          {props.viewer?.paused && props.screen !== 'service' ? (
            <p class="warning" id="paused-banner">
              <Icon name="circle-pause" /> <strong>Device control is paused:</strong> agents are refused and devices are handed nothing.{' '}
              <a href="/console/service">Resume on the Control screen</a>
            </p>
          ) : null}
          <h1>{props.title}</h1>
          {props.children}
        </main>
      </body>
    </html>
  );
}

/** A time from the API (Unix ms): UTC on the server, the owner's local time once the script ran. */
export function Time(props: { ms: number | null; never?: string }) {
  if (props.ms === null) return <span>{props.never ?? 'never'}</span>;
  const iso = new Date(props.ms).toISOString();
  return (
    <time datetime={iso} data-ms={String(props.ms)}>
      {`${iso.slice(0, 16).replace('T', ' ')} UTC`}
    </time>
  );
}

/** A message above the screen: what just happened, or why it did not. */
export function Flash(props: { error?: string | undefined; issues?: { path: string; message: string }[] | undefined; done?: string | undefined }) {
  if (props.error) {
    return (
      <div class="error" role="alert" id="error">
        <p>
          <strong>Not done:</strong> {props.error}
        </p>
        {props.issues && props.issues.length > 0 ? (
          <ul>
            {props.issues.map((issue) => (
              <li>
                <code>{issue.path || '(request)'}</code>: {issue.message}
              </li>
            ))}
          </ul>
        ) : null}
      </div>
    );
  }
  if (props.done) {
    return (
      <p class="notice" role="status" id="done">
        {props.done}
      </p>
    );
  }
  return null;
}

/** A secret shown once: the text, a copy button the script reveals, and where its result is announced. */
export function Secret(props: { id: string; label: string; value: string }) {
  return (
    <div class="secret">
      <p>
        <strong>{props.label}</strong> (shown once: it is not stored readable and cannot be shown again)
      </p>
      <p>
        <code id={props.id}>{props.value}</code>
      </p>
      <button type="button" hidden data-copy-target={props.id} data-copy-status={`${props.id}-status`} id={`${props.id}-copy`}>
        Copy
      </button>{' '}
      <span id={`${props.id}-status`} role="status"></span>
    </div>
  );
}

/** A hidden CSRF field: every state-changing form carries one. */
export function Csrf(props: { viewer: Viewer }) {
  return <input type="hidden" name="csrf" value={props.viewer.csrf} />;
}

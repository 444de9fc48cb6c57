import type { Child } from 'hono/jsx';
import type { ErrorIssue } from '../domain/errors.js';
import { consentPick, type ConsentView } from '../domain/oauth/authorize.js';
import { ConsentConditions, NO_TYPED_CONDITIONS, type TypedConditions } from './consent-conditions.js';

/**
 * Server-rendered pages of the authorization server (hono/jsx, no script, no front-end
 * build). hono/jsx escapes every interpolated string, so client-chosen names cannot inject
 * markup; the CSP set in src/oauth/app.ts forbids scripts and framing anyway.
 */

/**
 * The console's style sheet, by its URL (src/console/assets.ts serves it): the sign-in and
 * consent pages look like the console without importing it, and PAGE_CSP allows it as 'self'.
 */
export const CONSOLE_STYLESHEET = '/console/assets/console.css';

function Layout(props: { title: string; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <meta name="color-scheme" content="light dark" />
        <title>{`${props.title} · Owner console`}</title>
        <link rel="stylesheet" href={CONSOLE_STYLESHEET} />
      </head>
      <body>
        <header class="top">
          <span class="brand">Owner console</span>
        </header>
        <main id="main">{props.children}</main>
      </body>
    </html>
  );
}

export function ErrorPage(props: { title: string; message: string }) {
  return (
    <Layout title={props.title}>
      <h1>{props.title}</h1>
      <p class="error" id="error">
        {props.message}
      </p>
      <p class="muted">You were not sent back to the application, because this request could not be trusted.</p>
    </Layout>
  );
}

/**
 * How the owner may sign in here, as on the console's sign-in page: the development form (a
 * name, no password: development only, and not when DEVELOPMENT_SIGN_IN=code, whose one-time
 * code the console's page asks for) and pasting an owner session token (always).
 */
export type SignInMode = 'development' | 'development-code' | 'external';

export function SignInPage(props: { next: string | undefined; mode: SignInMode; error?: string | undefined }) {
  return (
    <Layout title="Sign in">
      <h1>Sign in as the owner</h1>
      {props.error ? (
        <p class="error" role="alert" id="error">
          {props.error}
        </p>
      ) : null}
      {props.mode === 'development' ? (
        <section aria-labelledby="development-heading">
          <h2 id="development-heading">Development sign-in</h2>
          <p class="muted">This service runs its development identity provider: name the owner to sign in as. Never expose it beyond your machine.</p>
          <form method="post" action="/oauth/sign-in/development" class="fields">
            <div>
              <label for="sub">Owner name</label>
              <input type="text" id="sub" name="sub" required maxlength={128} autocomplete="username" placeholder="alice" />
            </div>
            {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
            <div>
              <button type="submit" class="primary" id="development-sign-in">
                Sign in
              </button>
            </div>
          </form>
        </section>
      ) : null}
      {props.mode === 'development-code' ? (
        <p class="notice" id="development-code">
          Development sign-in asks for the one-time code the service's log prints: sign in on <a href="/console/sign-in">the console's sign-in page</a>, then
          come back to the application and start again.
        </p>
      ) : null}
      <section aria-labelledby="token-heading">
        <h2 id="token-heading">With an owner session token</h2>
        <p class="muted">
          {props.mode === 'external' ? (
            'Paste an owner session token (a JWT) from your identity provider.'
          ) : (
            <>
              Create one with <code>npm run owner-token -- --sub YOUR-NAME</code> and paste it here.
            </>
          )}
        </p>
        <form method="post" action="/oauth/sign-in" class="fields">
          <div>
            <label for="token">Owner session token</label>
            <textarea id="token" name="token" rows={4} required autocomplete="off" spellcheck={false}></textarea>
          </div>
          {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
          <div>
            <button type="submit" id="sign-in">
              Sign in
            </button>
          </div>
        </form>
      </section>
    </Layout>
  );
}

export function SignedInPage(props: { subject: string }) {
  return (
    <Layout title="Signed in">
      <h1>Signed in</h1>
      <p>
        You are signed in as <strong>{props.subject}</strong>. Return to the application to continue.
      </p>
    </Layout>
  );
}

const SCOPE_TEXT = {
  read: 'read: list devices and call read functions',
  act: 'act: also call control functions (they change devices)',
} as const;

const expiryText = (seconds: number) => (seconds % 86_400 === 0 ? `${seconds / 86_400} days` : `${Math.round(seconds / 3600)} hours`);

export function ConsentPage(props: {
  view: ConsentView;
  subject: string;
  csrf: string;
  fields: Record<string, string>;
  error?: string | undefined;
  /** What the owner typed in the conditions fields, and the issues the grant operation found in them. */
  conditions?: { typed: TypedConditions; issues: readonly ErrorIssue[] } | undefined;
  /** The picks the owner had checked (`<device id>:<function>`), kept when the page comes back. */
  picked?: ReadonlySet<string> | undefined;
}) {
  const { view } = props;
  return (
    <Layout title={`Allow ${view.clientName}?`}>
      <h1>
        Allow <span id="client-name">{view.clientName}</span> to use your devices?
      </h1>
      <p class="muted">Signed in as {props.subject}.</p>
      {props.error ? (
        <p class="error" role="alert" id="error">
          {props.error}
        </p>
      ) : null}
      <dl>
        <dt>Client</dt>
        <dd>
          {view.clientName}
          {view.clientUri ? <span class="muted"> ({view.clientUri})</span> : null}
          <br />
          <span class="muted">
            client id <code>{view.clientId}</code>
            {view.source === 'metadata-document' ? ' (client metadata document)' : view.source === 'dynamic' ? ' (dynamically registered)' : ''}
          </span>
        </dd>
        <dt>Returns to</dt>
        <dd id="redirect-host">{view.redirectHost}</dd>
        <dt>Acts as</dt>
        <dd>
          principal <code id="principal">{view.principal}</code>
        </dd>
        <dt>Asks for</dt>
        <dd id="scopes">
          {view.requested === 'act' ? (
            <ul>
              <li>{SCOPE_TEXT.read}</li>
              <li>{SCOPE_TEXT.act}</li>
            </ul>
          ) : (
            <ul>
              <li>{SCOPE_TEXT.read}</li>
            </ul>
          )}
          {view.granted !== view.requested ? <p class="warning">This client's ceiling is read: the token will carry read only.</p> : null}
        </dd>
      </dl>
      {view.loopbackOnly ? (
        <p class="warning" id="loopback-warning">
          This client receives the authorization on this computer ({view.redirectHost}). Approve only if you just started it yourself: any program listening
          there gets the access.
        </p>
      ) : null}
      <h2>Devices this principal is granted</h2>
      <GrantedDevices view={view} />
      <form method="post" action="/oauth/authorize">
        {Object.entries(props.fields).map(([name, value]) => (
          <input type="hidden" name={name} value={value} />
        ))}
        <input type="hidden" name="csrf" value={props.csrf} />
        <OfferedFunctions view={view} picked={props.picked} />
        {view.offered.length > 0 ? <ConsentConditions typed={props.conditions?.typed ?? NO_TYPED_CONDITIONS} issues={props.conditions?.issues ?? []} /> : null}
        <DecisionButtons view={view} />
      </form>
    </Layout>
  );
}

/** Approve (the primary button), Approve read only when the client may act, and Deny. */
function DecisionButtons({ view }: { view: ConsentView }) {
  return (
    <div class="toolbar">
      <button type="submit" name="decision" value="approve" id="approve" class="primary">
        Approve
      </button>
      {view.requested === 'act' && view.granted === 'act' ? (
        <button type="submit" name="decision" value="approve-read" id="approve-read">
          Approve read only
        </button>
      ) : null}
      <button type="submit" name="decision" value="deny" id="deny" class="danger">
        Deny
      </button>
    </div>
  );
}

/**
 * The workspace's functions the principal is not granted yet, each unchecked: what the owner
 * checks is granted with the approval, with the terms the page states.
 */
function OfferedFunctions({ view, picked }: { view: ConsentView; picked?: ReadonlySet<string> | undefined }) {
  if (view.offered.length === 0) return null;
  const { approval, ttlSeconds } = view.grantDefaults;
  return (
    <fieldset id="offered">
      <legend>Also grant device functions (optional)</legend>
      <p class="muted" id="grant-terms">
        Each function you check is granted to <code>{view.principal}</code> when you approve, with approval <strong>{approval}</strong> (every action waits for
        your yes in the console) and an expiry in <strong>{expiryText(ttlSeconds)}</strong>; change either in the console&apos;s Grants screen later.
        {view.granted === 'act'
          ? ' A control function cannot be granted with "Approve read only".'
          : ' The token carries read only: control functions cannot be granted.'}
      </p>
      {view.offered.map((device) => (
        <div class="device">
          <strong>{device.name}</strong>
          <ul class="tree">
            {device.functions.map((fn) => {
              const id = `grant-${device.id}-${fn.name}`;
              return (
                <li>
                  <input
                    type="checkbox"
                    id={id}
                    name={`grant:${device.id}:${fn.name}`}
                    value="on"
                    checked={picked?.has(consentPick(device.id, fn.name)) === true}
                    disabled={fn.kind === 'control' && view.granted !== 'act'}
                  />{' '}
                  <label for={id}>
                    <code class="fn">{fn.name}</code> {fn.kind === 'control' ? <span class="badge control">control</span> : <span class="badge">read</span>}
                  </label>
                </li>
              );
            })}
          </ul>
        </div>
      ))}
      {view.offerTruncated ? <p class="muted">More functions than this page lists: grant the others in the console.</p> : null}
    </fieldset>
  );
}

/** The devices the principal is granted, with each function and whether the token's scope reaches it. */
function GrantedDevices({ view }: { view: ConsentView }) {
  return view.devices.length === 0 ? (
    <p id="devices" class="muted">
      None yet. Scopes are a ceiling only: the client reaches no device until you grant <code>{view.principal}</code> device functions, here below or in the
      console.
    </p>
  ) : (
    <ul id="devices" class="devices">
      {view.devices.map((device) => (
        <li>
          <strong>{device.name}</strong>:{' '}
          {device.functions.map((fn, index) => (
            <>
              {index > 0 ? ', ' : ''}
              {fn.name}
              {fn.kind === 'control' ? (view.granted === 'act' ? ' (control)' : ' (control, not with read)') : ''}
            </>
          ))}
        </li>
      ))}
    </ul>
  );
}

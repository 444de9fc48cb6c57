import type { Child } from 'hono/jsx';
import type { ConsentView } from '../domain/oauth/authorize.js';

/**
 * Server-rendered pages of the authorization server (hono/jsx, no script, no front-end
 * build). hono/jsx escapes every interpolated string, so client-chosen names cannot inject
 * markup; the CSP set in src/oauth/app.ts forbids scripts and framing anyway.
 */

const STYLE = `
  body { font: 16px/1.5 system-ui, sans-serif; max-width: 40rem; margin: 2rem auto; padding: 0 1rem; color: #1b1b1b; }
  h1 { font-size: 1.4rem; } .muted { color: #555; } code { background: #f2f2f2; padding: 0 .25rem; }
  .warning { border-left: 4px solid #c77700; background: #fff6e5; padding: .5rem 1rem; }
  .error { border-left: 4px solid #b00020; background: #fdecee; padding: .5rem 1rem; }
  dl { display: grid; grid-template-columns: max-content 1fr; gap: .25rem 1rem; } dt { font-weight: 600; }
  ul.devices { padding-left: 1.2rem; } button { font-size: 1rem; padding: .4rem 1.2rem; margin-right: .5rem; }
  textarea { width: 100%; font-family: monospace; }
`;

function Layout(props: { title: string; children: Child }) {
  return (
    <html lang="en">
      <head>
        <meta charset="utf-8" />
        <meta name="viewport" content="width=device-width, initial-scale=1" />
        <meta name="referrer" content="same-origin" />
        <title>{props.title}</title>
        <style>{STYLE}</style>
      </head>
      <body>{props.children}</body>
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

export function SignInPage(props: { next: string | undefined; mode: 'development' | 'external'; error?: string | undefined }) {
  return (
    <Layout title="Sign in">
      <h1>Sign in as the owner</h1>
      {props.error ? (
        <p class="error" id="error">
          {props.error}
        </p>
      ) : null}
      {props.mode === 'development' ? (
        <p>
          This service runs its development identity provider. Create an owner session with <code>npm run owner-token -- --sub YOUR-NAME</code> and paste the
          token it prints.
        </p>
      ) : (
        <p>Paste an owner session token from your identity provider.</p>
      )}
      <form method="post" action="/oauth/sign-in">
        <label for="token">Owner session token</label>
        <textarea id="token" name="token" rows={5} required autocomplete="off" spellcheck={false}></textarea>
        {props.next ? <input type="hidden" name="next" value={props.next} /> : null}
        <p>
          <button type="submit" id="sign-in">
            Sign in
          </button>
        </p>
      </form>
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

export function ConsentPage(props: { view: ConsentView; subject: string; csrf: string; fields: Record<string, string> }) {
  const { view } = props;
  return (
    <Layout title={`Allow ${view.clientName}?`}>
      <h1>
        Allow <span id="client-name">{view.clientName}</span> to use your devices?
      </h1>
      <p class="muted">Signed in as {props.subject}.</p>
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
        <button type="submit" name="decision" value="approve" id="approve">
          Approve
        </button>
        {view.requested === 'act' && view.granted === 'act' ? (
          <button type="submit" name="decision" value="approve-read" id="approve-read">
            Approve read only
          </button>
        ) : null}
        <button type="submit" name="decision" value="deny" id="deny">
          Deny
        </button>
      </form>
    </Layout>
  );
}

/** The devices the principal is granted, with each function and whether the token's scope reaches it. */
function GrantedDevices({ view }: { view: ConsentView }) {
  return view.devices.length === 0 ? (
    <p id="devices" class="muted">
      None yet. Scopes are a ceiling only: the client reaches no device until you grant <code>{view.principal}</code> device functions.
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

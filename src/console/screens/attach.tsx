import type { Context, Hono } from 'hono';
import QRCode from 'qrcode';
import type { z } from 'zod';
import { operations } from '../../domain/registry.js';
import type { connection, newConnection } from '../../domain/schemas.js';
import { requestBaseUrl } from '../../http/base-url.js';
import type { HttpEnv } from '../../http/request.js';
import type { Guards, Signed } from '../guards.js';
import { Csrf, Flash, Page, Secret, Time, type Viewer } from '../layout.js';

/** Attach a device: a setup token shown once, with a copy button and a QR code of it; the tokens still live, revocable. */

type Connection = z.infer<typeof connection>;
type NewConnection = z.infer<typeof newConnection>;

/**
 * What the attach QR code holds (docs/devices/wire-protocol.md "Attach from a QR code"): the
 * service's URL with the setup token in the fragment, `<service URL>/#setup-token=<token>`, so
 * a device with a camera learns both where to attach and with what, and a phone that opens it
 * shows the service's front door without sending the token anywhere.
 */
export const attachQrText = (baseUrl: string, token: string) => `${baseUrl}/#setup-token=${encodeURIComponent(token)}`;

/** A QR code as an SVG image (rendered here, never by a third party): a data: URL the CSP admits as an image. */
export async function qrImage(text: string): Promise<string> {
  const svg = await QRCode.toString(text, { type: 'svg', errorCorrectionLevel: 'M', margin: 2 });
  return `data:image/svg+xml;base64,${Buffer.from(svg).toString('base64')}`;
}

const TTL_CHOICES = [
  { seconds: 600, label: '10 minutes' },
  { seconds: 3600, label: '1 hour' },
  { seconds: 86_400, label: '1 day' },
];

// eslint-disable-next-line max-lines-per-function -- one page's markup, read top to bottom as the page shows
function AttachPage(props: {
  viewer: Viewer;
  tokens: Connection[];
  baseUrl: string;
  created?: { token: NewConnection; qr: string } | undefined;
  error?: string | undefined;
  issues?: { path: string; message: string }[] | undefined;
  done?: string | undefined;
}) {
  const live = props.tokens.filter((t) => !t.revoked);
  return (
    <Page title="Attach a device" viewer={props.viewer} screen="attach">
      <Flash error={props.error} issues={props.issues} done={props.done} />
      {props.created ? (
        <section aria-labelledby="created-heading">
          <h2 id="created-heading">Setup token for {props.created.token.name}</h2>
          <Secret id="setup-token" label="Setup token" value={props.created.token.token} />
          <p>
            <img class="qr" id="setup-token-qr" src={props.created.qr} alt="QR code of the service URL with the setup token, for a device with a camera" />
          </p>
          <p>
            It attaches up to {props.created.token.deviceLimit} device{props.created.token.deviceLimit === 1 ? '' : 's'} until{' '}
            <Time ms={props.created.token.expiresAt} />, and can do nothing else. On the device (or with the simulated one):
          </p>
          <pre>{`npm run device -- --setup-token ${props.created.token.token} --url ${props.baseUrl}`}</pre>
        </section>
      ) : null}
      <section aria-labelledby="create-heading">
        <h2 id="create-heading">New setup token</h2>
        <form method="post" action="/console/attach" class="fields">
          <Csrf viewer={props.viewer} />
          <div>
            <label for="name">Name (what you are attaching)</label>
            <input type="text" id="name" name="name" required maxlength={64} placeholder="Hall lamp" />
          </div>
          <div>
            <label for="ttlSeconds">Valid for</label>
            <select id="ttlSeconds" name="ttlSeconds">
              {TTL_CHOICES.map((choice) => (
                <option value={String(choice.seconds)}>{choice.label}</option>
              ))}
            </select>
          </div>
          <div>
            <label for="deviceLimit">Devices it may attach</label>
            <input type="number" id="deviceLimit" name="deviceLimit" min={1} max={20} value="1" required />
          </div>
          <div>
            <button type="submit" class="primary" id="create-setup-token">
              Create setup token
            </button>
          </div>
        </form>
      </section>
      <section aria-labelledby="tokens-heading">
        <h2 id="tokens-heading">Setup tokens</h2>
        {live.length === 0 ? (
          <p class="muted">None.</p>
        ) : (
          <div class="table-wrap">
            <table class="stack" id="setup-tokens">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Token starts</th>
                  <th scope="col">Attached</th>
                  <th scope="col">Expires</th>
                  <th scope="col">
                    <span class="muted">Action</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {live.map((token) => (
                  <tr>
                    <td data-label="Name">{token.name}</td>
                    <td data-label="Token starts">
                      <code>{token.tokenPrefix}…</code>
                    </td>
                    <td data-label="Attached">
                      {token.attachedDeviceCount ?? 0} of {token.deviceLimit}
                    </td>
                    <td data-label="Expires">
                      <Time ms={token.expiresAt} never="never" />
                    </td>
                    <td>
                      <form method="post" action={`/console/attach/${token.id}/revoke`} class="inline">
                        <Csrf viewer={props.viewer} />
                        <button type="submit" class="danger" aria-label={`Revoke setup token ${token.name}`}>
                          Revoke
                        </button>
                      </form>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
        <p class="muted">Revoking a setup token stops further attaches; devices it attached stay attached.</p>
      </section>
    </Page>
  );
}

export function mountAttach(app: Hono<HttpEnv>, guards: Guards): void {
  // The address the owner reached the console at names the service in the device command (src/http/base-url.ts).
  const baseUrlOf = (c: Context) => requestBaseUrl(c, guards.deps.config);
  const tokens = async (signed: Signed) => await guards.invoke(signed, operations.listSetupTokens, {});

  app.get(
    '/console/attach',
    guards.page(async (c, signed) =>
      c.html(
        <AttachPage
          viewer={signed.viewer}
          tokens={await tokens(signed)}
          baseUrl={baseUrlOf(c)}
          done={c.req.query('done') === 'revoked' ? 'Setup token revoked.' : undefined}
        />,
      ),
    ),
  );

  app.post(
    '/console/attach',
    guards.action(async (c, signed, form) => {
      const created = await guards.attempt(signed, operations.createSetupToken, {
        name: form.get('name') ?? '',
        ttlSeconds: Number(form.get('ttlSeconds') ?? 600),
        deviceLimit: Number(form.get('deviceLimit') ?? 1),
      });
      if (!created.ok) {
        return c.html(
          <AttachPage viewer={signed.viewer} tokens={await tokens(signed)} baseUrl={baseUrlOf(c)} error={created.message} issues={created.issues} />,
          created.status,
        );
      }
      // Shown in the answer to this post and nowhere else: reloading does not show it again.
      const qr = await qrImage(attachQrText(baseUrlOf(c), created.value.token));
      return c.html(<AttachPage viewer={signed.viewer} tokens={await tokens(signed)} baseUrl={baseUrlOf(c)} created={{ token: created.value, qr }} />);
    }),
  );

  app.post(
    '/console/attach/:connectionId/revoke',
    guards.action(async (c, signed) => {
      await guards.invoke(signed, operations.revokeSetupToken, { connectionId: c.req.param('connectionId') });
      return c.redirect('/console/attach?done=revoked', 303);
    }),
  );
}

import http from 'node:http';
import { Client, StreamableHTTPClientTransport, UnauthorizedError } from '@modelcontextprotocol/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { connect, MODERN } from '../helpers/mcp-client.js';
import { qrImage } from '../../src/console/screens/attach.js';
import { decide, freePort, MemoryOAuthProvider, ownerCookie } from '../helpers/oauth.js';
import { startTestServer, useServer, type TestServer } from '../helpers/server.js';

/**
 * With PUBLIC_BASE_URL unset the service names itself by the loopback alias a request came to
 * (127.0.0.1, localhost, [::1] on its port), and the aliases are one resource: the official MCP
 * client SDK's OAuth flow completes at either, and a token from one is valid at the other. Any
 * other Host gets the default http://localhost:PORT, never itself.
 */

const CALLBACK = 'http://127.0.0.1:9/callback';

let port: number;
const server = useServer(async (): Promise<TestServer> => {
  port = await freePort();
  return startTestServer({ env: { PORT: String(port), AUTH_FAILURES_PER_MINUTE: '1000' } });
});
let owner: string;

beforeAll(async () => {
  owner = await server.ownerToken('loopback-owner');
});

/** The SDK's whole flow at `base`: 401, discovery, registration, consent, code for token. */
async function authorizeAt(base: string): Promise<MemoryOAuthProvider> {
  const provider = new MemoryOAuthProvider('Loopback MCP client', CALLBACK);
  const cookie = await ownerCookie(base, owner);
  const transport = new StreamableHTTPClientTransport(new URL(`${base}/mcp`), { authProvider: provider });
  const mcp = new Client({ name: 'loopback', version: '1.0.0' }, { versionNegotiation: { mode: { pin: MODERN } } });
  await expect(mcp.connect(transport)).rejects.toBeInstanceOf(UnauthorizedError);
  const authorization = provider.authorizationUrls[0]!;
  expect(authorization.origin).toBe(base);
  expect(authorization.searchParams.get('resource')).toBe(`${base}/mcp`);
  const back = await decide(authorization.toString(), cookie, 'approve-read');
  expect(back.searchParams.get('iss')).toBe(base);
  await transport.finishAuth(back.searchParams);
  expect(provider.stored?.access_token).toMatch(/^dfc_oauth_/);
  return provider;
}

/** GET `path` on the service's port with the Host header given, as a client that typed another name would send it. */
function getWithHost(path: string, host: string): Promise<{ status: number; headers: http.IncomingHttpHeaders; body: string }> {
  return new Promise((resolve, reject) => {
    const request = http.get({ host: '127.0.0.1', port, path, headers: { host } }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
    });
    request.on('error', reject);
  });
}

describe('the OAuth flow at each loopback alias (PUBLIC_BASE_URL unset)', () => {
  const at127 = () => `http://127.0.0.1:${port}`;
  const atLocalhost = () => `http://localhost:${port}`;
  let from127: MemoryOAuthProvider;
  let fromLocalhost: MemoryOAuthProvider;

  it('completes at http://127.0.0.1:PORT/mcp', async () => {
    from127 = await authorizeAt(at127());
    const mcp = await connect(at127(), from127.stored!.access_token, 'modern');
    expect((await mcp.listTools()).tools.length).toBeGreaterThan(0);
    await mcp.close();
  });

  it('completes at http://localhost:PORT/mcp', async () => {
    fromLocalhost = await authorizeAt(atLocalhost());
    const mcp = await connect(atLocalhost(), fromLocalhost.stored!.access_token, 'modern');
    expect((await mcp.listTools()).tools.length).toBeGreaterThan(0);
    await mcp.close();
  });

  it('treats the aliases as one resource: a token from one is valid at the other', async () => {
    const atOther = await connect(atLocalhost(), from127.stored!.access_token, 'modern');
    expect((await atOther.listTools()).tools.length).toBeGreaterThan(0);
    await atOther.close();
    const back = await connect(at127(), fromLocalhost.stored!.access_token, 'modern');
    expect((await back.listTools()).tools.length).toBeGreaterThan(0);
    await back.close();
  });

  it('refreshes at the other alias, naming that alias as the resource', async () => {
    const res = await fetch(`${atLocalhost()}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({
        grant_type: 'refresh_token',
        refresh_token: from127.stored!.refresh_token!,
        client_id: from127.client!.client_id,
        resource: `${atLocalhost()}/mcp`,
      }).toString(),
    });
    expect(res.status).toBe(200);
    const refreshed = (await res.json()) as { access_token: string };
    const mcp = await connect(at127(), refreshed.access_token, 'modern');
    expect((await mcp.listTools()).tools.length).toBeGreaterThan(0);
    await mcp.close();
  });
});

describe('how the service names itself by the Host a request came with (PUBLIC_BASE_URL unset)', () => {
  it('names the loopback alias in the protected-resource and authorization-server metadata', async () => {
    for (const alias of ['127.0.0.1', 'localhost', '[::1]']) {
      const base = `http://${alias}:${port}`;
      const resource = await getWithHost('/.well-known/oauth-protected-resource/mcp', `${alias}:${port}`);
      expect(JSON.parse(resource.body)).toMatchObject({ resource: `${base}/mcp`, authorization_servers: [base] });
      const metadata = await getWithHost('/.well-known/oauth-authorization-server', `${alias}:${port}`);
      expect(JSON.parse(metadata.body)).toMatchObject({ issuer: base, token_endpoint: `${base}/oauth/token` });
    }
  });

  it("points the 401's WWW-Authenticate resource_metadata at the alias", async () => {
    for (const base of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
      const mcp = await fetch(`${base}/mcp`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
        body: '{}',
      });
      expect(mcp.status).toBe(401);
      expect(mcp.headers.get('www-authenticate')).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource/mcp"`);
      const rest = await fetch(`${base}/v1/devices`, { headers: { authorization: 'Bearer dfc_agent_unknown' } });
      expect(rest.status).toBe(401);
      expect(rest.headers.get('www-authenticate')).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource"`);
    }
  });

  it('gives a foreign Host, or a loopback name on another port, http://localhost:PORT and never echoes it', async () => {
    for (const host of ['dfc.example.com', `dfc.example.com:${port}`, `evil.test:${port}`, `127.0.0.1:${port + 1}`, `localhost.example.com:${port}`]) {
      const resource = await getWithHost('/.well-known/oauth-protected-resource/mcp', host);
      expect(resource.body).not.toContain(host);
      expect(JSON.parse(resource.body)).toMatchObject({ resource: `http://localhost:${port}/mcp`, authorization_servers: [`http://localhost:${port}`] });
      const metadata = await getWithHost('/.well-known/oauth-authorization-server', host);
      expect(JSON.parse(metadata.body)).toMatchObject({ issuer: `http://localhost:${port}` });
    }
  });

  it("names the alias in the Attach screen's device command and QR code", async () => {
    for (const base of [`http://127.0.0.1:${port}`, `http://localhost:${port}`]) {
      const signedIn = await fetch(`${base}/console/sign-in/token`, {
        method: 'POST',
        redirect: 'manual',
        headers: { origin: base, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: owner }),
      });
      expect(signedIn.status).toBe(303);
      const cookie = signedIn.headers.get('set-cookie')!.split(';')[0]!;
      const page = await (await fetch(`${base}/console/attach`, { headers: { cookie } })).text();
      const csrf = /name="csrf" value="([^"]+)"/.exec(page)![1]!;
      const created = await fetch(`${base}/console/attach`, {
        method: 'POST',
        headers: { cookie, origin: base, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf, name: 'Porch light', ttlSeconds: '600', deviceLimit: '1' }),
      });
      expect(created.status).toBe(200);
      const html = await created.text();
      // The QR code holds the same address with the token: <service URL>/#setup-token=<token>.
      const token = /--setup-token (dfc_setup_\S+) --url/.exec(html)![1]!;
      const qr = /id="setup-token-qr" src="([^"]+)"/.exec(html)![1]!;
      expect(qr).toBe(await qrImage(`${base}/#setup-token=${token}`));
      expect(html).toMatch(new RegExp(`--setup-token dfc_setup_\\S+ --url ${base.replace(/[.[\]]/g, '\\$&')}<`));
    }
  });
});

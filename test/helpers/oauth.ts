import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import type {
  OAuthClientMetadata,
  OAuthClientProvider,
  OAuthDiscoveryState,
  StoredOAuthClientInformation,
  StoredOAuthTokens,
} from '@modelcontextprotocol/client';
import { expect } from 'vitest';
import type { Clock } from '../../src/domain/context.js';
import { startTestServer, useServer, type FileServer, type TestServer } from './server.js';

/** A test server whose public base URL is the address it listens on. */
export type OAuthTestServer = TestServer & { issuer: string; resource: string };

/** A port free right now on 127.0.0.1 (the OS picks it; the caller binds it next). */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as net.AddressInfo;
      server.close(() => resolve(port));
    });
  });
}

/**
 * The test server with PUBLIC_BASE_URL equal to the address it listens on, as OAuth needs:
 * the issuer must be the URL the metadata is served under, and the MCP client checks the
 * protected resource against the URL it connected to.
 */
export async function startOAuthTestServer(options: { clock?: Clock; env?: Record<string, string> } = {}): Promise<OAuthTestServer> {
  const port = await freePort();
  const issuer = `http://127.0.0.1:${port}`;
  const server = await startTestServer({
    ...(options.clock ? { clock: options.clock } : {}),
    env: { PORT: String(port), PUBLIC_BASE_URL: issuer, ...options.env },
  });
  return Object.assign(server, { issuer, resource: `${issuer}/mcp` });
}

/** `startOAuthTestServer(options)` for the test file (or `describe`) that calls it; see `useServer`. */
export function useOAuthTestServer(options: { clock?: Clock; env?: Record<string, string> } = {}): FileServer<OAuthTestServer> {
  return useServer(() => startOAuthTestServer(options));
}

export function pkce(): { verifier: string; challenge: string } {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
}

/** Trades an owner JWT for the consent page's session cookie; returns the Cookie header value. */
export async function ownerCookie(base: string, ownerJwt: string): Promise<string> {
  const res = await fetch(`${base}/oauth/session`, { method: 'POST', headers: { authorization: `Bearer ${ownerJwt}` } });
  expect(res.status).toBe(204);
  const setCookie = res.headers.get('set-cookie') ?? '';
  return setCookie.split(';')[0]!;
}

/** The hidden fields of the consent form, read from the page as a browser would submit them. */
export function consentForm(html: string): Record<string, string> {
  const fields: Record<string, string> = {};
  const form = /<form method="post" action="\/oauth\/authorize">([\s\S]*?)<\/form>/.exec(html);
  if (!form) throw new Error(`no consent form in page: ${html.slice(0, 500)}`);
  for (const match of form[1]!.matchAll(/<input type="hidden" name="([^"]+)" value="([^"]*)"\/?>/g)) {
    fields[match[1]!] = decodeEntities(match[2]!);
  }
  return fields;
}

function decodeEntities(value: string): string {
  return value
    .replace(/&quot;/g, '"')
    .replace(/&#39;/g, "'")
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&');
}

/**
 * Opens an authorization URL as the signed-in owner, then posts the decision from the
 * consent page (the programmatic stand-in for a click). Returns the redirect back to the
 * client; the caller asserts on its parameters.
 */
export async function decide(authorizationUrl: string, cookie: string, decision: 'approve' | 'approve-read' | 'deny' = 'approve'): Promise<URL> {
  const page = await fetch(authorizationUrl, { headers: { cookie }, redirect: 'manual' });
  const html = await page.text();
  if (page.status !== 200) throw new Error(`authorization page answered ${page.status} ${page.headers.get('location') ?? ''} ${html.slice(0, 300)}`);
  const fields = consentForm(html);
  const origin = new URL(authorizationUrl).origin;
  const res = await fetch(`${origin}/oauth/authorize`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin },
    body: new URLSearchParams({ ...fields, decision }).toString(),
    redirect: 'manual',
  });
  if (res.status !== 303) throw new Error(`decision answered ${res.status}: ${(await res.text()).slice(0, 300)}`);
  return new URL(res.headers.get('location')!);
}

export interface TokenAnswer {
  status: number;
  headers: Headers;
  body: any; // the token endpoint's JSON (tokens or an OAuth error); tests assert on it
}

export async function tokenRequest(base: string, form: Record<string, string>, basic?: { id: string; secret: string }): Promise<TokenAnswer> {
  const headers: Record<string, string> = { 'content-type': 'application/x-www-form-urlencoded' };
  if (basic) headers.authorization = `Basic ${Buffer.from(`${encodeURIComponent(basic.id)}:${encodeURIComponent(basic.secret)}`).toString('base64')}`;
  const res = await fetch(`${base}/oauth/token`, { method: 'POST', headers, body: new URLSearchParams(form).toString() });
  const text = await res.text();
  return { status: res.status, headers: res.headers, body: text ? JSON.parse(text) : null };
}

export async function registerClient(base: string, owner: string, body: Record<string, unknown>) {
  const res = await fetch(`${base}/v1/oauth-clients`, {
    method: 'POST',
    headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  const json = (await res.json()) as any; // the NewConnection envelope; tests assert on it
  expect(res.status, JSON.stringify(json)).toBe(201);
  return json.data as {
    id: string;
    principal: string;
    access: 'read' | 'act';
    token: string | null;
    oauth: { clientId: string; applicationId: string; redirectUris: string[]; public: boolean };
  };
}

/** Builds an authorization URL with sensible defaults for this server. */
export function authorizationUrl(issuer: string, params: Record<string, string | undefined>): string {
  const url = new URL(`${issuer}/oauth/authorize`);
  const defaults: Record<string, string | undefined> = {
    response_type: 'code',
    code_challenge_method: 'S256',
    resource: `${issuer}/mcp`,
    state: randomBytes(8).toString('hex'),
  };
  for (const [key, value] of Object.entries({ ...defaults, ...params })) if (value !== undefined) url.searchParams.set(key, value);
  return url.toString();
}

/**
 * The whole authorization code flow for a public client, as an owner approving `read act`
 * on the consent page: authorize, approve, trade the code. Returns the access token.
 */
export async function accessTokenFor(
  server: { issuer: string; resource: string },
  ownerJwt: string,
  clientId: string,
  redirectUri = 'http://127.0.0.1:9/callback',
): Promise<string> {
  const { verifier, challenge } = pkce();
  const cookie = await ownerCookie(server.issuer, ownerJwt);
  const back = await decide(
    authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: redirectUri, code_challenge: challenge, scope: 'read act' }),
    cookie,
  );
  const answer = await tokenRequest(server.issuer, {
    grant_type: 'authorization_code',
    code: back.searchParams.get('code')!,
    redirect_uri: redirectUri,
    code_verifier: verifier,
    resource: server.resource,
    client_id: clientId,
  });
  expect(answer.status, JSON.stringify(answer.body)).toBe(200);
  return answer.body.access_token as string;
}

/**
 * An in-memory OAuthClientProvider for the official MCP client SDK, as a desktop client would
 * keep it on disk: a public client that redirects to `redirectUrl` (never opened: the test
 * approves the consent page itself from `authorizationUrls`).
 */
export class MemoryOAuthProvider implements OAuthClientProvider {
  client: StoredOAuthClientInformation | undefined;
  stored: StoredOAuthTokens | undefined;
  verifier = '';
  discovery: OAuthDiscoveryState | undefined;
  /** The authorization URL the SDK asked to open in a browser, last first. */
  authorizationUrls: URL[] = [];

  constructor(
    readonly clientName: string,
    readonly redirectUrl: string,
    preRegistered?: StoredOAuthClientInformation,
  ) {
    this.client = preRegistered;
  }
  get clientMetadata(): OAuthClientMetadata {
    return {
      client_name: this.clientName,
      redirect_uris: [this.redirectUrl],
      grant_types: ['authorization_code', 'refresh_token'],
      response_types: ['code'],
      token_endpoint_auth_method: 'none',
    };
  }
  clientInformation() {
    return this.client;
  }
  saveClientInformation(info: StoredOAuthClientInformation) {
    this.client = info;
  }
  tokens() {
    return this.stored;
  }
  saveTokens(tokens: StoredOAuthTokens) {
    this.stored = tokens;
  }
  redirectToAuthorization(url: URL) {
    this.authorizationUrls.unshift(url);
  }
  saveCodeVerifier(verifier: string) {
    this.verifier = verifier;
  }
  codeVerifier() {
    return this.verifier;
  }
  saveDiscoveryState(state: OAuthDiscoveryState) {
    this.discovery = state;
  }
  discoveryState() {
    return this.discovery;
  }
}

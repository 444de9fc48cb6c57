import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { attachDevice } from '../helpers/fixtures.js';
import { authorizationUrl, pkce, registerClient, tokenRequest, useOAuthTestServer } from '../helpers/oauth.js';
import { CHROMIUM, CHROMIUM_ARGS } from '../helpers/browser.js';

/**
 * The consent page in a real browser: Debian's headless Chromium driven by playwright-core
 * (.ci/run installs the package when /usr/bin/chromium is missing). The owner signs in with
 * the sign-in form, approves or denies, and the browser lands on the client's redirect URI.
 */

let owner: string;
let browser: BrowserContext;
let userDataDir: string;
let callbacks: http.Server;
let callbackUrl: string;
let clientId: string;
let principal: string;

const server = useOAuthTestServer();

beforeAll(async () => {
  const api = client(server.url);
  owner = await server.ownerToken('browser-owner');
  const lamp = await attachDevice(api, owner, { name: 'Hall lamp' });

  // The client's redirect URI: a loopback listener, as a desktop MCP client would run.
  callbacks = http.createServer((_req, res) => res.writeHead(200, { 'content-type': 'text/plain' }).end('OK, you can close this page.'));
  await new Promise<void>((resolve) => callbacks.listen(0, '127.0.0.1', resolve));
  callbackUrl = `http://127.0.0.1:${(callbacks.address() as { port: number }).port}/callback`;

  const registered = await registerClient(server.issuer, owner, { name: 'Browser Test Client', redirectUris: [callbackUrl], public: true, access: 'act' });
  clientId = registered.oauth.clientId;
  principal = registered.principal;
  await api.post('/v1/grants', { token: owner, body: { principal, deviceId: lamp.id, capabilities: ['get_state', 'set_power'] } });

  userDataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-chromium-'));
  browser = await chromium.launchPersistentContext(userDataDir, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', ...CHROMIUM_ARGS],
  });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  callbacks?.closeAllConnections();
  await new Promise((resolve) => callbacks?.close(resolve));
  if (userDataDir) fs.rmSync(userDataDir, { recursive: true, force: true });
});

describe('consent page in headless Chromium', () => {
  it(
    'signs in, shows client, redirect host, principal, scopes and devices, approves, and lands on the redirect URI with code, state and iss',
    { timeout: 60_000 },
    async () => {
      const { verifier, challenge } = pkce();
      const page = await browser.newPage();
      await page.goto(
        authorizationUrl(server.issuer, {
          client_id: clientId,
          redirect_uri: callbackUrl,
          code_challenge: challenge,
          state: 'browser-state',
          scope: 'read act',
        }),
      );

      // Not signed in yet: the sign-in form, which keeps the authorization request.
      expect(new URL(page.url()).pathname).toBe('/oauth/sign-in');
      await page.fill('#token', owner);
      await Promise.all([page.waitForURL((url) => url.pathname === '/oauth/authorize'), page.click('#sign-in')]);

      expect(await page.textContent('#client-name')).toBe('Browser Test Client');
      expect(await page.textContent('#redirect-host')).toBe(new URL(callbackUrl).host);
      expect(await page.textContent('#principal')).toBe(principal);
      expect(await page.textContent('#scopes')).toContain('act: also call control functions');
      expect(await page.isVisible('#loopback-warning')).toBe(true);
      const devices = await page.textContent('#devices');
      expect(devices).toContain('Hall lamp');
      expect(devices).toContain('set_power');

      await Promise.all([page.waitForURL((url) => url.href.startsWith(callbackUrl)), page.click('#approve')]);
      const landed = new URL(page.url());
      expect(landed.searchParams.get('state')).toBe('browser-state');
      expect(landed.searchParams.get('iss')).toBe(server.issuer);
      const code = landed.searchParams.get('code')!;
      expect(code).toMatch(/^dfc_code_/);

      const tokens = await tokenRequest(server.issuer, {
        grant_type: 'authorization_code',
        client_id: clientId,
        code,
        redirect_uri: callbackUrl,
        code_verifier: verifier,
        resource: server.resource,
      });
      expect(tokens.status).toBe(200);
      expect(tokens.body.scope).toBe('read act');
      await page.close();
    },
  );

  it('denies: lands on the redirect URI with error=access_denied, state and iss, and no code', { timeout: 60_000 }, async () => {
    const page = await browser.newPage();
    // Still signed in from the previous test: the session cookie is in this browser profile.
    await page.goto(
      authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: callbackUrl, code_challenge: pkce().challenge, state: 'deny-state', scope: 'read' }),
    );
    expect(new URL(page.url()).pathname).toBe('/oauth/authorize');
    await Promise.all([page.waitForURL((url) => url.href.startsWith(callbackUrl)), page.click('#deny')]);
    const landed = new URL(page.url());
    expect(landed.searchParams.get('error')).toBe('access_denied');
    expect(landed.searchParams.get('state')).toBe('deny-state');
    expect(landed.searchParams.get('iss')).toBe(server.issuer);
    expect(landed.searchParams.get('code')).toBeNull();
    await page.close();
  });

  it('keeps the session cookie HttpOnly and SameSite=Strict', async () => {
    const cookies = await browser.cookies(server.issuer);
    const session = cookies.find((c) => c.name === 'dfc_session');
    expect(session).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/' });
  });

  it('refuses to be framed: the consent page does not render inside another page', { timeout: 60_000 }, async () => {
    const page = await browser.newPage();
    const framing = http.createServer((_req, res) =>
      res
        .writeHead(200, { 'content-type': 'text/html' })
        .end(
          `<iframe id="f" src="${authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: callbackUrl, code_challenge: pkce().challenge })}"></iframe>`,
        ),
    );
    await new Promise<void>((resolve) => framing.listen(0, '127.0.0.1', resolve));
    try {
      await page.goto(`http://127.0.0.1:${(framing.address() as { port: number }).port}/`, { waitUntil: 'load' });
      const frame = page.frames().find((f) => f !== page.mainFrame());
      const approve = frame ? await frame.$('#approve').catch(() => null) : null;
      expect(approve).toBeNull();
    } finally {
      await page.close();
      framing.closeAllConnections();
      await new Promise((resolve) => framing.close(resolve));
    }
  });
});

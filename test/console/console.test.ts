import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { parseConfig } from '../../src/config.js';
import { grant, queue } from '../helpers/actions.js';
import { client } from '../helpers/api.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { startOAuthTestServer } from '../helpers/oauth.js';
import { openSse, type SseStream } from '../helpers/sse.js';
import type { TestServer } from '../helpers/server.js';

/**
 * The owner console's rules that need no browser (docs/owners/console.md "Owner console"): which sign-ins exist
 * in which mode, the session's end, the CSRF rules on posts, and the OpenID settings. The
 * browser journeys are in test/console/console-browser.test.ts.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
const clock = manualClock();
let dev: TestServer & { issuer: string };
let external: TestServer & { issuer: string };

beforeAll(async () => {
  [dev, external] = await Promise.all([startOAuthTestServer({ env: DEVELOPMENT_ENV, clock }), startOAuthTestServer()]);
});
afterAll(() => Promise.all([dev?.close(), external?.close()]));

/** Signs in with the development form as a browser on the service's own origin would; returns the session cookie. */
async function developmentSignIn(subject: string): Promise<string> {
  const res = await fetch(`${dev.issuer}/console/sign-in/development`, {
    method: 'POST',
    redirect: 'manual',
    headers: { origin: dev.issuer, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ sub: subject }),
  });
  expect(res.status).toBe(303);
  return res.headers.get('set-cookie')!.split(';')[0]!;
}

/** The form token of a signed-in page. */
async function csrfOf(cookie: string): Promise<string> {
  const html = await (await fetch(`${dev.issuer}/console/attach`, { headers: { cookie } })).text();
  return /name="csrf" value="([^"]+)"/.exec(html)![1]!;
}

describe('console sign-in modes', () => {
  it('offers the development form only with the development identity provider', async () => {
    const devPage = await (await fetch(`${dev.issuer}/console/sign-in`)).text();
    expect(devPage).toContain('Development only.');
    // On loopback outside production the development form asks for no one-time code.
    expect(devPage).not.toContain('name="code"');
    const externalPage = await (await fetch(`${external.issuer}/console/sign-in`)).text();
    expect(externalPage).not.toContain('/console/sign-in/development');
    expect(externalPage).toContain('Paste an owner session token');
    const posted = await fetch(`${external.issuer}/console/sign-in/development`, {
      method: 'POST',
      headers: { origin: external.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'sub=mallory',
    });
    expect(posted.status).toBe(404);
    // Without OWNER_OIDC_CLIENT_ID there is no OpenID sign-in either.
    expect((await fetch(`${external.issuer}/console/oidc/start`, { redirect: 'manual' })).status).toBe(404);
  });

  it('signs in with a pasted owner token from the external provider, into the workspace its claim names', async () => {
    const token = await external.ownerToken('dora', { workspace: 'dora-home' });
    const res = await fetch(`${external.issuer}/console/sign-in/token`, {
      method: 'POST',
      redirect: 'manual',
      headers: { origin: external.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token }),
    });
    expect(res.status).toBe(303);
    const cookie = res.headers.get('set-cookie')!;
    expect(cookie).toContain('HttpOnly');
    expect(cookie).toContain('SameSite=Strict');
    const page = await (await fetch(`${external.issuer}/console`, { headers: { cookie: cookie.split(';')[0]! } })).text();
    expect(page).toContain('Signed in as <strong id="signed-in-as">dora</strong>');
  });

  it('refuses a token that is not an owner session, with the sign-in page', async () => {
    const res = await fetch(`${external.issuer}/console/sign-in/token`, {
      method: 'POST',
      headers: { origin: external.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: await external.foreignToken('eve') }),
    });
    expect(res.status).toBe(401);
    expect(await res.text()).toContain('That is not a valid owner session token.');
  });
});

describe('console session', () => {
  it('is the consent page session: the console cookie signs in /oauth pages too, and /oauth/sign-out ends it for the console', async () => {
    const cookie = await developmentSignIn('frank');
    expect(cookie.startsWith('dfc_session=')).toBe(true);
    expect((await fetch(`${dev.issuer}/console`, { headers: { cookie }, redirect: 'manual' })).status).toBe(200);
    const out = await fetch(`${dev.issuer}/oauth/sign-out`, { method: 'POST', headers: { cookie, origin: dev.issuer } });
    expect(out.status).toBe(204);
    const after = await fetch(`${dev.issuer}/console`, { headers: { cookie }, redirect: 'manual' });
    expect(after.status).toBe(302);
    expect(after.headers.get('location')).toBe('/console/sign-in');
  });

  it('ends when the owner session expires (eight hours at most)', async () => {
    const cookie = await developmentSignIn('grace');
    expect((await fetch(`${dev.issuer}/console/agents`, { headers: { cookie }, redirect: 'manual' })).status).toBe(200);
    clock.advance(8 * 3_600_000);
    const after = await fetch(`${dev.issuer}/console/agents`, { headers: { cookie }, redirect: 'manual' });
    expect(after.status).toBe(302);
    const post = await fetch(`${dev.issuer}/console/attach`, {
      method: 'POST',
      headers: { cookie, origin: dev.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=late',
    });
    expect(post.status).toBe(403);
    // Back to the real time: sessions are bounded by their token's expiry, which jose judges by it.
    clock.set(Date.now());
  });
});

describe('console posts (CSRF)', () => {
  it('refuses another origin even with the session cookie and a valid form token', async () => {
    const cookie = await developmentSignIn('heidi');
    const csrf = await csrfOf(cookie);
    const post = (origin: string) =>
      fetch(`${dev.issuer}/console/attach`, {
        method: 'POST',
        headers: { cookie, origin, 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ csrf, name: 'Porch light', ttlSeconds: '600', deviceLimit: '1' }),
      });
    expect((await post('https://evil.example')).status).toBe(403);
    const same = await post(dev.issuer);
    expect(same.status).toBe(200);
    expect(await same.text()).toContain('dfc_setup_');
  });

  it('refuses a form token of another session, and a sign-in posted from another site', async () => {
    const [mine, theirs] = await Promise.all([developmentSignIn('ivan'), developmentSignIn('judy')]);
    const res = await fetch(`${dev.issuer}/console/attach`, {
      method: 'POST',
      headers: { cookie: mine, origin: dev.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf: await csrfOf(theirs), name: 'x' }),
    });
    expect(res.status).toBe(403);
    const login = await fetch(`${dev.issuer}/console/sign-in/development`, {
      method: 'POST',
      headers: { origin: 'https://evil.example', 'content-type': 'application/x-www-form-urlencoded' },
      body: 'sub=mallory',
    });
    expect(login.status).toBe(403);
    expect(login.headers.get('set-cookie')).toBeNull();
  });
});

describe('console pages', () => {
  it('serve their script and style sheet from the service, under a CSP with no inline code', async () => {
    const page = await fetch(`${dev.issuer}/console/sign-in`);
    const csp = page.headers.get('content-security-policy')!;
    expect(csp).toBe(
      "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; manifest-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    );
    expect(page.headers.get('x-frame-options')).toBe('DENY');
    const html = await page.text();
    expect(html).not.toMatch(/<script>|<style>| style=/);
    for (const asset of ['/console/assets/console.js', '/console/assets/console.css']) {
      const res = await fetch(`${dev.issuer}${asset}`);
      expect(res.status).toBe(200);
      expect(html).toContain(asset);
    }
  });

  it('show on the service screen the readiness GET /readyz reports: each dependency that answers', async () => {
    const cookie = await developmentSignIn('rita');
    const html = await (await fetch(`${dev.issuer}/console/service`, { headers: { cookie } })).text();
    expect(html).toMatch(/<section id="readiness">.*<strong>ready<\/strong>: database answers/s);
    expect(html).toContain('<dd id="device-controls"><strong>enabled');
  });

  it('go through the same operations as the API: what the console creates, the API lists', async () => {
    const cookie = await developmentSignIn('ken');
    const csrf = await csrfOf(cookie);
    await fetch(`${dev.issuer}/console/agents`, {
      method: 'POST',
      headers: { cookie, origin: dev.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, name: 'Kitchen bot', access: 'read', principal: 'agent:kitchen', ttlSeconds: '' }),
    });
    const listed = await client(dev.url).get('/v1/agent-connections', { token: await signDevelopmentSession(dev.config, 'ken') });
    expect(listed.body.data).toEqual([expect.objectContaining({ name: 'Kitchen bot', principal: 'agent:kitchen', access: 'read' })]);
  });
});

describe('approvals inbox (/console/approvals)', () => {
  const HOSTILE = '<img src=x onerror=alert(1)>';

  /** An owner signed in to the console, a lamp named like markup, an agent granted set_power with owner approval, and one waiting action. */
  async function waitingAction(subject: string) {
    const owner = await signDevelopmentSession(dev.config, subject);
    const api = client(dev.url);
    // A function whose argument is free text: the agent chooses it.
    const say = { type: 'object', properties: { on: { type: 'boolean' }, note: { type: 'string' } }, additionalProperties: false };
    const lamp = await attachDevice(api, owner, { name: HOSTILE, manifest: { capabilities: [{ name: 'set_power', kind: 'control', arguments: say }] } });
    const agent = await createAgent(api, owner, { name: HOSTILE });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true, note: HOSTILE } });
    expect(action.status).toBe('awaiting_approval');
    const cookie = await developmentSignIn(subject);
    return { owner, api, agent, action, cookie, csrf: await csrfOf(cookie) };
  }

  const decide = (cookie: string, move: 'approve' | 'reject', body: Record<string, string>) =>
    fetch(`${dev.issuer}/console/approvals/${move}`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie, origin: dev.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(body),
    });

  it('lists a waiting action with its agent, device, function and arguments, every name as text', async () => {
    const { action, agent, cookie } = await waitingAction('lena');
    const html = await (await fetch(`${dev.issuer}/console/approvals`, { headers: { cookie } })).text();
    const row = html.slice(html.indexOf(`<tr data-action-id="${action.id}">`));
    expect(row).toContain(`<code data-field="principal">${agent.principal}</code>`);
    expect(row).toContain('<code data-field="capability">set_power</code>');
    expect(row).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(html).not.toContain(HOSTILE);
    expect(html).not.toContain('<img');
  });

  it('rejects with a reason through actions.reject, then refuses a second decision with why', async () => {
    const { action, api, owner, cookie, csrf } = await waitingAction('mona');
    const rejected = await decide(cookie, 'reject', { csrf, actionId: action.id, reason: 'Not while I am away' });
    expect(rejected.status).toBe(303);
    expect(rejected.headers.get('location')).toBe('/console/approvals?done=rejected');
    const stored = (await api.get(`/v1/actions/${action.id}`, { token: owner })).body.data;
    expect(stored).toMatchObject({ status: 'rejected', approval: { decision: 'rejected', decidedBy: 'mona', reason: 'Not while I am away' } });
    const inbox = await (await fetch(`${dev.issuer}/console/approvals?done=rejected`, { headers: { cookie } })).text();
    expect(inbox).toContain('Rejected: the action ends rejected');
    expect(inbox).not.toContain(`<tr data-action-id="${action.id}">`);

    const again = await decide(cookie, 'approve', { csrf, actionId: action.id });
    expect(again.status).toBe(409);
    expect(await again.text()).toContain('The action is rejected, not awaiting approval.');
    expect((await api.get(`/v1/actions/${action.id}`, { token: owner })).body.data.status).toBe('rejected');
  });

  it('refuses a decision without the form token', async () => {
    const { action, api, owner, cookie } = await waitingAction('nina');
    expect((await decide(cookie, 'approve', { actionId: action.id })).status).toBe(403);
    expect((await api.get(`/v1/actions/${action.id}`, { token: owner })).body.data.status).toBe('awaiting_approval');
  });
});

describe('live updates (/console/events)', () => {
  const streams: SseStream[] = [];
  afterAll(() => streams.forEach((sse) => sse.close()));
  const open = async (cookie: string, lastEventId?: string) => {
    const sse = await openSse(`${dev.issuer}/console/events`, { headers: { cookie }, ...(lastEventId ? { lastEventId } : {}) });
    streams.push(sse);
    return sse;
  };

  it('is 401 without a console session', async () => {
    const res = await fetch(`${dev.issuer}/console/events`);
    expect(res.status).toBe(401);
  });

  it("streams the owner's events with the session cookie, and resumes after Last-Event-ID", async () => {
    const owner = await signDevelopmentSession(dev.config, 'olga');
    const api = client(dev.url);
    const cookie = await developmentSignIn('olga');
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    const first = await open(cookie);
    expect(first.status).toBe(200);
    expect(first.headers.get('content-type')).toMatch(/^text\/event-stream/);
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    const granted = await first.nextWhere((event) => event.event === 'grant.created');
    first.close();

    // Requested while the page was away: the reconnecting browser gets it from Last-Event-ID.
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const resumed = await open(cookie, granted.id);
    const requested = await resumed.nextWhere((event) => event.event === 'approval.requested');
    expect(JSON.parse(requested.data).data.action).toMatchObject({ id: action.id, status: 'awaiting_approval' });
  });
});

describe('OWNER_OIDC_* configuration', () => {
  const external = { OWNER_JWKS_URL: 'https://idp.example.com/jwks', OWNER_ISSUER: 'https://idp.example.com', OWNER_AUDIENCE: 'dfc' };

  it('configures the OpenID sign-in of an external provider, secret optional', () => {
    const config = parseConfig({ ...external, OWNER_OIDC_CLIENT_ID: 'console', OWNER_OIDC_CLIENT_SECRET: 's3cret' });
    expect(config.owner.mode === 'external' && config.owner.oidc).toEqual({ clientId: 'console', clientSecret: 's3cret' });
    const publicClient = parseConfig({ ...external, OWNER_OIDC_CLIENT_ID: 'console' });
    expect(publicClient.owner.mode === 'external' && publicClient.owner.oidc).toEqual({ clientId: 'console' });
  });

  it.each([
    ['a secret without a client id', { ...external, OWNER_OIDC_CLIENT_SECRET: 's' }, 'OWNER_OIDC_CLIENT_ID is required'],
    ['a client id without an external provider', { OWNER_OIDC_CLIENT_ID: 'console' }, 'OWNER_OIDC_CLIENT_ID needs an external identity provider'],
    ['an issuer that is not a URL', { ...external, OWNER_ISSUER: 'urn:idp', OWNER_OIDC_CLIENT_ID: 'console' }, 'OWNER_ISSUER must be an http(s) URL'],
  ])('refuses %s', (_name, env, message) => {
    expect(() => parseConfig(env)).toThrow(message);
  });
});

describe('grant screen (/console/grants): what approval "user" is', () => {
  it('says that the agent client asks and answers, and that the service cannot verify it', async () => {
    const owner = await signDevelopmentSession(dev.config, 'uma');
    const api = client(dev.url);
    await attachDevice(api, owner, { name: 'Gate' });
    const agent = await createAgent(api, owner, { name: 'gatekeeper' });
    const cookie = await developmentSignIn('uma');
    const html = await (await fetch(`${dev.issuer}/console/grants?principal=${encodeURIComponent(agent.principal)}`, { headers: { cookie } })).text();
    expect(html).toContain('user: the agent&#39;s own MCP client asks its user');
    const note = /<p class="muted" id="user-approval-note">([^<]*)<\/p>/.exec(html)?.[1];
    expect(note).toContain('This service cannot verify that a person saw or answered it');
    expect(note).toContain('the action records the client as the confirmer');
  });
});

describe('conditions page (/console/grants/conditions)', () => {
  it('renders a grant of this workspace only, without inline code, its argument names as text', async () => {
    const owner = await signDevelopmentSession(dev.config, 'vera');
    const api = client(dev.url);
    const hostile = '<b onmouseover=x>';
    const manifest = {
      capabilities: [{ name: 'say', kind: 'control', arguments: { type: 'object', properties: { [hostile]: { type: 'string', maxLength: 20 } } } }],
    };
    const device = await attachDevice(api, owner, { name: 'Speaker', manifest });
    const [granted] = await grant(api, owner, 'agent:speaker-bot', device.id, ['say']);
    const cookie = await developmentSignIn('vera');
    const page = await fetch(`${dev.issuer}/console/grants/conditions?grantId=${granted!.id}`, { headers: { cookie } });
    expect(page.status).toBe(200);
    const html = await page.text();
    expect(html).not.toMatch(/<script>|<style>| style=|<b onmouseover/);
    expect(html).toContain('&lt;b onmouseover=x&gt;');
    expect(html).toContain('max="20"');
    // Another owner does not find it.
    const other = await developmentSignIn('walt');
    expect((await fetch(`${dev.issuer}/console/grants/conditions?grantId=${granted!.id}`, { headers: { cookie: other } })).status).toBe(404);
  });
});

describe('agents screen, a confidential server-to-server OAuth client', () => {
  it('registers it with no redirect URI, shows its secret once, and the secret gets a client_credentials token', async () => {
    const cookie = await developmentSignIn('sasha');
    const csrf = await csrfOf(cookie);
    const page = await (await fetch(`${dev.issuer}/console/agents`, { headers: { cookie } })).text();
    expect(page).toContain('name="kind" value="server"');
    const created = await fetch(`${dev.issuer}/console/oauth-clients`, {
      method: 'POST',
      headers: { cookie, origin: dev.issuer, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ csrf, name: 'Nightly job', kind: 'server', redirectUris: '', access: 'act' }),
    });
    const html = await created.text();
    expect(created.status, html).toBe(200);
    expect(html).toContain('grant_type=client_credentials');
    const clientId = /<code id="created-client-id">([^<]+)<\/code>/.exec(html)?.[1];
    const secret = /(dfc_secret_[A-Za-z0-9_-]+)/.exec(html)?.[1];
    expect(clientId).toBeDefined();
    expect(secret).toBeDefined();
    const listed = await client(dev.url).get('/v1/oauth-clients', { token: await signDevelopmentSession(dev.config, 'sasha') });
    expect(listed.body.data).toEqual([
      expect.objectContaining({ name: 'Nightly job', access: 'act', oauth: expect.objectContaining({ public: false, redirectUris: [] }) }),
    ]);
    // Shown once: the screen lists the client without its secret afterwards.
    expect(await (await fetch(`${dev.issuer}/console/agents`, { headers: { cookie } })).text()).not.toContain(secret);

    const token = await fetch(`${dev.issuer}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'client_credentials', client_id: clientId!, client_secret: secret! }),
    });
    expect(token.status).toBe(200);
    expect(((await token.json()) as { scope: string }).scope).toBe('read act');
  });
});

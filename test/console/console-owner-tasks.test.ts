import { beforeAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { grant, hubManifest } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest } from '../helpers/fixtures.js';
import { useOAuthTestServer } from '../helpers/oauth.js';

/**
 * Owner tasks done in the console without JavaScript (plain form posts, as a browser without
 * script sends them; docs/owners/console-guide.md): gateway grants, enrollment codes, usage, the
 * pause switch, changing a grant in place and a refused webhook form, each through the same
 * operation as the API.
 */

const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
let cookie: string;
let csrf: string;
let owner: string;

const server = useOAuthTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;

beforeAll(async () => {
  owner = await signDevelopmentSession(server.config, 'tara');
  const res = await fetch(`${server.issuer}/console/sign-in/development`, {
    method: 'POST',
    redirect: 'manual',
    headers: { origin: server.issuer, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ sub: 'tara' }),
  });
  cookie = res.headers.get('set-cookie')!.split(';')[0]!;
  const html = await (await fetch(`${server.issuer}/console/attach`, { headers: { cookie } })).text();
  csrf = /name="csrf" value="([^"]+)"/.exec(html)![1]!;
});

const page = async (path: string) => (await fetch(`${server.issuer}${path}`, { headers: { cookie } })).text();
const post = (path: string, fields: Record<string, string>) =>
  fetch(`${server.issuer}${path}`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie, origin: server.issuer, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ csrf, ...fields }),
  });

describe('gateway grants (/console/gateways)', () => {
  it("grants an agent a gateway and its linked devices, with the screen's safer defaults: owner approval, 7 days", async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const agent = await createAgent(api, owner, { name: 'Hub bot', principal: 'agent:hub-bot' });
    const html = await page('/console/gateways');
    expect(html).toContain('Hub (2 linked devices)');
    const res = await post('/console/gateways', { deviceId: hub.id, principal: agent.principal, mode: 'read', approval: 'owner', ttlSeconds: '604800' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/gateways?done=granted&devices=2');
    const grants = (await api.get(`/v1/grants?principal=${agent.principal}`, { token: owner })).body.data;
    expect(grants.map((g: { capability: string }) => g.capability).sort()).toEqual(['get_state', 'hub_status']);
    for (const g of grants) expect(g).toMatchObject({ gatewayId: hub.id, approval: 'owner', expiresAt: expect.any(Number) });
    expect(await page('/console/gateways?done=granted&devices=2')).toContain('Granted: 2 devices received grants.');
  });
});

describe('enrollment codes (/console/enrollments)', () => {
  it('shows a new code once, and a board enrolls with it', async () => {
    const res = await post('/console/enrollments', {});
    expect(res.status).toBe(200);
    const code = /<code id="enrollment-code">([^<]+)<\/code>/.exec(await res.text())![1]!;
    expect(await page('/console/enrollments')).not.toContain(code);
    const enrolled = await api.post('/v1/device/enroll', { body: { code, name: 'Board' } });
    expect(enrolled.status).toBe(201);
  });
});

describe('usage (/console/usage)', () => {
  it('shows what the workspace holds against its limits, as GET /v1/usage does', async () => {
    const usage = (await api.get('/v1/usage', { token: owner })).body.data;
    const html = await page('/console/usage');
    const devices = /<div class="card" id="usage-devices">.*?<strong>([^<]+)<\/strong> of ([^<]+) /s.exec(html)!;
    expect([devices[1], devices[2]]).toEqual([String(usage.capacity.devices.used), usage.capacity.devices.limit.toLocaleString('en')]);
  });
});

describe('the pause switch (/console/service)', () => {
  it('pauses and resumes through deviceControls.set, and every screen says while it is paused', async () => {
    const paused = await post('/console/service/device-controls', { paused: 'true' });
    expect(paused.headers.get('location')).toBe('/console/service?done=paused');
    expect((await api.get('/v1/device-controls', { token: owner })).body.data).toMatchObject({ paused: true, pausedBy: 'tara' });
    expect(await page('/console/service')).toContain('data-paused="true"');
    // Every other screen says so too, with the way back.
    expect(await page('/console')).toContain('id="paused-banner"');
    expect(await page('/console/grants')).toContain('Resume on the Control screen');
    await post('/console/service/device-controls', { paused: 'false' });
    expect((await api.get('/v1/device-controls', { token: owner })).body.data.paused).toBe(false);
    expect(await page('/console/service')).toContain('data-paused="false"');
    expect(await page('/console')).not.toContain('id="paused-banner"');
  });

  it('refuses a value other than true or false with 400, and leaves a paused workspace paused', async () => {
    await post('/console/service/device-controls', { paused: 'true' });
    for (const form of [{}, { paused: '' }, { paused: 'yes' }, { paused: 'TRUE' }] as Record<string, string>[]) {
      const res = await post('/console/service/device-controls', form);
      expect(res.status).toBe(400);
      expect((await api.get('/v1/device-controls', { token: owner })).body.data.paused).toBe(true);
    }
    await post('/console/service/device-controls', { paused: 'false' });
  });
});

describe('changing a grant in place (/console/grants/update)', () => {
  it('changes the expiry and keeps the approval, then refuses a stale grant with why', async () => {
    const lamp = await attachDevice(api, owner, { name: 'Desk lamp' });
    const [given] = await grant(api, owner, 'agent:edit', lamp.id, ['set_power'], null, 'owner');
    const res = await post('/console/grants/update', { grantId: given!.id, newApproval: 'owner', newExpiry: '3600', back: '/console/grants?q=Desk' });
    expect(res.status).toBe(303);
    expect(res.headers.get('location')).toBe('/console/grants?q=Desk&done=updated');
    const changed = (await api.get('/v1/grants?principal=agent:edit', { token: owner })).body.data[0];
    expect(changed).toMatchObject({ id: given!.id, approval: 'owner', expiresAt: expect.any(Number) });

    const republished = {
      capabilities: lampManifest.capabilities.map((c) => (c.name === 'set_power' ? { ...c, kind: 'read' } : c)),
    };
    await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: republished });
    const refused = await post('/console/grants/update', { grantId: given!.id, newApproval: 'none', newExpiry: '', back: '/console/grants' });
    expect(refused.status).toBe(409);
    expect(await refused.text()).toContain('grant it again to accept it as it is now');
    // The overview offers no change for it, and says it is stale.
    const overview = await page('/console/grants?q=agent%3Aedit');
    expect(overview).toContain('badge stale');
    expect(overview).not.toContain(`data-save="${given!.id}"`);
  });

  it('sends the owner back only to a grants page', async () => {
    const lamp = await attachDevice(api, owner, { name: 'Porch lamp' });
    const [given] = await grant(api, owner, 'agent:back', lamp.id, ['get_state']);
    const res = await post('/console/grants/update', { grantId: given!.id, newApproval: 'owner', back: 'https://evil.example/' });
    expect(res.headers.get('location')).toBe('/console/grants?done=updated');
  });
});

describe('adding a webhook (/console/webhooks)', () => {
  it('shows the form again as it was filled in when the URL is refused', async () => {
    const fields = {
      format: 'generic',
      url: 'https://10.0.0.1/hook?x="1"&y=<2>',
      chatId: '',
      description: 'Kitchen "ntfy" & <lamp>',
      'event-device.revoked': '1',
      'event-grant.created': '1',
    };
    const res = await post('/console/webhooks/create', fields);
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toContain('non-public address');
    const form = /<form[^>]*id="add-webhook"[^>]*>(.*?)<\/form>/s.exec(html)![1]!;
    const escaped = (text: string) => text.replaceAll('&', '&amp;').replaceAll('"', '&quot;').replaceAll('<', '&lt;').replaceAll('>', '&gt;');
    const valueOf = (id: string) => new RegExp(`<input[^>]*id="${id}"[^>]*>`).exec(form)![0].match(/value="([^"]*)"/)?.[1];
    expect(escaped(fields.url)).toBe(valueOf('url'));
    expect(escaped(fields.description)).toBe(valueOf('description'));
    const checked = [...form.matchAll(/<input type="checkbox" name="event-([^"]+)" value="1" checked(?:="")?/g)].map((m) => m[1]);
    expect(checked.sort()).toEqual(['device.revoked', 'grant.created']);
    expect((await api.get('/v1/webhooks', { token: owner })).body.data).toEqual([]);
  });

  it('keeps the chosen format and the Telegram chat id', async () => {
    const res = await post('/console/webhooks/create', { format: 'telegram', url: 'http://192.168.1.5/bot1:x/sendMessage', chatId: '4242' });
    expect(res.status).toBe(400);
    const html = await res.text();
    expect(html).toMatch(/<option value="telegram" selected(="")?>/);
    expect(html).toMatch(/<input[^>]*id="chatId"[^>]*value="4242"/);
  });

  it('shows an empty form again after a webhook was added', async () => {
    const res = await post('/console/webhooks/create', { format: 'generic', url: 'https://93.184.216.34/hook', 'event-device.revoked': '1' });
    expect(res.status).toBe(201);
    const url = /<input[^>]*id="url"[^>]*>/.exec(await res.text())![0];
    expect(url).not.toContain('value=');
  });
});

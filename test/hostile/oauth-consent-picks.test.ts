import { beforeAll, describe, expect, it } from 'vitest';
import { attachDevice, lampManifest } from '../helpers/fixtures.js';
import { authorizationUrl, consentForm, ownerCookie, pkce, registerClient, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * Device functions picked on the consent page are checked again when the form comes back: a
 * pick the page did not offer (another workspace's device, a function the device does not
 * have) or a control function with read only is refused with the page, and nothing is granted.
 */

const CALLBACK = 'http://127.0.0.1:9/callback';
const server = useOAuthTestServer();

let owner: string;
let cookie: string;
let lamp: { id: string };
let strangersLamp: { id: string };
let clientId: string;
let principal: string;

beforeAll(async () => {
  owner = await server.ownerToken('picks-owner');
  cookie = await ownerCookie(server.issuer, owner);
  lamp = await attachDevice(server.api, owner, { name: 'Own lamp', manifest: lampManifest });
  strangersLamp = await attachDevice(server.api, await server.ownerToken('picks-stranger'), { name: 'Stranger lamp', manifest: lampManifest });
  const registered = await registerClient(server.issuer, owner, { name: 'Picks client', redirectUris: [CALLBACK], public: true, access: 'act' });
  clientId = registered.oauth.clientId;
  principal = registered.principal;
});

/** Posts the consent form as the page would, plus `extra` fields; the answer's status and page. */
async function postConsent(extra: Record<string, string>): Promise<{ status: number; html: string; location: string | null }> {
  const url = authorizationUrl(server.issuer, { client_id: clientId, redirect_uri: CALLBACK, code_challenge: pkce().challenge, scope: 'read act' });
  const page = await fetch(url, { headers: { cookie }, redirect: 'manual' });
  const fields = consentForm(await page.text());
  const res = await fetch(`${server.issuer}/oauth/authorize`, {
    method: 'POST',
    headers: { cookie, 'content-type': 'application/x-www-form-urlencoded', origin: server.issuer },
    body: new URLSearchParams({ ...fields, ...extra }).toString(),
    redirect: 'manual',
  });
  return { status: res.status, html: await res.text(), location: res.headers.get('location') };
}

async function grantsOf(token: string, who: string) {
  const res = await server.api.get(`/v1/grants?principal=${encodeURIComponent(who)}`, { token });
  return (res.body as { data: { capability: string; deviceId: string }[] }).data;
}

describe('picks on the consent page, checked again on the post', () => {
  it('refuses a device of another workspace, and grants nothing', async () => {
    const answer = await postConsent({ decision: 'approve', [`grant:${strangersLamp.id}:set_power`]: 'on', [`grant:${lamp.id}:get_state`]: 'on' });
    expect(answer.status).toBe(400);
    expect(answer.location).toBeNull();
    expect(answer.html).toContain('no longer offered');
    expect(await grantsOf(owner, principal)).toEqual([]);
    expect(await grantsOf(await server.ownerToken('picks-stranger'), principal)).toEqual([]);
  });

  it('refuses a function the device does not have', async () => {
    const answer = await postConsent({ decision: 'approve', [`grant:${lamp.id}:open_door`]: 'on' });
    expect(answer.status).toBe(400);
    expect(await grantsOf(owner, principal)).toEqual([]);
  });

  it('refuses a control function with read only, and grants none of the picks', async () => {
    const answer = await postConsent({ decision: 'approve-read', [`grant:${lamp.id}:set_power`]: 'on', [`grant:${lamp.id}:get_state`]: 'on' });
    expect(answer.status).toBe(400);
    expect(answer.html).toContain('set_power is a control function');
    expect(await grantsOf(owner, principal)).toEqual([]);
  });

  it('grants nothing on deny, whatever is checked', async () => {
    const answer = await postConsent({ decision: 'deny', [`grant:${lamp.id}:get_state`]: 'on' });
    expect(answer.status).toBe(303);
    expect(new URL(answer.location!).searchParams.get('error')).toBe('access_denied');
    expect(await grantsOf(owner, principal)).toEqual([]);
  });

  it('grants an offered pick on approve and redirects with a code', async () => {
    const answer = await postConsent({ decision: 'approve', [`grant:${lamp.id}:get_state`]: 'on' });
    expect(answer.status).toBe(303);
    expect(new URL(answer.location!).searchParams.get('code')).toMatch(/^dfc_code_/);
    expect((await grantsOf(owner, principal)).map((row) => [row.deviceId, row.capability])).toEqual([[lamp.id, 'get_state']]);
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { grant, hubManifest } from '../helpers/actions.js';
import { attachDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

// docs/reference/rules.md "Approvals": every grant carries an approval mode, shown wherever grants and
// callable functions are listed.

let owner: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('approval-modes-owner');
});

describe('POST /v1/grants approval', () => {
  it('defaults to none and records owner or user when asked, in the answer and the listing', async () => {
    const lamp = await attachDevice(api, owner);
    expect((await grant(api, owner, 'agent:plain', lamp.id, ['get_state']))[0]!.approval).toBe('none');
    expect((await grant(api, owner, 'agent:careful', lamp.id, ['set_power'], null, 'owner'))[0]!.approval).toBe('owner');
    expect((await grant(api, owner, 'agent:careful', lamp.id, ['set_brightness'], null, 'user'))[0]!.approval).toBe('user');

    const listed = await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner });
    const modes = Object.fromEntries(
      (listed.body.data as { principal: string; capability: string; approval: string }[]).map((g) => [`${g.principal} ${g.capability}`, g.approval]),
    );
    expect(modes).toEqual({ 'agent:plain get_state': 'none', 'agent:careful set_power': 'owner', 'agent:careful set_brightness': 'user' });
  });

  it('rejects an unknown mode with 400 at approval, granting nothing', async () => {
    const lamp = await attachDevice(api, owner);
    const res = await api.post('/v1/grants', {
      token: owner,
      body: { principal: 'agent:x', deviceId: lamp.id, capabilities: ['set_power'], approval: 'maybe' },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toEqual(['approval']);
    expect((await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner })).body.data).toEqual([]);
  });

  it('replaces the mode when the function is granted again: one live grant per principal and function', async () => {
    const lamp = await attachDevice(api, owner);
    await grant(api, owner, 'agent:changing', lamp.id, ['set_power'], null, 'owner');
    await grant(api, owner, 'agent:changing', lamp.id, ['set_power'], null, 'none');
    const listed = await api.get(`/v1/grants?deviceId=${lamp.id}`, { token: owner });
    expect(listed.body.data.map((g: { approval: string }) => g.approval)).toEqual(['none']);
  });
});

describe('POST /v1/devices/{deviceId}/gateway-grants approval', () => {
  it('gives every grant it writes the requested mode', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const res = await api.post(`/v1/devices/${hub.id}/gateway-grants`, {
      token: owner,
      body: { principal: 'agent:hub', mode: 'control', approval: 'owner' },
    });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    const listed = await api.get('/v1/grants?principal=agent:hub', { token: owner });
    expect(listed.body.data.length).toBeGreaterThan(0);
    for (const g of listed.body.data as { approval: string }[]) expect(g.approval).toBe('owner');
  });
});

describe('GET /v1/functions approval', () => {
  it("shows an agent each callable function's mode, read live from its grant", async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['get_state'] });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    const modes = async () =>
      Object.fromEntries(
        ((await api.get('/v1/functions', { token: agent.token })).body.data as { capability: string; approval: string }[]).map((f) => [
          f.capability,
          f.approval,
        ]),
      );
    expect(await modes()).toEqual({ get_state: 'none', set_power: 'owner' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'user');
    expect(await modes()).toEqual({ get_state: 'none', set_power: 'user' });
  });

  it("leaves it out of an owner's listing, which is not about any grant", async () => {
    await attachDevice(api, owner);
    const listed = await api.get('/v1/functions', { token: owner });
    for (const fn of listed.body.data as Record<string, unknown>[]) expect(fn).not.toHaveProperty('approval');
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../helpers/clock.js';
import { useTestServer } from '../helpers/server.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** `dfc_setup_` and 32 random bytes in base64url: 256 bits. */
const SETUP_TOKEN = /^dfc_setup_[A-Za-z0-9_-]{43}$/;

const clock = manualClock();
let owner: string;

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('setup-owner');
});

// The legacy /v1/sdk-tokens family must mirror /v1/device-setup-tokens exactly
// (docs/reference/rules.md "Versioning"), so every rule runs against both.
describe.each([{ family: '/v1/device-setup-tokens' }, { family: '/v1/sdk-tokens' }])('setup tokens at $family', ({ family }) => {
  describe(`POST ${family}`, () => {
    it('answers 201 with the full NewConnection shape, defaults applied, token shown once', async () => {
      const res = await api.post(family, { token: owner, body: { name: 'Kitchen hub' } });
      expect(res.status).toBe(201);
      const data = res.body.data;
      expect(Object.keys(res.body)).toEqual(['data']);
      expect(data).toEqual({
        id: expect.stringMatching(UUID_V4),
        principal: `setup:${data.id}`,
        name: 'Kitchen hub',
        expiresAt: clock.now() + 600_000,
        revoked: false,
        access: 'read',
        purpose: 'device-setup',
        canAttach: true,
        deviceLimit: 1,
        attachedDeviceCount: 0,
        tokenPrefix: data.token.slice(0, 'dfc_setup_'.length + 4),
        createdAt: clock.now(),
        token: expect.stringMatching(SETUP_TOKEN),
      });
      expect(data).not.toHaveProperty('oauth');
    });

    it('issues a different token every time', async () => {
      const a = await api.post(family, { token: owner, body: { name: 'a' } });
      const b = await api.post(family, { token: owner, body: { name: 'a' } });
      expect(a.body.data.token).not.toBe(b.body.data.token);
      expect(a.body.data.id).not.toBe(b.body.data.id);
    });

    const accepted: [string, Record<string, unknown>, Partial<Record<'deviceLimit' | 'ttl', number>>][] = [
      ['name of 1 character', { name: 'a' }, {}],
      ['name of 64 characters', { name: 'n'.repeat(64) }, {}],
      ['ttlSeconds 60 (lower bound)', { name: 't', ttlSeconds: 60 }, { ttl: 60 }],
      ['ttlSeconds 86400 (upper bound)', { name: 't', ttlSeconds: 86_400 }, { ttl: 86_400 }],
      ['deviceLimit 1 (lower bound)', { name: 'd', deviceLimit: 1 }, { deviceLimit: 1 }],
      ['deviceLimit 20 (upper bound)', { name: 'd', deviceLimit: 20 }, { deviceLimit: 20 }],
    ];
    it.each(accepted)('accepts %s', async (_label, body, expected) => {
      const res = await api.post(family, { token: owner, body });
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      expect(res.body.data.name).toBe(body.name);
      expect(res.body.data.expiresAt).toBe(clock.now() + (expected.ttl ?? 600) * 1000);
      expect(res.body.data.deviceLimit).toBe(expected.deviceLimit ?? 1);
    });

    const rejected: [string, Record<string, unknown>, string][] = [
      ['a missing name', {}, 'name'],
      ['an empty name', { name: '' }, 'name'],
      ['a name of 65 characters', { name: 'n'.repeat(65) }, 'name'],
      ['a name that is not a string', { name: 42 }, 'name'],
      ['ttlSeconds 59', { name: 't', ttlSeconds: 59 }, 'ttlSeconds'],
      ['ttlSeconds 86401', { name: 't', ttlSeconds: 86_401 }, 'ttlSeconds'],
      ['a fractional ttlSeconds', { name: 't', ttlSeconds: 600.5 }, 'ttlSeconds'],
      ['ttlSeconds as a string', { name: 't', ttlSeconds: '600' }, 'ttlSeconds'],
      ['ttlSeconds null', { name: 't', ttlSeconds: null }, 'ttlSeconds'],
      ['deviceLimit 0', { name: 'd', deviceLimit: 0 }, 'deviceLimit'],
      ['deviceLimit 21', { name: 'd', deviceLimit: 21 }, 'deviceLimit'],
      ['a fractional deviceLimit', { name: 'd', deviceLimit: 1.5 }, 'deviceLimit'],
      ['an unknown field', { name: 'x', access: 'act' }, 'access'],
    ];
    it.each(rejected)('rejects %s with 400 and an issue at its path', async (_label, body, path) => {
      const res = await api.post(family, { token: owner, body });
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toContain(path);
    });
  });

  describe(`GET ${family}`, () => {
    it('lists setup tokens newest first, never with the token', async () => {
      const first = await api.post(family, { token: owner, body: { name: 'older' } });
      clock.advance(1);
      const second = await api.post(family, { token: owner, body: { name: 'newer' } });
      const res = await api.get(family, { token: owner });
      expect(res.status).toBe(200);
      const ids = res.body.data.map((c: { id: string }) => c.id);
      expect(ids.indexOf(second.body.data.id)).toBeLessThan(ids.indexOf(first.body.data.id));
      for (const entry of res.body.data) {
        expect(entry).not.toHaveProperty('token');
        expect(entry.purpose).toBe('device-setup');
      }
      const { token: _token, ...listed } = second.body.data;
      expect(res.body.data.find((c: { id: string }) => c.id === second.body.data.id)).toEqual(listed);
    });

    it('does not list agent connections', async () => {
      const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'bot' } });
      const res = await api.get(family, { token: owner });
      expect(res.body.data.map((c: { id: string }) => c.id)).not.toContain(agent.body.data.id);
    });
  });

  describe(`POST ${family}/{connectionId}/revoke`, () => {
    it('revokes the token: 200 with revoked true and canAttach false, listed as revoked', async () => {
      const created = await api.post(family, { token: owner, body: { name: 'to revoke' } });
      const res = await api.post(`${family}/${created.body.data.id}/revoke`, { token: owner });
      expect(res.status).toBe(200);
      expect(res.body.data).toMatchObject({ id: created.body.data.id, revoked: true, canAttach: false });
      expect(res.body.data).not.toHaveProperty('token');
      const list = await api.get(family, { token: owner });
      expect(list.body.data.find((c: { id: string }) => c.id === created.body.data.id).revoked).toBe(true);
    });

    it('is idempotent: revoking again answers the same revoked token', async () => {
      const created = await api.post(family, { token: owner, body: { name: 'twice' } });
      const once = await api.post(`${family}/${created.body.data.id}/revoke`, { token: owner });
      clock.advance(1000);
      const twice = await api.post(`${family}/${created.body.data.id}/revoke`, { token: owner });
      expect(twice.status).toBe(200);
      expect(twice.body.data).toEqual(once.body.data);
    });

    it('answers 404 for an unknown id', async () => {
      const res = await api.post(`${family}/6f1c1f7e-2c2a-4c55-9a3e-1d2b3c4d5e6f/revoke`, { token: owner });
      expect(res.status).toBe(404);
      expect(res.body.error.code).toBe('not_found');
    });

    it('answers 404 for the id of an agent connection (a different kind of connection)', async () => {
      const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'bot' } });
      const res = await api.post(`${family}/${agent.body.data.id}/revoke`, { token: owner });
      expect(res.status).toBe(404);
      const after = await api.get('/v1/account', { token: agent.body.data.token });
      expect(after.status).toBe(403); // still a valid agent credential, just not an owner
    });

    it('answers 400 with an issue for an id that is not a uuid', async () => {
      const res = await api.post(`${family}/not-a-uuid/revoke`, { token: owner });
      expect(res.status).toBe(400);
      expect(res.body.error.issues[0].path).toBe('connectionId');
    });
  });
});

describe('legacy /v1/sdk-tokens mirrors /v1/device-setup-tokens', () => {
  it('creates tokens that both families list and either family can revoke', async () => {
    const modern = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'modern', ttlSeconds: 120, deviceLimit: 3 } });
    const legacy = await api.post('/v1/sdk-tokens', { token: owner, body: { name: 'legacy', ttlSeconds: 120, deviceLimit: 3 } });
    const strip = ({ id: _id, name: _name, principal: _principal, token: _token, tokenPrefix: _prefix, ...rest }: Record<string, unknown>) => rest;
    expect(strip(legacy.body.data)).toEqual(strip(modern.body.data));

    const listModern = await api.get('/v1/device-setup-tokens', { token: owner });
    const listLegacy = await api.get('/v1/sdk-tokens', { token: owner });
    expect(listLegacy.body).toEqual(listModern.body);

    const revoked = await api.post(`/v1/sdk-tokens/${modern.body.data.id}/revoke`, { token: owner });
    expect(revoked.body.data.revoked).toBe(true);
    const revokedBack = await api.post(`/v1/device-setup-tokens/${legacy.body.data.id}/revoke`, { token: owner });
    expect(revokedBack.body.data.revoked).toBe(true);
  });

  it('legacy tokens attach devices like modern ones', async () => {
    const legacy = await api.post('/v1/sdk-tokens', { token: owner, body: { name: 'legacy attach' } });
    const res = await api.post('/v1/sdk/devices', { token: legacy.body.data.token, body: { name: 'Lamp' } });
    expect(res.status).toBe(201);
  });
});

describe('setup token lifetime', () => {
  it('is listed with canAttach false once expired, and its token answers 401 from then on', async () => {
    const created = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'short', ttlSeconds: 60 } });
    const { id, token, expiresAt } = created.body.data;
    clock.set(expiresAt);
    try {
      const list = await api.get('/v1/device-setup-tokens', { token: owner });
      expect(list.body.data.find((c: { id: string }) => c.id === id)).toMatchObject({ revoked: false, canAttach: false });
      const attach = await api.post('/v1/sdk/devices', { token, body: { name: 'Late' } });
      expect(attach.status).toBe(401);
    } finally {
      clock.set(Date.now());
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../helpers/clock.js';
import { useTestServer } from '../helpers/server.js';

const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
const AGENT_TOKEN = /^dfc_agent_[A-Za-z0-9_-]{43}$/;
const MAX_TTL = 31_536_000;

const clock = manualClock();
let owner: string;

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('agent-owner');
});

describe('POST /v1/agent-connections', () => {
  it('answers 201 with a NewConnection: default principal agent:<id>, access read, no expiry', async () => {
    const res = await api.post('/v1/agent-connections', { token: owner, body: { name: 'Support bot' } });
    expect(res.status).toBe(201);
    const data = res.body.data;
    expect(data).toEqual({
      id: expect.stringMatching(UUID_V4),
      principal: `agent:${data.id}`,
      name: 'Support bot',
      expiresAt: null,
      revoked: false,
      access: 'read',
      purpose: 'agent',
      canAttach: false,
      deviceLimit: 0,
      tokenPrefix: data.token.slice(0, 'dfc_agent_'.length + 4),
      createdAt: clock.now(),
      token: expect.stringMatching(AGENT_TOKEN),
    });
  });

  it('keeps an owner-chosen principal and the act ceiling', async () => {
    const res = await api.post('/v1/agent-connections', {
      token: owner,
      body: { name: 'Ops', principal: 'agent:ops-bot', access: 'act' },
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ principal: 'agent:ops-bot', access: 'act' });
  });

  const accepted: [string, Record<string, unknown>, number | null][] = [
    ['ttlSeconds 60 (lower bound)', { ttlSeconds: 60 }, 60],
    [`ttlSeconds ${MAX_TTL} (upper bound)`, { ttlSeconds: MAX_TTL }, MAX_TTL],
    ['ttlSeconds null (no expiry)', { ttlSeconds: null }, null],
    ['a principal of 1 character', { principal: 'p' }, null],
    ['a principal of 128 characters', { principal: 'p'.repeat(128) }, null],
    ['a name of 64 characters', { name: 'n'.repeat(64) }, null],
  ];
  it.each(accepted)('accepts %s', async (_label, extra, ttl) => {
    const res = await api.post('/v1/agent-connections', { token: owner, body: { name: 'bot', ...extra } });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    expect(res.body.data.expiresAt).toBe(ttl === null ? null : clock.now() + ttl * 1000);
  });

  const rejected: [string, Record<string, unknown>, string][] = [
    ['a missing name', { name: undefined }, 'name'],
    ['an empty name', { name: '' }, 'name'],
    ['a name of 65 characters', { name: 'n'.repeat(65) }, 'name'],
    ['access "write"', { access: 'write' }, 'access'],
    ['ttlSeconds 59', { ttlSeconds: 59 }, 'ttlSeconds'],
    [`ttlSeconds ${MAX_TTL + 1}`, { ttlSeconds: MAX_TTL + 1 }, 'ttlSeconds'],
    ['an empty principal', { principal: '' }, 'principal'],
    ['a principal of 129 characters', { principal: 'p'.repeat(129) }, 'principal'],
    ['a deviceLimit (setup tokens only)', { deviceLimit: 1 }, 'deviceLimit'],
  ];
  it.each(rejected)('rejects %s with 400 and an issue at its path', async (_label, extra, path) => {
    const res = await api.post('/v1/agent-connections', { token: owner, body: { name: 'bot', ...extra } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toContain(path);
  });
});

describe('GET /v1/agent-connections', () => {
  it('lists agent connections newest first without tokens, and no setup tokens', async () => {
    const older = await api.post('/v1/agent-connections', { token: owner, body: { name: 'older' } });
    clock.advance(1);
    const newer = await api.post('/v1/agent-connections', { token: owner, body: { name: 'newer' } });
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'setup' } });
    const res = await api.get('/v1/agent-connections', { token: owner });
    expect(res.status).toBe(200);
    const ids = res.body.data.map((c: { id: string }) => c.id);
    expect(ids.indexOf(newer.body.data.id)).toBeLessThan(ids.indexOf(older.body.data.id));
    expect(ids).not.toContain(setup.body.data.id);
    for (const entry of res.body.data) {
      expect(entry).not.toHaveProperty('token');
      expect(entry.purpose).toBe('agent');
    }
    const { token: _token, ...listed } = newer.body.data;
    expect(res.body.data.find((c: { id: string }) => c.id === newer.body.data.id)).toEqual(listed);
  });
});

describe('POST /v1/agent-connections/{connectionId}/revoke', () => {
  it('revokes the connection: its token answers 401 on the very next request', async () => {
    const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'doomed' } });
    const token = agent.body.data.token;
    // Before: a valid agent credential on an owner endpoint is 403 (right credential, wrong kind).
    expect((await api.get('/v1/account', { token })).status).toBe(403);

    const res = await api.post(`/v1/agent-connections/${agent.body.data.id}/revoke`, { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.data).toMatchObject({ id: agent.body.data.id, revoked: true });

    const after = await api.get('/v1/account', { token });
    expect(after.status).toBe(401);
    expect(after.body.error.code).toBe('unauthorized');
  });

  it('answers 404 for an unknown id and for the id of a setup token', async () => {
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'setup' } });
    for (const id of ['0e6f5a4b-3c2d-4e1f-8a9b-0c1d2e3f4a5b', setup.body.data.id]) {
      const res = await api.post(`/v1/agent-connections/${id}/revoke`, { token: owner });
      expect(res.status).toBe(404);
    }
    const attach = await api.post('/v1/sdk/devices', { token: setup.body.data.token, body: { name: 'still works' } });
    expect(attach.status).toBe(201);
  });
});

describe('agent token lifetime', () => {
  it('answers 401 once ttlSeconds has passed, and 403 (valid, wrong kind) just before', async () => {
    const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'short', ttlSeconds: 60 } });
    const { token, expiresAt } = agent.body.data;
    try {
      clock.set(expiresAt - 1);
      expect((await api.get('/v1/account', { token })).status).toBe(403);
      clock.set(expiresAt);
      expect((await api.get('/v1/account', { token })).status).toBe(401);
    } finally {
      clock.set(Date.now());
    }
  });
});

describe('GET /v1/agent-connections for an OAuth client', () => {
  it('lists the client’s connection with its oauth object, and no secret', async () => {
    const registered = await api.post('/v1/oauth-clients', {
      token: owner,
      body: { name: 'Desk app', redirectUris: ['http://127.0.0.1:9999/callback'], public: true, access: 'act' },
    });
    expect(registered.status, JSON.stringify(registered.body)).toBe(201);
    const listed = await api.get('/v1/agent-connections', { token: owner });
    const row = listed.body.data.find((c: { id: string }) => c.id === registered.body.data.id);
    expect(row).toMatchObject({
      purpose: 'agent',
      access: 'act',
      oauth: {
        applicationId: registered.body.data.oauth.applicationId,
        clientId: registered.body.data.oauth.clientId,
        redirectUris: ['http://127.0.0.1:9999/callback'],
        public: true,
      },
    });
    expect(row.token).toBeUndefined();
  });
});

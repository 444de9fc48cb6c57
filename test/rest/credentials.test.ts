import { beforeAll, describe, expect, it } from 'vitest';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, createSetupToken, lampManifest } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The wrong-credential matrix (docs/reference/rules.md "Credentials"): every endpoint in the table
 * below with an owner session, an agent token, a setup token and a device credential. A valid
 * credential of another kind is 403; an unknown, expired, revoked or forged one is 401.
 */
type Kind = 'owner' | 'agent' | 'setup' | 'device';

const clock = manualClock();
let ownerToken: string;
let deviceId: string;
const tokens = {} as Record<Kind, string>;

const server = useTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  ownerToken = await server.ownerToken('matrix-owner');
  tokens.owner = ownerToken;
  tokens.agent = (await createAgent(api, ownerToken, { access: 'act' })).token;
  tokens.setup = (await createSetupToken(api, ownerToken, { name: 'matrix', deviceLimit: 20 })).token;
  const device = await attachDevice(api, ownerToken);
  deviceId = device.id;
  tokens.device = device.token;
});

interface Endpoint {
  method: 'GET' | 'POST';
  /** Built per call so each gets fresh targets (a revoke must not consume the next call's target). */
  path: () => Promise<string>;
  body?: unknown;
  accepts: Kind[];
}

const freshSetupId = async () => (await createSetupToken(api, ownerToken, { name: 'target' })).id;
const freshAgentId = async () => (await createAgent(api, ownerToken)).id;
const freshDeviceId = async () => (await attachDevice(api, ownerToken, { manifest: null })).id;

const endpoints: Record<string, Endpoint> = {
  'GET /v1/account': { method: 'GET', path: async () => '/v1/account', accepts: ['owner'] },
  'POST /v1/device-setup-tokens': { method: 'POST', path: async () => '/v1/device-setup-tokens', body: { name: 'm' }, accepts: ['owner'] },
  'GET /v1/device-setup-tokens': { method: 'GET', path: async () => '/v1/device-setup-tokens', accepts: ['owner'] },
  'POST /v1/device-setup-tokens/{id}/revoke': {
    method: 'POST',
    path: async () => `/v1/device-setup-tokens/${await freshSetupId()}/revoke`,
    accepts: ['owner'],
  },
  'POST /v1/sdk-tokens': { method: 'POST', path: async () => '/v1/sdk-tokens', body: { name: 'm' }, accepts: ['owner'] },
  'GET /v1/sdk-tokens': { method: 'GET', path: async () => '/v1/sdk-tokens', accepts: ['owner'] },
  'POST /v1/sdk-tokens/{id}/revoke': { method: 'POST', path: async () => `/v1/sdk-tokens/${await freshSetupId()}/revoke`, accepts: ['owner'] },
  'POST /v1/agent-connections': { method: 'POST', path: async () => '/v1/agent-connections', body: { name: 'm' }, accepts: ['owner'] },
  'GET /v1/agent-connections': { method: 'GET', path: async () => '/v1/agent-connections', accepts: ['owner'] },
  'POST /v1/agent-connections/{id}/revoke': {
    method: 'POST',
    path: async () => `/v1/agent-connections/${await freshAgentId()}/revoke`,
    accepts: ['owner'],
  },
  'POST /v1/enrollments': { method: 'POST', path: async () => '/v1/enrollments', accepts: ['owner'] },
  'GET /v1/devices': { method: 'GET', path: async () => '/v1/devices', accepts: ['owner', 'agent'] },
  'POST /v1/devices/{id}/revoke': { method: 'POST', path: async () => `/v1/devices/${await freshDeviceId()}/revoke`, accepts: ['owner'] },
  'POST /v1/sdk/devices': { method: 'POST', path: async () => '/v1/sdk/devices', body: { name: 'matrix device' }, accepts: ['setup'] },
  'POST /v1/device/{id}/manifest': { method: 'POST', path: async () => `/v1/device/${deviceId}/manifest`, body: lampManifest, accepts: ['device'] },
};

const kinds: Kind[] = ['owner', 'agent', 'setup', 'device'];
const cases = Object.entries(endpoints).flatMap(([name, endpoint]) => kinds.map((kind) => ({ name, kind, endpoint })));

describe('wrong-credential matrix', () => {
  it.each(cases)('$name with a valid $kind credential', async ({ kind, endpoint }) => {
    const res = await api.request(endpoint.method, await endpoint.path(), { token: tokens[kind], body: endpoint.body });
    if (endpoint.accepts.includes(kind)) {
      expect(res.status, JSON.stringify(res.body)).toBeLessThan(300);
    } else {
      expect(res.status, JSON.stringify(res.body)).toBe(403);
      expect(res.body.error.code).toBe('forbidden');
    }
  });
});

describe('invalid credentials answer 401 on every endpoint', () => {
  const invalid: Record<string, () => Promise<string>> = {
    'an unknown agent token': async () => `dfc_agent_${'A'.repeat(43)}`,
    'an unknown setup token': async () => `dfc_setup_${'A'.repeat(43)}`,
    'an unknown device token': async () => `dfc_device_${'A'.repeat(43)}`,
    'an enrollment code used as a bearer': async () => (await api.post('/v1/enrollments', { token: ownerToken })).body.data.code,
    'a token with an unknown prefix': async () => `xyz_${'A'.repeat(43)}`,
    'a forged owner session': async () => server.foreignToken('matrix-owner'),
    'an expired owner session': async () => server.ownerToken('matrix-owner', { expiresIn: '-2 minutes' }),
    'an owner session not valid yet': async () => server.ownerToken('matrix-owner', { notBefore: '10 minutes' }),
  };
  const invalidCases = Object.entries(endpoints).flatMap(([name, endpoint]) =>
    Object.entries(invalid).map(([label, make]) => ({ name, label, make, endpoint })),
  );
  it.each(invalidCases)('$name with $label', async ({ endpoint, make }) => {
    const res = await api.request(endpoint.method, await endpoint.path(), { token: await make(), body: endpoint.body });
    expect(res.status, JSON.stringify(res.body)).toBe(401);
    expect(res.body.error.code).toBe('unauthorized');
  });

  it.each(Object.entries(endpoints).map(([name, endpoint]) => ({ name, endpoint })))('$name with no credential', async ({ endpoint }) => {
    const res = await api.request(endpoint.method, await endpoint.path(), { body: endpoint.body });
    expect(res.status).toBe(401);
  });
});

describe('revocation takes effect on the next request', () => {
  it('a revoked agent token answers 401 where it answered 200', async () => {
    const agent = await createAgent(api, ownerToken);
    expect((await api.get('/v1/devices', { token: agent.token })).status).toBe(200);
    await api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: ownerToken });
    expect((await api.get('/v1/devices', { token: agent.token })).status).toBe(401);
  });

  it('a revoked setup token answers 401 where it attached', async () => {
    const setup = await createSetupToken(api, ownerToken, { name: 'r', deviceLimit: 2 });
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'one' } })).status).toBe(201);
    await api.post(`/v1/device-setup-tokens/${setup.id}/revoke`, { token: ownerToken });
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'two' } })).status).toBe(401);
  });

  it('a revoked device credential answers 401 where it published', async () => {
    const device = await attachDevice(api, ownerToken);
    await api.post(`/v1/devices/${device.id}/revoke`, { token: ownerToken });
    expect((await api.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: lampManifest })).status).toBe(401);
  });

  it('a revoked credential is 401 even on an endpoint of another kind (not 403)', async () => {
    const agent = await createAgent(api, ownerToken);
    await api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: ownerToken });
    expect((await api.get('/v1/account', { token: agent.token })).status).toBe(401);
    expect((await api.post('/v1/sdk/devices', { token: agent.token, body: { name: 'x' } })).status).toBe(401);
  });

  it('an expired setup token is 401 even on an owner endpoint', async () => {
    const setup = await api.post('/v1/device-setup-tokens', { token: ownerToken, body: { name: 'e', ttlSeconds: 60 } });
    try {
      clock.set(setup.body.data.expiresAt);
      expect((await api.get('/v1/account', { token: setup.body.data.token })).status).toBe(401);
    } finally {
      clock.set(Date.now());
    }
  });
});

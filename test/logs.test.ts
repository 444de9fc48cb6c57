import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from './helpers/api.js';
import { lampManifest } from './helpers/fixtures.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * decisions §1: one JSON line per request (method, route, status, duration, principal kind),
 * and no token, secret or Authorization header in any line. The server here sees every kind
 * of credential used rightly and wrongly; then every captured line is searched for them.
 */
let server: TestServer;
let api: Client;
let requests = 0;
const secrets: string[] = [];

/** Counts requests so the test can check there is exactly one log line per request. */
function counted(api: Client): Client {
  const count = <T>(promise: Promise<T>) => {
    requests++;
    return promise;
  };
  return {
    get: (path, options) => count(api.get(path, options)),
    post: (path, options) => count(api.post(path, options)),
    request: (method, path, options) => count(api.request(method, path, options)),
  };
}

function keep<T extends string>(secret: T): T {
  secrets.push(secret);
  return secret;
}

beforeAll(async () => {
  server = await startTestServer();
  api = counted(client(server.url));

  const owner = keep(await server.ownerToken('logs-owner'));
  const forged = keep(await server.foreignToken('logs-owner'));
  const expired = keep(await server.ownerToken('logs-owner', { expiresIn: '-5 minutes' }));

  const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'logged?', deviceLimit: 2 } });
  const setupToken = keep(setup.body.data.token as string);
  const legacy = keep((await api.post('/v1/sdk-tokens', { token: owner, body: { name: 'legacy' } })).body.data.token as string);
  const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'bot', access: 'act' } });
  const agentToken = keep(agent.body.data.token as string);

  const attached = await api.post('/v1/sdk/devices', { token: setupToken, body: { name: 'Lamp' } });
  const deviceToken = keep(attached.body.data.token as string);
  const deviceId = attached.body.data.device.id as string;
  await api.post(`/v1/device/${deviceId}/manifest`, { token: deviceToken, body: lampManifest });

  const enrollment = await api.post('/v1/enrollments', { token: owner });
  const code = keep(enrollment.body.data.code as string);
  const enrolled = await api.post('/v1/device/enroll', { body: { code, name: 'Board' } });
  const boardToken = keep(enrolled.body.data.token as string);
  await api.post('/v1/device/enroll', { body: { code, name: 'Replay' } }); // 401: used code

  // Wrong kinds (403), unknown and forged (401), malformed, and secrets in odd places.
  await api.get('/v1/account', { token: agentToken });
  await api.get('/v1/account', { token: setupToken });
  await api.get('/v1/account', { token: deviceToken });
  await api.post('/v1/sdk/devices', { token: owner, body: { name: 'x' } });
  await api.get('/v1/account', { token: forged });
  await api.get('/v1/account', { token: expired });
  await api.get('/v1/account', { token: `${setupToken}x` });
  await api.get(`/v1/devices?token=${agentToken}`, { token: owner });
  await api.get(`/v1/${deviceToken}`, { token: owner });
  await api.post('/v1/device-setup-tokens', { token: owner, raw: `{"name": "${legacy}"` });
  await api.post('/v1/agent-connections', { token: owner, body: { name: boardToken } });

  // Revocations, then the revoked credentials.
  await api.post(`/v1/agent-connections/${agent.body.data.id}/revoke`, { token: owner });
  await api.post(`/v1/device-setup-tokens/${setup.body.data.id}/revoke`, { token: owner });
  await api.post(`/v1/devices/${deviceId}/revoke`, { token: owner });
  await api.get('/v1/devices', { token: agentToken });
  await api.post('/v1/sdk/devices', { token: setupToken, body: { name: 'late' } });
  await api.post(`/v1/device/${deviceId}/manifest`, { token: deviceToken, body: lampManifest });
  await api.get('/v1/devices', { token: owner });
});
afterAll(() => server.close());

describe('request log', () => {
  it('writes exactly one JSON line per request', () => {
    const lines = server.logs.map((line) => JSON.parse(line));
    expect(lines.filter((line) => line.msg === 'request')).toHaveLength(requests);
    expect(server.logs.every((line) => !line.includes('\n'))).toBe(true);
  });

  it('records method, route pattern, status, duration and principal kind', () => {
    const lines = server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request');
    for (const line of lines) {
      expect(line).toMatchObject({
        method: expect.stringMatching(/^(GET|POST)$/),
        route: expect.any(String),
        status: expect.any(Number),
        durationMs: expect.any(Number),
        requestId: expect.any(String),
      });
      expect(line).toHaveProperty('principalKind');
      expect(line.route).not.toMatch(/[0-9a-f]{8}-[0-9a-f]{4}-/); // the pattern, not the URL
    }
    const attach = lines.find((line) => line.route === '/v1/sdk/devices' && line.status === 201);
    expect(attach.principalKind).toBe('setup');
    const manifest = lines.find((line) => line.route === '/v1/device/:deviceId/manifest' && line.status === 200);
    expect(manifest.principalKind).toBe('device');
    const unauthenticated = lines.find((line) => line.route === '/v1/account' && line.status === 401);
    expect(unauthenticated.principalKind).toBeNull();
  });
});

describe('no secret in any log line', () => {
  it('captured some credentials of every kind', () => {
    for (const prefix of ['dfc_setup_', 'dfc_agent_', 'dfc_device_', 'dfc_enroll_', 'eyJ']) {
      expect(secrets.some((secret) => secret.startsWith(prefix))).toBe(true);
    }
  });

  it('contains none of the tokens issued or used during the test, nor their hashes', () => {
    const text = server.logs.join('\n');
    for (const secret of secrets) {
      expect(text).not.toContain(secret);
      // Beyond the public display prefix (kind + 4 characters), no part of the secret either.
      const body = secret.startsWith('eyJ') ? secret.split('.')[2]! : secret.slice(secret.indexOf('_', 4) + 1 + 4);
      expect(text).not.toContain(body.slice(0, 16));
      expect(text).not.toContain(createHash('sha256').update(secret).digest('hex'));
    }
  });

  it('contains no Authorization header', () => {
    const text = server.logs.join('\n').toLowerCase();
    expect(text).not.toContain('bearer');
    expect(text).not.toContain('authorization');
  });
});

import { createHash } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExpirySweep } from '../../src/domain/expiry.js';
import { startHousekeeping } from '../../src/domain/housekeeping.js';
import { createLogger } from '../../src/logger.js';
import { tokenKinds } from '../../src/domain/tokens.js';
import { client, type Client } from '../helpers/api.js';
import { lampManifest } from '../helpers/fixtures.js';
import { envelope, MODERN } from '../helpers/mcp-client.js';
import { authorizationUrl, decide, ownerCookie, pkce, registerClient, startOAuthTestServer, tokenRequest } from '../helpers/oauth.js';
import type { TestServer } from '../helpers/server.js';
import { openSocket, wsUrl } from '../helpers/ws.js';

/**
 * docs/reference/rules.md "Running": one JSON line per request (method, route, status, duration, principal kind),
 * and no token, secret or Authorization header in any line. The server here sees every kind
 * of credential used rightly and wrongly; then every captured line is searched for them.
 */
let server: TestServer;
let api: Client;
let agentConnectionId: string;
let attachedDeviceId: string;
let requests = 0;
const secrets: string[] = [];
const CALLBACK = 'http://127.0.0.1:9/callback';

/**
 * Counts every HTTP request the test sends (its own client and the OAuth helpers all use
 * fetch), so the test can check there is exactly one log line per request.
 */
const realFetch = globalThis.fetch;
globalThis.fetch = ((...args: Parameters<typeof fetch>) => {
  requests++;
  return realFetch(...args);
}) as typeof fetch;
afterAll(() => {
  globalThis.fetch = realFetch;
});

function keep<T extends string>(secret: T): T {
  secrets.push(secret);
  return secret;
}

beforeAll(async () => {
  // PUBLIC_BASE_URL on the listening address, so the OAuth flow below works end to end.
  const oauthServer = await startOAuthTestServer();
  server = oauthServer;
  api = client(server.url);

  const owner = keep(await server.ownerToken('logs-owner'));
  const forged = keep(await server.foreignToken('logs-owner'));
  const expired = keep(await server.ownerToken('logs-owner', { expiresIn: '-5 minutes' }));

  const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name: 'logged?', deviceLimit: 2 } });
  const setupToken = keep(setup.body.data.token as string);
  const legacy = keep((await api.post('/v1/sdk-tokens', { token: owner, body: { name: 'legacy' } })).body.data.token as string);
  const agent = await api.post('/v1/agent-connections', { token: owner, body: { name: 'bot', access: 'act' } });
  const agentToken = keep(agent.body.data.token as string);
  agentConnectionId = agent.body.data.id as string;

  const attached = await api.post('/v1/sdk/devices', { token: setupToken, body: { name: 'Lamp' } });
  const deviceToken = keep(attached.body.data.token as string);
  const deviceId = attached.body.data.device.id as string;
  attachedDeviceId = deviceId;
  await api.post(`/v1/device/${deviceId}/manifest`, { token: deviceToken, body: lampManifest });

  // A wake-channel ticket, redeemed once on the upgrade and then replayed (refused).
  const ticket = keep((await api.post(`/v1/device/${deviceId}/events-ticket`, { token: deviceToken })).body.data.ticket as string);
  const opened = await openSocket(wsUrl(server.url, deviceId, ticket));
  requests++;
  if (opened.ok) opened.socket.ws.close();
  await openSocket(wsUrl(server.url, deviceId, ticket));
  requests++;

  // OAuth: a confidential client (its secret), the consent session, the code, access and
  // refresh tokens, a rotation, the tokens used rightly and wrongly, and a revocation.
  const registered = await registerClient(oauthServer.issuer, owner, { name: 'logged client', redirectUris: [CALLBACK], public: false, access: 'act' });
  const clientSecret = keep(registered.token!);
  const cookie = await ownerCookie(oauthServer.issuer, owner);
  keep(decodeURIComponent(cookie.slice(cookie.indexOf('=') + 1)));
  const { verifier, challenge } = pkce();
  const back = await decide(
    authorizationUrl(oauthServer.issuer, { client_id: registered.oauth.clientId, redirect_uri: CALLBACK, code_challenge: challenge, scope: 'read act' }),
    cookie,
  );
  const authorizationCode = keep(back.searchParams.get('code')!);
  const basic = { id: registered.oauth.clientId, secret: clientSecret };
  const form = { grant_type: 'authorization_code', code: authorizationCode, redirect_uri: CALLBACK, code_verifier: verifier, resource: oauthServer.resource };
  const issued = await tokenRequest(oauthServer.issuer, form, basic);
  const accessToken = keep(issued.body.access_token as string);
  const refreshToken = keep(issued.body.refresh_token as string);
  const rotated = await tokenRequest(oauthServer.issuer, { grant_type: 'refresh_token', refresh_token: refreshToken }, basic);
  keep(rotated.body.access_token as string);
  const newRefresh = keep(rotated.body.refresh_token as string);
  await api.get('/v1/devices', { token: accessToken });
  await api.get('/v1/account', { token: accessToken });
  await api.get('/v1/devices', { token: refreshToken });
  await api.get('/v1/devices', { token: clientSecret });
  await fetch(`${server.url}/mcp`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${accessToken}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/list',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope() } }),
  }).then((res) => res.text());
  await fetch(`${oauthServer.issuer}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded', authorization: `Basic ${Buffer.from(`${basic.id}:${basic.secret}`).toString('base64')}` },
    body: new URLSearchParams({ token: newRefresh }).toString(),
  }).then((res) => res.text());
  await api.get('/v1/devices', { token: rotated.body.access_token });
  await tokenRequest(oauthServer.issuer, form, basic); // a replayed code (revokes its tokens)

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

  it('names the actor: connection id and principal for agents, device id for devices, a pseudonym for owners', () => {
    const lines = server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request');
    const ownerLine = lines.find((line) => line.principalKind === 'owner');
    expect(ownerLine.principalId).toBe(createHash('sha256').update('logs-owner').digest('hex').slice(0, 16));
    expect(ownerLine.workspaceId).toEqual(expect.any(String));
    const agentLine = lines.find((line) => line.principalKind === 'agent' && line.oauthClientId === undefined);
    expect(agentLine).toMatchObject({ principalId: agentConnectionId, principal: `agent:${agentConnectionId}` });
    expect(lines.some((line) => line.principalKind === 'agent' && typeof line.oauthClientId === 'string')).toBe(true);
    const deviceLine = lines.find((line) => line.route === '/v1/device/:deviceId/manifest' && line.status === 200);
    expect(deviceLine.principalId).toBe(attachedDeviceId);
    const socketLine = lines.find((line) => line.route === '/v1/device/:deviceId/events' && line.status === 101);
    expect(socketLine).toMatchObject({ principalKind: 'device', principalId: attachedDeviceId });
    // The owner's sub itself is never written: it may be an e-mail address.
    expect(server.logs.join('\n')).not.toContain('"logs-owner"');
  });

  it('adds the error code to failed requests, and only to them', () => {
    const lines = server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'request');
    const enveloped = lines.filter((line) => line.status >= 400 && !line.route.startsWith('/oauth/'));
    expect(enveloped.length).toBeGreaterThan(5);
    for (const line of enveloped) expect(line.errorCode, JSON.stringify(line)).toMatch(/^[a-z_]+$/);
    expect(lines.find((line) => line.route === '/v1/account' && line.status === 401).errorCode).toBe('unauthorized');
    expect(lines.find((line) => line.route === '/v1/account' && line.status === 403).errorCode).toBe('forbidden');
    expect(lines.find((line) => line.route === '/v1/device/:deviceId/events' && line.status === 401).errorCode).toBe('unauthorized');
    for (const line of lines.filter((l) => l.status < 400)) expect(line).not.toHaveProperty('errorCode');
  });
});

describe('LOG_LEVEL', () => {
  const levels = ['debug', 'info', 'warn', 'error'] as const;
  it.each([
    ['debug', ['debug', 'info', 'warn', 'error']],
    ['info', ['info', 'warn', 'error']],
    ['warn', ['warn', 'error']],
    ['error', ['error']],
    ['silent', []],
  ] as const)('%s writes %j', (level, written) => {
    const lines: string[] = [];
    const log = createLogger(level, (line) => lines.push(line));
    for (const severity of levels) log[severity]({ msg: `a ${severity} line`, detail: 1 });
    expect(lines.map((line) => JSON.parse(line).level)).toEqual(written);
    for (const line of lines) expect(Object.keys(JSON.parse(line)).slice(0, 3)).toEqual(['level', 'time', 'msg']);
  });
});

describe('no secret in any log line', () => {
  it('captured some credentials of every kind the service issues', () => {
    // From the token table itself: a new kind of token fails here until this test uses one.
    for (const prefix of [...Object.values(tokenKinds), 'eyJ']) {
      expect(
        secrets.some((secret) => secret.startsWith(prefix)),
        prefix,
      ).toBe(true);
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
    expect(text).not.toMatch(/basic [a-z0-9+/=]{8}/);
    // OAuth's own messages name the authorization flow ("authorization approved"); what must
    // never appear is the header, as a field or as its value.
    for (const line of server.logs) {
      const keys = Object.keys(JSON.parse(line) as Record<string, unknown>).map((k) => k.toLowerCase());
      expect(keys.filter((k) => k.includes('authorization') || k === 'headers')).toEqual([]);
    }
    expect(text).not.toContain('authorization:');
    expect(text).not.toContain('"authorization"');
  });
});

describe('background work', () => {
  /** Runs a sweep every 10 ms with a debug logger until it has written a line. */
  async function firstLine(start: (log: ReturnType<typeof createLogger>) => () => unknown): Promise<Record<string, unknown>> {
    const lines: string[] = [];
    const stop = start(createLogger('debug', (line) => lines.push(line)));
    while (lines.length === 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await stop();
    return JSON.parse(lines[0]!) as Record<string, unknown>;
  }
  const clock = { now: () => Date.now() };

  it('an expiry sweep writes msg, its count and durationMs (debug when it expired nothing)', async () => {
    const line = await firstLine((log) => startExpirySweep({ db: server.service.db, events: server.service.events, clock, log }, 10));
    expect(line).toMatchObject({ level: 'debug', msg: 'expiry sweep', expired: 0, durationMs: expect.any(Number) });
  });

  it('a housekeeping run writes msg, the rows deleted per table and durationMs', async () => {
    const line = await firstLine((log) => startHousekeeping({ db: server.service.db, clock, log }, 10));
    expect(line).toMatchObject({ msg: 'housekeeping', deleted: expect.any(Object), durationMs: expect.any(Number) });
    expect(['debug', 'info']).toContain(line.level);
  });
});

import { Agent, fetch as undiciFetch } from 'undici';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, useTestServer, type TestServer } from '../helpers/server.js';

let owner: string;
let now = 1_800_000_000_000;

const server = useTestServer({
  clock: { now: () => now },
  env: {
    RATE_LIMIT_AGENT_PER_SECOND: '2',
    RATE_LIMIT_AGENT_BURST: '4',
    RATE_LIMIT_DEVICE_PER_SECOND: '1',
    RATE_LIMIT_DEVICE_BURST: '3',
    AUTH_FAILURES_PER_MINUTE: '5',
    WORKSPACE_MAX_DEVICES: '3',
    DEVICE_QUEUE_PER_PRINCIPAL: '2',
    WORKSPACE_MAX_QUEUED_ACTIONS: '3',
  },
});
const http = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('alice');
});

describe('rate limits per credential (docs/reference/rules.md "Errors and limits")', () => {
  it('answers 429 with Retry-After and RateLimit headers once an agent token spends its burst, and refills with time', async () => {
    const agent = await createAgent(http, owner, { access: 'read' });
    for (let i = 0; i < 4; i++) expect((await http.get('/v1/functions', { token: agent.token })).status).toBe(200);
    const limited = await http.get('/v1/functions', { token: agent.token });
    expect(limited.status).toBe(429);
    expect(limited.body.error.code).toBe('rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(limited.headers.get('ratelimit-limit')).toBe('4');
    expect(limited.headers.get('ratelimit-remaining')).toBe('0');
    now += 1000;
    expect((await http.get('/v1/functions', { token: agent.token })).status).toBe(200);
  });

  it('keeps one agent connection’s bucket apart from another’s', async () => {
    const a = await createAgent(http, owner, { access: 'read' });
    const b = await createAgent(http, owner, { access: 'read' });
    for (let i = 0; i < 4; i++) await http.get('/v1/functions', { token: a.token });
    expect((await http.get('/v1/functions', { token: a.token })).status).toBe(429);
    expect((await http.get('/v1/functions', { token: b.token })).status).toBe(200);
  });

  it('limits a device credential with its own, smaller bucket', async () => {
    now += 60_000;
    const device = await attachDevice(http, owner, { manifest: null });
    const poll = () => http.post(`/v1/device/${device.id}/next`, { token: device.token, headers: { 'x-service-workspace': device.workspace } });
    for (let i = 0; i < 3; i++) expect((await poll()).status).toBe(200);
    expect((await poll()).status).toBe(429);
  });
});

describe('rate limit per owner', () => {
  it('answers 429 once an owner spends their burst, whichever session they use, and leaves other owners alone', async () => {
    const limited = await startTestServer({ clock: { now: () => now }, env: { RATE_LIMIT_OWNER_PER_SECOND: '2', RATE_LIMIT_OWNER_BURST: '3' } });
    try {
      const api = client(limited.url);
      const first = await limited.ownerToken('dora');
      const second = await limited.ownerToken('dora', { expiresIn: '2h' });
      for (let i = 0; i < 3; i++) expect((await api.get('/v1/account', { token: first })).status).toBe(200);
      const refused = await api.get('/v1/account', { token: second });
      expect(refused.status).toBe(429);
      expect(refused.body.error.code).toBe('rate_limited');
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      expect((await api.get('/v1/account', { token: await limited.ownerToken('erin') })).status).toBe(200);
      now += 1000;
      expect((await api.get('/v1/account', { token: first })).status).toBe(200);
    } finally {
      await limited.close();
    }
  });
});

describe('failed authentications per client address: failures are throttled, not people', () => {
  // Each address is a loopback address of its own (all of 127.0.0.0/8 is loopback on Linux),
  // so "another address" is one the server really sees as different.
  const agents: Agent[] = [];
  afterAll(() => Promise.all(agents.map((agent) => agent.close())));
  const from = (address: string) => {
    const dispatcher = new Agent({ localAddress: address });
    agents.push(dispatcher);
    return async (method: string, path: string, token: string, headers: Record<string, string> = {}) => {
      const res = await undiciFetch(`${server.url}${path}`, { method, headers: { authorization: `Bearer ${token}`, ...headers }, dispatcher });
      return { status: res.status, headers: res.headers, body: (await res.json()) as any };
    };
  };

  it('serves valid agent, device and owner credentials from an address over its budget, and answers its further failures 429', async () => {
    now += 600_000;
    const agent = await createAgent(http, owner, { access: 'read' });
    const device = await attachDevice(http, owner, { manifest: null });
    const nat = from('127.0.0.20');
    for (let i = 0; i < 5; i++) expect((await nat('GET', '/v1/account', 'dfc_agent_nope')).status).toBe(401);

    const wrong = await nat('GET', '/v1/account', `dfc_agent_${'x'.repeat(43)}`);
    expect(wrong.status).toBe(429);
    expect(wrong.body.error.code).toBe('rate_limited');
    expect(Number(wrong.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);

    expect((await nat('GET', '/v1/account', owner)).status).toBe(200);
    expect((await nat('GET', '/v1/functions', agent.token)).status).toBe(200);
    const poll = await nat('POST', `/v1/device/${device.id}/next`, device.token, { 'x-service-workspace': device.workspace });
    expect(poll.status).toBe(200);

    // Tokens that cannot be valid are refused before any lookup; plausible ones after it.
    for (const token of ['garbage', 'dfc_agent_short', 'a.b.c', await server.foreignToken('mallory'), await server.ownerToken('alice', { expiresIn: '-1h' })]) {
      expect((await nat('GET', '/v1/account', token)).status, token).toBe(429);
    }
    // A valid credential after all those failures is still served.
    expect((await nat('GET', '/v1/account', owner)).status).toBe(200);
  });

  it('keeps another address unaffected, and lets the failing one back once its bucket refills', async () => {
    now += 600_000;
    const nat = from('127.0.0.21');
    for (let i = 0; i < 5; i++) await nat('GET', '/v1/account', 'dfc_agent_nope');
    expect((await nat('GET', '/v1/account', 'dfc_agent_nope')).status).toBe(429);
    expect((await from('127.0.0.22')('GET', '/v1/account', 'dfc_agent_nope')).status).toBe(401);
    now += 60_000;
    expect((await nat('GET', '/v1/account', 'dfc_agent_nope')).status).toBe(401);
  });
});

describe('workspace capacity', () => {
  let lamp: AttachedDevice;
  let agent: { token: string; principal: string };

  it('refuses a device beyond the workspace limit with 429 capacity_exceeded, counting gateway children', async () => {
    now += 600_000;
    const bob = await server.ownerToken('bob');
    lamp = await attachDevice(http, bob);
    const gateway = await attachDevice(http, bob, { kind: 'gateway', manifest: null });
    const twoChildren = {
      capabilities: [],
      children: [
        { key: 'a', name: 'A', kind: 'device', capabilities: [] },
        { key: 'b', name: 'B', kind: 'device', capabilities: [] },
      ],
    };
    const tooMany = await http.post(`/v1/device/${gateway.id}/manifest`, { token: gateway.token, body: twoChildren });
    expect(tooMany.status).toBe(429);
    expect(tooMany.body.error.code).toBe('capacity_exceeded');
    const oneChild = { capabilities: [], children: [twoChildren.children[0]] };
    expect((await http.post(`/v1/device/${gateway.id}/manifest`, { token: gateway.token, body: oneChild })).status).toBe(200);

    const setup = await http.post('/v1/device-setup-tokens', { token: bob, body: { name: 'one more' } });
    const refused = await http.post('/v1/sdk/devices', { token: setup.body.data.token, body: { name: 'Fourth' } });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('capacity_exceeded');
    expect(refused.headers.get('retry-after')).toBeTruthy();
    const devices = await http.get('/v1/devices', { token: bob });
    expect(devices.body.data).toHaveLength(3);

    agent = await createAgent(http, bob, { access: 'act' });
    await http.post('/v1/grants', { token: bob, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['get_state'] } });
  });

  it("refuses a queued action beyond the principal's share of the device queue, naming the limit, and nothing is written", async () => {
    const request = () => http.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'get_state', arguments: {} } });
    expect((await request()).status).toBe(201);
    expect((await request()).status).toBe(201);
    const refused = await request();
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('capacity_exceeded');
    expect(refused.body.error.message).toContain('at most 2 queued actions per device');
    expect(refused.headers.get('retry-after')).toBe('1');
    const history = await http.get('/v1/actions', { token: await server.ownerToken('bob') });
    expect(history.body.data).toHaveLength(2);
  });

  it("accepts another principal's request on that device, and the workspace total stays the overall bound", async () => {
    const bob = await server.ownerToken('bob');
    const request = async (principal: string) => {
      const other = await createAgent(http, bob, { access: 'act', principal });
      await http.post('/v1/grants', { token: bob, body: { principal, deviceId: lamp.id, capabilities: ['get_state'] } });
      return http.post(`/v1/devices/${lamp.id}/actions`, { token: other.token, body: { capability: 'get_state', arguments: {} } });
    };
    expect((await request('agent:second')).status).toBe(201);
    const overall = await request('agent:third'); // the workspace holds at most 3
    expect(overall.status).toBe(429);
    expect(overall.body.error.message).toContain('The workspace holds at most 3 queued actions');
  });
});

describe('client address behind trusted proxies (TRUST_PROXY_HOPS)', () => {
  const failures = (proxied: TestServer, forwardedFor: string) =>
    client(proxied.url).get('/v1/account', { token: 'dfc_agent_nope', headers: { 'x-forwarded-for': forwardedFor } });

  it('counts failures per address the trusted proxy saw, ignoring what the client wrote further left', async () => {
    const proxied = await startTestServer({ env: { TRUST_PROXY_HOPS: '1', AUTH_FAILURES_PER_MINUTE: '3' } });
    try {
      const owner = await proxied.ownerToken('carol');
      // The client writes its own X-Forwarded-For entries; the proxy appends 203.0.113.7.
      for (const spoof of ['1.1.1.1', '2.2.2.2', '3.3.3.3']) expect((await failures(proxied, `${spoof}, 203.0.113.7`)).status).toBe(401);
      expect((await failures(proxied, '9.9.9.9, 203.0.113.7')).status).toBe(429);
      expect((await client(proxied.url).get('/v1/account', { token: owner, headers: { 'x-forwarded-for': '9.9.9.9, 203.0.113.7' } })).status).toBe(200);
      expect((await failures(proxied, '198.51.100.2')).status).toBe(401);
    } finally {
      await proxied.close();
    }
  });

  it('counts an IPv6 client by its /64: rotating the address within the network evades nothing', async () => {
    const proxied = await startTestServer({ env: { TRUST_PROXY_HOPS: '1', AUTH_FAILURES_PER_MINUTE: '3' } });
    try {
      for (const address of ['2001:db8:1:2::1', '2001:db8:1:2::2', '2001:db8:1:2:ffff:ffff:ffff:ffff']) {
        expect((await failures(proxied, address)).status).toBe(401);
      }
      expect((await failures(proxied, '2001:db8:1:2:0:0:0:99')).status).toBe(429);
      // Another /64 is another client.
      expect((await failures(proxied, '2001:db8:1:3::1')).status).toBe(401);
    } finally {
      await proxied.close();
    }
  });

  it('ignores X-Forwarded-For when no proxy is trusted, so rotating it evades nothing', async () => {
    const direct = await startTestServer({ env: { AUTH_FAILURES_PER_MINUTE: '3' } });
    try {
      for (const spoof of ['1.1.1.1', '2.2.2.2', '3.3.3.3']) expect((await failures(direct, spoof)).status).toBe(401);
      expect((await failures(direct, '4.4.4.4')).status).toBe(429);
    } finally {
      await direct.close();
    }
  });
});

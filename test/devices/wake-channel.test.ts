import { beforeAll, describe, expect, it } from 'vitest';
import { WebSocket } from 'ws';
import { hashToken } from '../../src/domain/tokens.js';
import { client } from '../helpers/api.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { connectDevice, issueTicket, openSocket, wsUrl } from '../helpers/ws.js';

const clock = manualClock();
let owner: string;
let agent: { token: string; principal: string };

const server = useTestServer({ clock });
const http = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('wake-owner');
  agent = await createAgent(http, owner, { access: 'act' });
});

async function grant(deviceId: string) {
  const res = await http.post('/v1/grants', {
    token: owner,
    body: { principal: agent.principal, deviceId, capabilities: ['get_state', 'set_power', 'set_brightness'] },
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
}

async function lamp(): Promise<AttachedDevice> {
  const device = await attachDevice(http, owner);
  await grant(device.id);
  return device;
}

async function queue(deviceId: string, on = true): Promise<string> {
  const res = await http.post(`/v1/devices/${deviceId}/actions`, { token: agent.token, body: { capability: 'set_power', arguments: { on } } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data.id as string;
}

const gatewayManifest = {
  capabilities: [],
  children: [
    { key: 'lamp-1', name: 'Lamp 1', kind: 'device', capabilities: lampManifest.capabilities },
    { key: 'lamp-2', name: 'Lamp 2', kind: 'device', capabilities: lampManifest.capabilities },
  ],
};

describe('POST /v1/device/{deviceId}/events-ticket', () => {
  it('issues a dfc_ticket_ valid for 30 s and stores only its hash', async () => {
    const device = await lamp();
    const res = await http.post(`/v1/device/${device.id}/events-ticket`, { token: device.token });
    expect(res.status).toBe(201);
    expect(res.body.data).toEqual({ ticket: expect.stringMatching(/^dfc_ticket_[A-Za-z0-9_-]{43}$/), expiresAt: clock.now() + 30_000 });
    const rows = await server.service.db.all<Record<string, unknown>>('SELECT * FROM event_tickets WHERE device_id = ?', [device.id]);
    expect(rows).toHaveLength(1);
    expect(rows[0]!.ticket_hash).toBe(hashToken(res.body.data.ticket));
    expect(JSON.stringify(rows)).not.toContain(res.body.data.ticket);
  });

  it("answers 403 for another device's id and for a credential that is not a device's", async () => {
    const mine = await lamp();
    const other = await lamp();
    expect((await http.post(`/v1/device/${other.id}/events-ticket`, { token: mine.token })).status).toBe(403);
    expect((await http.post(`/v1/device/${mine.id}/events-ticket`, { token: agent.token })).status).toBe(403);
    expect((await http.post(`/v1/device/${mine.id}/events-ticket`, { token: owner })).status).toBe(403);
  });

  it('answers 401 without a credential and for a revoked device', async () => {
    const device = await lamp();
    expect((await http.post(`/v1/device/${device.id}/events-ticket`)).status).toBe(401);
    await http.post(`/v1/devices/${device.id}/revoke`, { token: owner });
    const res = await http.post(`/v1/device/${device.id}/events-ticket`, { token: device.token });
    expect(res.status).toBe(401);
    expect(res.body.error.code).toBe('unauthorized');
  });
});

describe('GET /v1/device/{deviceId}/events: ticket rules before the upgrade', () => {
  const expectRefused = (upgrade: Awaited<ReturnType<typeof openSocket>>) => {
    expect(upgrade.ok).toBe(false);
    if (upgrade.ok) return;
    expect(upgrade.status).toBe(401);
    expect(upgrade.body).toEqual({ error: { code: 'unauthorized', message: expect.any(String), requestId: expect.any(String) } });
  };

  it('upgrades with a fresh ticket', async () => {
    const device = await lamp();
    const upgrade = await openSocket(wsUrl(server.url, device.id, await issueTicket(http, device)));
    expect(upgrade.ok).toBe(true);
    if (upgrade.ok) upgrade.socket.ws.close();
  });

  it("carries the request id on the 101 answer and on a refusal, the caller's own when it is well formed", async () => {
    const device = await lamp();
    const answerOf = (url: string) =>
      new Promise<{ status: number; requestId: string | undefined }>((resolve, reject) => {
        const ws = new WebSocket(url, { headers: { 'x-request-id': 'wake-probe-1' } });
        ws.on('upgrade', (res) => {
          resolve({ status: res.statusCode ?? 0, requestId: res.headers['x-request-id'] as string | undefined });
          ws.close();
        });
        ws.on('unexpected-response', (_req, res) => {
          resolve({ status: res.statusCode ?? 0, requestId: res.headers['x-request-id'] as string | undefined });
          res.resume();
        });
        ws.on('error', reject);
      });
    expect(await answerOf(wsUrl(server.url, device.id, await issueTicket(http, device)))).toEqual({ status: 101, requestId: 'wake-probe-1' });
    expect(await answerOf(wsUrl(server.url, device.id))).toEqual({ status: 401, requestId: 'wake-probe-1' });
  });

  it('refuses a missing ticket with 401 and the error envelope', async () => {
    const device = await lamp();
    expectRefused(await openSocket(wsUrl(server.url, device.id)));
    expectRefused(await openSocket(wsUrl(server.url, device.id, '')));
  });

  it('refuses an unknown ticket and a device credential in place of a ticket', async () => {
    const device = await lamp();
    expectRefused(await openSocket(wsUrl(server.url, device.id, 'dfc_ticket_AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA')));
    expectRefused(await openSocket(wsUrl(server.url, device.id, device.token)));
  });

  it('lets a ticket be used once only', async () => {
    const device = await lamp();
    const ticket = await issueTicket(http, device);
    const first = await openSocket(wsUrl(server.url, device.id, ticket));
    expect(first.ok).toBe(true);
    expectRefused(await openSocket(wsUrl(server.url, device.id, ticket)));
    if (first.ok) first.socket.ws.close();
  });

  it('lets exactly one of two concurrent upgrades with the same ticket through', async () => {
    const device = await lamp();
    const ticket = await issueTicket(http, device);
    const results = await Promise.all([1, 2, 3].map(() => openSocket(wsUrl(server.url, device.id, ticket))));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    for (const r of results) if (r.ok) r.socket.ws.close();
  });

  it('refuses a ticket at its 30 s deadline and accepts one just before', async () => {
    const device = await lamp();
    const late = await issueTicket(http, device);
    const inTime = await issueTicket(http, device);
    clock.advance(29_999);
    const accepted = await openSocket(wsUrl(server.url, device.id, inTime));
    expect(accepted.ok).toBe(true);
    clock.advance(1);
    expectRefused(await openSocket(wsUrl(server.url, device.id, late)));
    if (accepted.ok) accepted.socket.ws.close();
  });

  it('refuses a ticket presented for another device, without using it up', async () => {
    const device = await lamp();
    const other = await lamp();
    const ticket = await issueTicket(http, device);
    expectRefused(await openSocket(wsUrl(server.url, other.id, ticket)));
    const own = await openSocket(wsUrl(server.url, device.id, ticket));
    expect(own.ok).toBe(true);
    if (own.ok) own.socket.ws.close();
  });

  it('refuses a ticket of a device revoked after it was issued', async () => {
    const device = await lamp();
    const ticket = await issueTicket(http, device);
    await http.post(`/v1/devices/${device.id}/revoke`, { token: owner });
    expectRefused(await openSocket(wsUrl(server.url, device.id, ticket)));
  });

  it('answers 404 with the envelope for an upgrade on any other path', async () => {
    const upgrade = await openSocket(`${server.url.replace(/^http/, 'ws')}/v1/devices`);
    expect(upgrade).toMatchObject({ ok: false, status: 404, body: { error: { code: 'not_found' } } });
  });
});

describe('wake frames', () => {
  it('sends { type: "wake", deviceId, actionId } to every open socket of the device when a command is queued', async () => {
    const device = await lamp();
    const bystander = await lamp();
    const a = await connectDevice(http, server.url, device);
    const b = await connectDevice(http, server.url, device);
    const other = await connectDevice(http, server.url, bystander);
    const actionId = await queue(device.id);
    expect(await a.nextFrame()).toEqual({ type: 'wake', deviceId: device.id, actionId });
    expect(await b.nextFrame()).toEqual({ type: 'wake', deviceId: device.id, actionId });

    // The bystander's first frame is its own command's: nothing of the other device reached it.
    const own = await queue(bystander.id);
    expect(await other.nextFrame()).toEqual({ type: 'wake', deviceId: bystander.id, actionId: own });
    for (const s of [a, b, other]) s.ws.close();
  });

  it('wakes only for queued commands, not for later state changes', async () => {
    const device = await lamp();
    const socket = await connectDevice(http, server.url, device);
    const first = await queue(device.id);
    expect(await socket.nextFrame()).toMatchObject({ actionId: first });
    const next = await http.post(`/v1/device/${device.id}/next`, { token: device.token, headers: { 'x-service-workspace': device.workspace } });
    expect(next.body.data.id).toBe(first);
    await http.post(`/v1/device/${device.id}/result`, { token: device.token, body: { actionId: first, ok: true } });
    const second = await queue(device.id, false);
    expect(await socket.nextFrame()).toMatchObject({ actionId: second });
    expect(socket.frames).toHaveLength(2);
    socket.ws.close();
  });

  it("wakes a gateway's socket for a command queued for one of its children, naming the child", async () => {
    const gateway = await attachDevice(http, owner, { kind: 'gateway', manifest: null });
    const published = await http.post(`/v1/device/${gateway.id}/manifest`, { token: gateway.token, body: gatewayManifest });
    const child = published.body.data.children.find((c: { name: string }) => c.name === 'Lamp 2');
    await grant(child.id);
    const socket = await connectDevice(http, server.url, gateway);
    const actionId = await queue(child.id);
    expect(await socket.nextFrame()).toEqual({ type: 'wake', deviceId: child.id, actionId });
    const next = await http.post(`/v1/device/${gateway.id}/next`, { token: gateway.token, headers: { 'x-service-workspace': gateway.workspace } });
    expect(next.body.data).toMatchObject({ id: actionId, deviceId: child.id });
    socket.ws.close();
  });
});

describe('revocation closes the socket (docs/reference/rules.md "Credentials")', () => {
  it('closes every socket of a revoked device with code 4401', async () => {
    const device = await lamp();
    const a = await connectDevice(http, server.url, device);
    const b = await connectDevice(http, server.url, device);
    await http.post(`/v1/devices/${device.id}/revoke`, { token: owner });
    expect(await a.closed).toEqual({ code: 4401, reason: 'device revoked' });
    expect((await b.closed).code).toBe(4401);
  });

  it("closes a gateway's socket with 4401 when the gateway is revoked, and keeps it open when one child is", async () => {
    const gateway = await attachDevice(http, owner, { kind: 'gateway', manifest: gatewayManifest });
    const children = (await http.get('/v1/devices', { token: owner })).body.data.filter((d: { parentId: string }) => d.parentId === gateway.id);
    const socket = await connectDevice(http, server.url, gateway);
    await http.post(`/v1/devices/${children[0].id}/revoke`, { token: owner });
    await grant(children[1].id);
    const actionId = await queue(children[1].id);
    expect(await socket.nextFrame()).toMatchObject({ actionId }); // still open after the child's revocation
    await http.post(`/v1/devices/${gateway.id}/revoke`, { token: owner });
    expect((await socket.closed).code).toBe(4401);
  });
});

describe('socket limits', () => {
  it('closes the socket with 1009 when a device sends more than the small payload limit', async () => {
    const device = await lamp();
    const socket = await connectDevice(http, server.url, device);
    socket.ws.send('x'.repeat(2048));
    expect((await socket.closed).code).toBe(1009);
  });

  it('keeps at most 4 sockets per device, closing the oldest with 4409', async () => {
    const device = await lamp();
    const sockets = [];
    for (let i = 0; i < 5; i += 1) sockets.push(await connectDevice(http, server.url, device));
    expect((await sockets[0]!.closed).code).toBe(4409);
    const actionId = await queue(device.id);
    for (const s of sockets.slice(1)) expect(await s.nextFrame()).toMatchObject({ actionId });
    for (const s of sockets.slice(1)) s.ws.close();
  });
});

describe('pings and shutdown', () => {
  it('drops a peer that does not answer protocol pings', async () => {
    const fast = await startTestServer({ env: { WS_PING_SECONDS: '1' } });
    try {
      const api = client(fast.url);
      const device = await attachDevice(api, await fast.ownerToken('ping-owner'));
      const deaf = await connectDevice(api, fast.url, device, { autoPong: false });
      expect((await deaf.closed).code).toBe(1006); // terminated without a close frame
    } finally {
      await fast.close();
    }
  });

  it('closes open sockets with 1001 and a reason when the service stops', async () => {
    const doomed = await startTestServer();
    const api = client(doomed.url);
    const device = await attachDevice(api, await doomed.ownerToken('shutdown-owner'));
    const socket = await connectDevice(api, doomed.url, device);
    await doomed.close();
    expect(await socket.closed).toEqual({ code: 1001, reason: 'service shutting down' });
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { MAX_PONGS_PER_INTERVAL } from '../../src/device-channel/socket-server.js';
import { client, type Client } from '../helpers/api.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice } from '../helpers/fixtures.js';
import { rawHead, rawRequest, UPGRADE_HEADERS } from '../helpers/raw-http.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { connectDevice } from '../helpers/ws.js';

/**
 * The wake socket against clients that break its protocol: upgrade
 * targets that once ended the process, data frames and pings from a device, pong floods.
 */

async function lastSeenAt(server: TestServer, deviceId: string): Promise<number | null> {
  const rows = await server.service.db.all<{ last_seen_at: number | null }>('SELECT last_seen_at FROM devices WHERE id = ?', [deviceId]);
  return rows[0]!.last_seen_at;
}

async function until(check: () => Promise<boolean>, ms = 3000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('condition not reached in time');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('a wake socket with the default ping interval (no ping during a test)', () => {
  const clock = manualClock();
  let server: TestServer;
  let http: Client;
  let owner: string;

  beforeAll(async () => {
    server = await startTestServer({ clock });
    http = client(server.url);
    owner = await server.ownerToken('wake-hostile-owner');
  });
  afterAll(() => server.close());

  const healthy = async () => (await fetch(`${server.url}/healthz`)).status;

  it.each([
    ['an invalid percent-encoding in the device id', 'GET /v1/device/%C0/events HTTP/1.1'],
    ['a request target that is not a URL path', 'GET //[ HTTP/1.1'],
  ])('answers an upgrade with %s with 400 invalid_request and keeps serving', async (_, requestLine) => {
    const answer = await rawRequest(server.service.port, rawHead(requestLine, ['Host: 127.0.0.1', 'X-Request-Id: crasher-1', ...UPGRADE_HEADERS]));
    expect(answer.status, answer.text).toBe(400);
    const body = JSON.parse(answer.text.slice(answer.text.indexOf('\r\n\r\n') + 4));
    expect(body).toEqual({ error: { code: 'invalid_request', message: expect.any(String), requestId: 'crasher-1' } });
    expect(server.logs.some((line) => line.includes('"requestId":"crasher-1"') && line.includes('"status":400'))).toBe(true);
    expect(await healthy()).toBe(200);
  });

  it.each([
    ['a text frame', (ws: WebSocket) => ws.send('hello')],
    ['a binary frame', (ws: WebSocket) => ws.send(Buffer.from([1, 2, 3]))],
    ['a ping of its own', (ws: WebSocket) => ws.ping()],
  ])('closes the socket with 1008 when the device sends %s', async (_, sendFrame) => {
    const device = await attachDevice(http, owner);
    const socket = await connectDevice(http, server.url, device);
    sendFrame(socket.ws);
    expect((await socket.closed).code).toBe(1008);
    expect(await healthy()).toBe(200);
  });

  it(`closes a pong flood (over ${MAX_PONGS_PER_INTERVAL} in one ping interval) with 1008 after at most one last-seen write`, async () => {
    const device = await attachDevice(http, owner);
    const socket = await connectDevice(http, server.url, device);
    // Far enough ahead that the store's own 5 s write guard lets every pong through: what
    // stops the writes is the socket, not the store.
    clock.advance(10_000);
    const firstPongAt = clock.now();
    socket.ws.pong();
    await until(async () => (await lastSeenAt(server, device.id)) === firstPongAt);
    // Every further pong comes 10 s later by the service's clock: a write per pong would
    // move last_seen_at each time.
    for (let i = 1; i < 50 && socket.ws.readyState === socket.ws.OPEN; i++) {
      clock.advance(10_000);
      socket.ws.pong();
      await pause(5);
    }
    expect((await socket.closed).code).toBe(1008);
    expect(await lastSeenAt(server, device.id)).toBe(firstPongAt);
    expect(server.logs.some((line) => line.includes('device socket policy violation') && line.includes(device.id))).toBe(true);
  });

  it(`keeps a socket open through ${MAX_PONGS_PER_INTERVAL} unsolicited pongs in one interval`, async () => {
    const device = await attachDevice(http, owner);
    const socket = await connectDevice(http, server.url, device);
    for (let i = 0; i < MAX_PONGS_PER_INTERVAL; i++) socket.ws.pong();
    await pause(100);
    expect(socket.ws.readyState).toBe(socket.ws.OPEN);
    socket.ws.close();
  });
});

describe('a wake socket pinged every second', () => {
  const clock = manualClock();
  let server: TestServer;
  let http: Client;

  beforeAll(async () => {
    server = await startTestServer({ clock, env: { WS_PING_SECONDS: '1' } });
    http = client(server.url);
  });
  afterAll(() => server.close());

  it('stays open over several ping intervals and keeps lastSeenAt fresh from the pongs alone', async () => {
    const device = await attachDevice(http, await server.ownerToken('wake-pinged-owner'));
    const socket = await connectDevice(http, server.url, device);
    for (let interval = 0; interval < 3; interval++) {
      clock.advance(6_000);
      const mark = clock.now();
      // The next ping's pong (answered by the ws client itself) writes the service's now.
      await until(async () => ((await lastSeenAt(server, device.id)) ?? 0) >= mark, 2500);
    }
    expect(socket.ws.readyState).toBe(socket.ws.OPEN);
    // The owner sees it online by the service's clock, though it never polled.
    const list = await http.get('/v1/devices', { token: await server.ownerToken('wake-pinged-owner') });
    const seen = list.body.data.find((d: { id: string }) => d.id === device.id);
    expect(seen).toMatchObject({ online: true, lastSeenAt: await lastSeenAt(server, device.id) });
    socket.ws.close();
    await socket.closed;
  });
});

import { createHash } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import { ApiError, attachDevice, Device, deviceApi, InvalidAnswerError, type DeviceEvent } from '@dfc/device';

/**
 * The Node device SDK (`@dfc/device`) against a service that answers like an attacker or a
 * broken proxy: every call has a total deadline and reads a bounded answer, follows no redirect,
 * turns a malformed answer into an InvalidAnswerError, and the wake socket drops a peer that
 * floods it or never finishes a frame. Each server is a real `node:http` server on a loopback
 * port, written to misbehave in one way. (The Python SDK's twin: packages/device-sdk-python/tests/test_hostile_service.py.)
 */

const MIB = 1024 * 1024;
const credentials = { deviceId: '11111111-1111-4111-8111-111111111111', token: 'dfc_device_SECRET', workspace: 'a'.repeat(64) };

interface Hostile {
  url: string;
  /** Body bytes the server managed to hand to its socket. */
  sent: number;
  /** Every request that reached it: method, path, authorization, body. */
  seen: { method: string; path: string; authorization: string | undefined; body: string }[];
}

const open: { server: http.Server; stop: () => void }[] = [];
const sockets: Duplex[] = [];
const devices: Device[] = [];

afterEach(async () => {
  await Promise.all(devices.splice(0).map((d) => d.stop()));
  for (const { server, stop } of open.splice(0)) {
    stop();
    server.closeAllConnections();
    for (const socket of sockets.splice(0)) socket.destroy(); // upgraded sockets are no longer the server's to close
    await new Promise((resolve) => server.close(resolve));
  }
});

/** Waits until `check` returns a value (no timed assertion: the test timeout bounds it). */
async function until<T>(check: () => T | undefined): Promise<T> {
  for (;;) {
    const value = check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

type Answer = (req: http.IncomingMessage, res: http.ServerResponse, hostile: Hostile & { stopped: () => boolean }) => void;

/** Accepts a WebSocket upgrade by hand, so the frames that follow can be anything. */
function accept(req: http.IncomingMessage, socket: Duplex): void {
  const key = createHash('sha1').update(`${req.headers['sec-websocket-key']}258EAFA5-E914-47DA-95CA-C5AB0DC85B11`).digest('base64');
  socket.write(`HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ${key}\r\n\r\n`);
}

async function hostile(
  answer: Answer,
  onUpgrade?: (req: http.IncomingMessage, socket: Duplex, hostile: Hostile & { stopped: () => boolean }) => void,
): Promise<Hostile> {
  let stopped = false;
  const state: Hostile & { stopped: () => boolean } = { url: '', sent: 0, seen: [], stopped: () => stopped };
  const server = http.createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => (body += String(chunk)));
    req.on('end', () => {
      state.seen.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body });
      res.on('error', () => undefined); // the device hung up: what this server is for
      answer(req, res, state);
    });
  });
  server.on('upgrade', (req: http.IncomingMessage, socket: Duplex) => {
    socket.on('error', () => undefined);
    sockets.push(socket);
    state.seen.push({ method: req.method ?? '', path: req.url ?? '', authorization: req.headers.authorization, body: '' });
    onUpgrade?.(req, socket, state);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  state.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  open.push({ server, stop: () => (stopped = true) });
  return state;
}

/** Writes `data` a byte every 50 ms (the server's pace, not a test wait) until the peer or the test is gone. */
function drip(write: (byte: Buffer) => boolean, data: Buffer, hostile: Hostile & { stopped: () => boolean }, index = 0): void {
  if (index >= data.length || hostile.stopped()) return;
  write(data.subarray(index, index + 1));
  hostile.sent += 1;
  setTimeout(() => drip(write, data, hostile, index + 1), 50);
}

const json =
  (body: string, status = 200): Answer =>
  (_req, res, state) => {
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) });
    res.end(body);
    state.sent += Buffer.byteLength(body);
  };

async function rejection(promise: Promise<unknown>): Promise<ApiError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ApiError);
  return error as ApiError;
}

describe('@dfc/device: an answer is read up to a bound, while it streams', () => {
  it('refuses an endless answer as answer_too_large once past the limit, having stopped reading there', async () => {
    const server = await hostile((_req, res, state) => {
      res.writeHead(200, { 'content-type': 'application/json' });
      const chunk = Buffer.alloc(64 * 1024, '[');
      const pump = () => {
        while (!state.stopped() && !res.destroyed && res.write(chunk)) state.sent += chunk.length;
        if (!state.stopped() && !res.destroyed) res.once('drain', pump);
      };
      pump();
    });
    const error = await rejection(deviceApi(server.url, credentials, fetch, { maxAnswerBytes: MIB }).next());
    expect(error).toBeInstanceOf(InvalidAnswerError);
    expect([error.status, error.code, error.retryable]).toEqual([200, 'answer_too_large', true]);
    // What the server got out is the limit plus the loopback socket buffers, never the 400 MiB it would go on sending.
    await until(() => (server.seen.length === 1 ? true : undefined));
    const sent = server.sent;
    await new Promise((resolve) => setTimeout(resolve, 200));
    expect(server.sent).toBeLessThan(16 * MIB);
    expect(server.sent - sent).toBeLessThan(16 * MIB);
  });

  it('refuses an answer that declares more than the limit before reading its body', async () => {
    const server = await hostile((_req, res, state) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 400 * MIB });
      drip((b) => res.write(b), Buffer.from(`{"data": null${' '.repeat(1000)}`), state);
    });
    const error = await rejection(deviceApi(server.url, credentials).next());
    expect(error.code).toBe('answer_too_large');
    expect(error.message).toContain(String(400 * MIB));
  });

  it('takes the limit from the caller: an answer of 5 KB passes the default 1 MiB and fails at 4 KiB', async () => {
    const body = JSON.stringify({ data: { ok: 'x'.repeat(5000) } });
    const server = await hostile(json(body));
    expect(await deviceApi(server.url, credentials).report('a', { ok: true })).toEqual({ ok: 'x'.repeat(5000) });
    const error = await rejection(deviceApi(server.url, credentials, fetch, { maxAnswerBytes: 4096 }).report('a', { ok: true }));
    expect(error.code).toBe('answer_too_large');
  });
});

describe('@dfc/device: every request has a total deadline', () => {
  it('ends an answer that drips a byte at a time at the deadline, as a retryable timeout', async () => {
    const server = await hostile((_req, res, state) => {
      const body = Buffer.from(`{"data": null}${' '.repeat(10_000)}`);
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': body.length });
      drip((b) => res.write(b), body, state);
    });
    const error = await rejection(deviceApi(server.url, credentials, fetch, { requestTimeoutMs: 500 }).next());
    expect([error.status, error.code, error.retryable]).toEqual([0, 'timeout', true]);
    expect(server.sent).toBeGreaterThan(0);
  });

  it('ends headers that drip at the deadline too', async () => {
    const server = await hostile((req, _res, state) => {
      drip((b) => req.socket.write(b), Buffer.from(`HTTP/1.1 201 Created\r\nx-slow: ${'a'.repeat(10_000)}`), state);
    });
    const error = await rejection(attachDevice({ url: server.url, setupToken: 'dfc_setup_SECRET', name: 'Lamp', requestTimeoutMs: 500 }));
    expect(error.code).toBe('timeout');
  });

  it('keeps a device polling a dripping service alive: poll errors at each deadline, and stop() ends it', async () => {
    const server = await hostile((_req, res, state) => {
      res.writeHead(200, { 'content-type': 'application/json', 'content-length': 100_000 });
      drip((b) => res.write(b), Buffer.alloc(100_000, ' '), state);
    });
    const events: DeviceEvent[] = [];
    const device = new Device({
      url: server.url,
      credentials,
      fallbackPollMs: 50,
      backoff: { initialMs: 20, maxMs: 200 },
      requestTimeoutMs: 300,
      onEvent: (e) => events.push(e),
    });
    devices.push(device);
    await device.start();
    await until(() => (events.filter((e) => e.type === 'poll-error').length >= 2 ? true : undefined));
    expect(events.find((e) => e.type === 'poll-error')).toMatchObject({ error: 'The service did not answer within 300 ms.' });
    await device.stop();
    expect(device.stopped).toBe(true);
  });
});

describe('@dfc/device: a redirect is an answer, never followed', () => {
  for (const status of [301, 302, 303, 307, 308]) {
    it(`answers ${status} to another origin with ApiError redirected; the body and the token go nowhere else`, async () => {
      const elsewhere = await hostile(json('{"data": null}'));
      const redirecting = await hostile((_req, res) => {
        res.writeHead(status, { location: `${elsewhere.url}/steal` });
        res.end();
      });
      const api = deviceApi(redirecting.url, credentials);
      const error = await rejection(api.report('22222222-2222-4222-8222-222222222222', { ok: true, result: { secret: 1 } }));
      expect([error.status, error.code, error.retryable, error.unauthorized]).toEqual([status, 'redirected', false, false]);
      expect(error.message).toContain(`${elsewhere.url}/steal`);
      await rejection(api.next());
      await rejection(attachDevice({ url: redirecting.url, setupToken: 'dfc_setup_SECRET', name: 'Lamp' }));
      expect(redirecting.seen.map((s) => s.method)).toEqual(['POST', 'POST', 'POST']);
      expect(elsewhere.seen).toEqual([]);
    });
  }

  it('does not follow a redirect to the same origin either: the service never redirects a device call', async () => {
    const server = await hostile((req, res) => {
      if (req.url === '/moved') return json('{"data": null}')(req, res, { ...server, stopped: () => false });
      res.writeHead(307, { location: '/moved' });
      res.end();
    });
    const error = await rejection(deviceApi(server.url, credentials).report('a', { ok: true }));
    expect([error.status, error.code]).toEqual([307, 'redirected']);
    expect(server.seen.map((s) => s.path)).toEqual([`/v1/device/${credentials.deviceId}/result`]);
  });
});

describe('@dfc/device: a malformed answer is an InvalidAnswerError', () => {
  const nested = (levels: number) => `{"data": ${'['.repeat(levels)}${']'.repeat(levels)}}`;

  it('refuses JSON nested 200,000 levels deep as answer_too_deep', async () => {
    const server = await hostile(json(nested(200_000)));
    const error = await rejection(deviceApi(server.url, credentials).report('a', { ok: true }));
    expect(error).toBeInstanceOf(InvalidAnswerError);
    expect([error.status, error.code]).toEqual([200, 'answer_too_deep']);
  });

  it('reads an answer nested 128 levels and refuses one nested 129', async () => {
    const within = await hostile(json(nested(127)));
    expect(await deviceApi(within.url, credentials).report('a', { ok: true })).toBeInstanceOf(Array);
    const beyond = await hostile(json(nested(128)));
    expect((await rejection(deviceApi(beyond.url, credentials).report('a', { ok: true }))).code).toBe('answer_too_deep');
  });

  it('refuses a 2xx answer that is not JSON as answer_not_json, retryable', async () => {
    const server = await hostile(json('<html>Welcome to the hotel wifi</html>'));
    const error = await rejection(deviceApi(server.url, credentials).next());
    expect(error).toBeInstanceOf(InvalidAnswerError);
    expect([error.status, error.code, error.retryable]).toEqual([200, 'answer_not_json', true]);
  });

  for (const body of ['[]', '{}', '{"data": {"id": 5}}', '{"data": {"id": "x", "deviceId": "y", "capability": "z", "args": [], "expiresAt": 1}}']) {
    it(`refuses a command of the wrong shape as answer_malformed: ${body}`, async () => {
      const server = await hostile(json(body));
      expect((await rejection(deviceApi(server.url, credentials).next())).code).toBe('answer_malformed');
    });
  }

  it('refuses an attach answer of the wrong shape as answer_malformed with its status', async () => {
    const server = await hostile(json('{"data": {"device": "lamp", "token": 1}}', 201));
    const error = await rejection(attachDevice({ url: server.url, setupToken: 'dfc_setup_SECRET', name: 'Lamp' }));
    expect([error.status, error.code]).toEqual([201, 'answer_malformed']);
  });

  it('keeps the status of a non-2xx answer that is not JSON', async () => {
    const server = await hostile(json('<html>502 Bad Gateway</html>', 502));
    const error = await rejection(deviceApi(server.url, credentials).next());
    expect(error).not.toBeInstanceOf(InvalidAnswerError);
    expect([error.status, error.code, error.retryable]).toEqual([502, 'http_error', true]);
  });
});

/** Answers the device calls properly; the wake socket is the test's. */
const wakeService: Answer = (req, res, state) => {
  const data = req.url?.endsWith('/events-ticket') ? { ticket: 'dfc_ticket_x', expiresAt: Date.now() + 30_000 } : null;
  json(JSON.stringify({ data }))(req, res, state);
};

describe('@dfc/device: the wake socket is bounded', () => {
  it('closes the socket with 1009 on a message over 64 KiB, and reconnects', async () => {
    const server = await hostile(wakeService, (req, socket) => {
      accept(req, socket);
      const header = Buffer.from([0x81, 0x7f, 0, 0, 0, 0, 0, 0x01, 0x86, 0xa0]); // a text frame of 100,000 bytes
      socket.write(Buffer.concat([header, Buffer.alloc(1000, '{')]));
    });
    const events: DeviceEvent[] = [];
    const device = new Device({ url: server.url, credentials, backoff: { initialMs: 20, maxMs: 200 }, onEvent: (e) => events.push(e) });
    devices.push(device);
    await device.start();
    const dropped = await until(() => events.find((e) => e.type === 'disconnected'));
    expect(dropped).toMatchObject({ code: 1009 });
    await until(() => (events.filter((e) => e.type === 'connected').length >= 2 ? true : undefined));
  });

  it('drops a peer that drips bytes and never finishes a frame, as a silent one', async () => {
    const server = await hostile(wakeService, (req, socket, state) => {
      accept(req, socket);
      // A 65,000-byte text frame, one byte every 50 ms: bytes keep arriving for nearly an hour, a whole frame never does.
      drip((b) => socket.write(b), Buffer.concat([Buffer.from([0x81, 0x7e, 0xfd, 0xe8]), Buffer.alloc(65_000, ' ')]), state);
    });
    const events: DeviceEvent[] = [];
    const device = new Device({ url: server.url, credentials, backoff: { initialMs: 20, maxMs: 200 }, silenceTimeoutMs: 500, onEvent: (e) => events.push(e) });
    devices.push(device);
    await device.start();
    const dropped = await until(() => events.find((e) => e.type === 'disconnected'));
    expect(dropped).toMatchObject({ code: 1006 });
  });

  it('stops within the close timeout when the peer never answers the close frame', async () => {
    const server = await hostile(wakeService, accept); // upgrades, then says nothing ever again
    const device = new Device({ url: server.url, credentials, silenceTimeoutMs: 600_000 });
    await device.start();
    await until(() => (device.connected ? true : undefined));
    await device.stop(); // ws alone would wait 30 s for the peer's close frame, past this test's timeout
    expect(device.connected).toBe(false);
  });

  it('refuses a redirected upgrade: nothing reaches the other origin, the device polls and retries', async () => {
    const elsewhere = await hostile(wakeService, accept);
    const server = await hostile(wakeService, (_req, socket) => {
      socket.end(`HTTP/1.1 307 Temporary Redirect\r\nLocation: ${elsewhere.url.replace('http', 'ws')}/steal\r\nContent-Length: 0\r\n\r\n`);
    });
    const events: DeviceEvent[] = [];
    const device = new Device({ url: server.url, credentials, backoff: { initialMs: 20, maxMs: 200 }, onEvent: (e) => events.push(e) });
    devices.push(device);
    await device.start();
    const dropped = await until(() => events.find((e) => e.type === 'disconnected'));
    expect(dropped).toMatchObject({ code: 1006, reason: 'upgrade refused with HTTP 307' });
    expect(device.connected).toBe(false);
    expect(elsewhere.seen).toEqual([]);
  });
});

import { lookup } from 'node:dns/promises';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { attachDevice } from '../helpers/fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

// WEBHOOK_ALLOW_PRIVATE_HOSTS (docs/operators/security.md "Webhooks to a home network"): an
// operator lets webhooks reach named private hosts or ranges, over http too. The receiver is a
// real HTTP server on a loopback address, as a local ntfy or Home Assistant would be; none of
// these servers sets the test-only OAUTH_CIMD_ALLOW_LOOPBACK.

const FAST = { WEBHOOK_POLL_SECONDS: '0.05', WEBHOOK_TIMEOUT_SECONDS: '2', WEBHOOK_RETRY_SECONDS: '0.05' };

class Receiver {
  readonly bodies: { path: string; body: string }[] = [];
  readonly server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      this.bodies.push({ path: request.url ?? '/', body: Buffer.concat(chunks).toString('utf8') });
      response.writeHead(204).end();
    });
  });
  port = 0;

  async start(address: string): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, address, resolve));
    this.port = (this.server.address() as AddressInfo).port;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

// The receiver listens where `localhost` resolves first, so the name's pinned address reaches it too.
const receiver = new Receiver();
const servers: TestServer[] = [];
let localhostAddress = '127.0.0.1';

beforeAll(async () => {
  localhostAddress = (await lookup('localhost', { verbatim: true })).address;
  await receiver.start(localhostAddress);
});
afterAll(async () => {
  await Promise.all(servers.map((server) => server.close()));
  await receiver.close();
});

async function serve(allow: string | undefined): Promise<{ server: TestServer; api: Client; owner: string }> {
  const server = await startTestServer({ env: { ...FAST, ...(allow === undefined ? {} : { WEBHOOK_ALLOW_PRIVATE_HOSTS: allow }) } });
  servers.push(server);
  return { server, api: client(() => server.url), owner: await server.ownerToken(`private-hosts-${servers.length}`) };
}

const loopbackUrl = (path: string) => `http://${localhostAddress.includes(':') ? `[${localhostAddress}]` : localhostAddress}:${receiver.port}${path}`;
const localhostUrl = (path: string) => `http://localhost:${receiver.port}${path}`;

async function register(api: Client, owner: string, url: string) {
  return api.post('/v1/webhooks', { token: owner, body: { url, events: ['device.revoked'] } });
}

/** Revokes a new device, whose `device.revoked` event the webhook is sent, and waits for it to arrive at `path`. */
async function expectDelivered(api: Client, owner: string, path: string): Promise<void> {
  const device = await attachDevice(api, owner);
  expect((await api.post(`/v1/devices/${device.id}/revoke`, { token: owner })).status).toBe(200);
  await vi.waitFor(
    () => {
      const arrived = receiver.bodies.filter((received) => received.path === path);
      expect(arrived).toHaveLength(1);
      expect(JSON.parse(arrived[0]!.body)).toMatchObject({ type: 'device.revoked', data: { device: { id: device.id } } });
    },
    { timeout: 15_000, interval: 50 },
  );
}

describe('WEBHOOK_ALLOW_PRIVATE_HOSTS unset (the default)', () => {
  it('refuses a loopback receiver over http and over https, by address and by name', async () => {
    const { api, owner } = await serve(undefined);
    for (const url of [loopbackUrl('/default'), localhostUrl('/default'), `https://127.0.0.1:${receiver.port}/default`]) {
      const res = await register(api, owner, url);
      expect(res.status, url).toBe(400);
      expect(res.body.error.issues, url).toEqual([expect.objectContaining({ path: 'url' })]);
    }
  });
});

describe('WEBHOOK_ALLOW_PRIVATE_HOSTS with a range', () => {
  it('allows a receiver whose address lies in a listed range, and the delivery reaches it over http', async () => {
    const { api, owner } = await serve('127.0.0.0/8,::1/128');
    const res = await register(api, owner, loopbackUrl('/range'));
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    await expectDelivered(api, owner, '/range');
  });

  it('allows a name when every address it resolves to lies in a listed range', async () => {
    const { api, owner } = await serve('127.0.0.0/8,::1/128');
    expect((await register(api, owner, localhostUrl('/range-name'))).status).toBe(201);
    await expectDelivered(api, owner, '/range-name');
  });

  it('refuses a name that resolves outside the listed ranges, and addresses outside them', async () => {
    const { api, owner } = await serve('10.0.0.0/8,fd00::/8');
    for (const url of [localhostUrl('/outside'), loopbackUrl('/outside'), 'http://192.168.1.20/outside', 'https://169.254.169.254/latest']) {
      const res = await register(api, owner, url);
      expect(res.status, url).toBe(400);
      expect(res.body.error.issues, url).toEqual([expect.objectContaining({ path: 'url' })]);
    }
  });

  it('still refuses http to a public address', async () => {
    const { api, owner } = await serve('10.0.0.0/8');
    const res = await register(api, owner, 'http://93.184.216.34/hook');
    expect(res.status).toBe(400);
    expect(res.body.error.issues).toEqual([expect.objectContaining({ path: 'url', message: expect.stringContaining('https only') })]);
  });
});

describe('WEBHOOK_ALLOW_PRIVATE_HOSTS with a name', () => {
  it('allows the listed name, whatever private address it resolves to, and the delivery reaches it', async () => {
    const { api, owner } = await serve('LOCALHOST');
    expect((await register(api, owner, localhostUrl('/name'))).status).toBe(201);
    await expectDelivered(api, owner, '/name');
  });

  it('does not allow the address the name resolves to under its own spelling', async () => {
    const { api, owner } = await serve('localhost');
    expect((await register(api, owner, loopbackUrl('/name-address'))).status).toBe(400);
  });
});

import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { startChildService, testIdentity, type ChildService } from '../helpers/child-service.js';
import { attachDevice } from '../helpers/fixtures.js';
import { connectDevice } from '../helpers/ws.js';

/**
 * Graceful shutdown on SIGTERM, on the real entry point in its own process: a
 * request whose body is still arriving when the signal comes is read to the end and
 * answered, new connections are refused at once, the wake socket is closed with 1001 and a
 * reason, and the process exits 0 after closing the database; a restart finds the write.
 * (libsql keeps its -wal file after close, so the file system cannot show the close itself.)
 */

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-shutdown-'));
const dbFile = path.join(dir, 'service.db');
let service: ChildService | undefined;

afterAll(async () => {
  if (service && service.process.exitCode === null && service.process.signalCode === null) {
    service.process.kill('SIGKILL');
    await service.exited;
  }
});

/** Connects on a fresh socket; resolves with the status, or the connection error's code. */
function probe(url: string): Promise<number | string> {
  return new Promise((resolve) => {
    const req = http.get(`${url}/healthz`, { agent: false }, (res) => {
      res.resume();
      resolve(res.statusCode!);
    });
    req.on('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? 'error'));
  });
}

describe('SIGTERM', () => {
  it('finishes the request in progress, refuses new connections, closes sockets with 1001 and exits 0', async () => {
    const identity = await testIdentity(dir);
    const env = { ...identity.env, DATABASE_URL: `file:${dbFile}`, PORT: '0' };
    service = await startChildService(env);
    const api = client(service.url);
    const owner = await identity.ownerToken('shutdown-owner');
    const lamp = await attachDevice(api, owner);
    const socket = await connectDevice(api, service.url, lamp);

    // A setup-token request whose body is only half sent when SIGTERM arrives.
    const body = Buffer.from(JSON.stringify({ name: 'created during shutdown', deviceLimit: 2 }));
    let inFlight!: http.ClientRequest;
    const answered = new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(`${service!.url}/v1/device-setup-tokens`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
      });
      req.on('response', (res) => {
        let text = '';
        res.on('data', (chunk) => (text += chunk));
        res.on('end', () => resolve({ status: res.statusCode!, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      req.write(body.subarray(0, 10));
      inFlight = req;
    });
    // The server has the request once it is waiting on the body: the head went out first.
    await new Promise((r) => setTimeout(r, 200));

    service.process.kill('SIGTERM');

    // The wake socket is told why.
    expect(await socket.closed).toEqual({ code: 1001, reason: 'service shutting down' });
    // New connections are refused while the request above is still open.
    let refused: number | string = 0;
    for (let i = 0; i < 100 && refused !== 'ECONNREFUSED'; i++) {
      refused = await probe(service.url);
      if (refused !== 'ECONNREFUSED') await new Promise((r) => setTimeout(r, 20));
    }
    expect(refused).toBe('ECONNREFUSED');
    expect(service.process.exitCode).toBeNull();

    // The rest of the body arrives; the request is answered as if nothing happened.
    inFlight.end(body.subarray(10));
    const res = await answered;
    expect(res.status).toBe(201);
    expect(res.body.data.name).toBe('created during shutdown');

    expect(await service.exited).toEqual({ code: 0, signal: null });

    // And what the request wrote is there after a restart.
    service = await startChildService(env);
    const tokens = (await client(service.url).get('/v1/device-setup-tokens', { token: owner })).body.data as { name: string }[];
    expect(tokens.map((t) => t.name)).toContain('created during shutdown');
    service.process.kill('SIGTERM');
    expect(await service.exited).toEqual({ code: 0, signal: null });
  }, 60_000);
});

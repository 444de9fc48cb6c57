import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import tls from 'node:tls';
import { Redis } from 'ioredis';
import { startExternalServer, type ExternalServer } from './external-process.js';
import { freePort } from './oauth.js';

/**
 * A real Redis for one test file: Debian's `redis-server` (installed by `.ci/run` when
 * missing; docs/contributors/development.md "Set up") on a free loopback port, persistence off, so a stop and start
 * begins empty, as a restarted cache does.
 */
export interface TestRedis extends ExternalServer {
  /** `redis://127.0.0.1:PORT`, for REDIS_URL. */
  url: string;
}

/** Sends PING over a raw socket: the helper needs no Redis client of its own. */
function ping(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = net.connect(port, '127.0.0.1');
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
    socket.once('connect', () => socket.write('PING\r\n'));
  });
}

export async function startRedis(): Promise<TestRedis> {
  const port = await freePort();
  const server = await startExternalServer({
    name: 'redis-server',
    command: 'redis-server',
    args: ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
    port,
    ready: () => ping(port),
    install: 'apt-get install redis-server (docs/contributors/development.md "Set up")',
  });
  return { ...server, url: `redis://127.0.0.1:${port}` };
}

/**
 * A client of the deployment's Redis that is not an instance of the service: what anyone
 * able to reach Redis sees on the events channel, and what they can send there.
 */
export interface RedisOutsider {
  /** Every message published on the channel since the outsider began listening, as sent. */
  heard: string[];
  publish(message: unknown): Promise<void>;
  close(): Promise<void>;
}

export async function redisOutsider(url: string, channel = 'dfc:events'): Promise<RedisOutsider> {
  const listener = new Redis(url);
  const sender = new Redis(url);
  const heard: string[] = [];
  listener.on('message', (from: string, message: string) => {
    if (from === channel) heard.push(message);
  });
  await listener.subscribe(channel);
  return {
    heard,
    async publish(message) {
      await sender.publish(channel, typeof message === 'string' ? message : JSON.stringify(message));
    },
    async close() {
      listener.disconnect();
      sender.disconnect();
    },
  };
}

/** A Redis that speaks TLS only, with a certificate for 127.0.0.1 from a CA of its own. */
export interface TestTlsRedis extends ExternalServer {
  /** `rediss://127.0.0.1:PORT`, for REDIS_URL. */
  url: string;
  /** The CA's certificate (PEM file), for NODE_EXTRA_CA_CERTS. */
  caFile: string;
}

/** PINGs over TLS, trusting `ca`. */
function tlsPing(port: number, ca: Buffer): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = tls.connect({ port, host: '127.0.0.1', ca });
    const done = (ok: boolean) => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(1000, () => done(false));
    socket.once('error', () => done(false));
    socket.once('data', (data) => done(data.toString().startsWith('+PONG')));
    socket.once('secureConnect', () => socket.write('PING\r\n'));
  });
}

export async function startTlsRedis(): Promise<TestTlsRedis> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-redis-tls-'));
  const file = (name: string) => path.join(dir, name);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { cwd: dir, stdio: 'ignore' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes'];
  openssl('req', '-x509', ...ec, '-keyout', 'ca.key', '-out', 'ca.pem', '-days', '1', '-subj', '/CN=dfc test CA');
  openssl('req', ...ec, '-keyout', 'server.key', '-out', 'server.csr', '-subj', '/CN=127.0.0.1');
  fs.writeFileSync(file('san.ext'), 'subjectAltName=IP:127.0.0.1\n');
  openssl(
    'x509',
    '-req',
    '-in',
    'server.csr',
    '-CA',
    'ca.pem',
    '-CAkey',
    'ca.key',
    '-CAcreateserial',
    '-out',
    'server.pem',
    '-days',
    '1',
    '-extfile',
    'san.ext',
  );
  const ca = fs.readFileSync(file('ca.pem'));
  const port = await freePort();
  const server = await startExternalServer({
    name: 'redis-server (TLS)',
    command: 'redis-server',
    args: [
      ...['--port', '0', '--tls-port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'],
      ...['--tls-cert-file', file('server.pem'), '--tls-key-file', file('server.key'), '--tls-ca-cert-file', file('ca.pem'), '--tls-auth-clients', 'no'],
    ],
    port,
    ready: () => tlsPing(port, ca),
    install: 'apt-get install redis-server (docs/contributors/development.md "Set up")',
  });
  return { ...server, url: `rediss://127.0.0.1:${port}`, caFile: file('ca.pem') };
}

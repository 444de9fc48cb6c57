import net from 'node:net';
import { Redis } from 'ioredis';
import { startExternalServer, type ExternalServer } from './external-process.js';
import { freePort } from './oauth.js';

/**
 * A real Redis for one test file: Debian's `redis-server` (installed by `.ci/run` when
 * missing; README "Set up") on a free loopback port, persistence off, so a stop and start
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
    install: 'apt-get install redis-server (README "Set up")',
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

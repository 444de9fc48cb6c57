/**
 * Measures what clients that never read cost the service in memory (docs/operators/security.md
 * "Slow and silent clients").
 *
 *   npx tsx scripts/slow-reader-memory.ts [--listens 100] [--heap-mb 256] [--watch-seconds 45]
 *
 * Starts `src/main.ts` as its own process on a small heap (`--max-old-space-size`), one agent
 * connection with 100 finished tasks whose results are 15 kB each, and then sends `listens`
 * subscriptions/listen requests naming all of them (every other one with an extra `_meta` key)
 * on sockets that never read a byte. It samples the service's resident memory (VmRSS) before,
 * while the sockets stall and after the write timeout, and reports whether the service still
 * answers, how many streams it cut and how many connections it closed.
 */
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { client } from '../test/helpers/api.js';
import { grant, next, report } from '../test/helpers/actions.js';
import { startChildService, testIdentity } from '../test/helpers/child-service.js';
import { attachDevice, createAgent } from '../test/helpers/fixtures.js';
import { toolName } from '../test/helpers/mcp-client.js';
import { declaringTasks, postMcp } from '../test/helpers/tasks-client.js';

const { values } = parseArgs({
  options: { listens: { type: 'string', default: '100' }, 'heap-mb': { type: 'string', default: '256' }, 'watch-seconds': { type: 'string', default: '45' } },
});
const listens = Number(values.listens);
const heapMb = Number(values['heap-mb']);
const watchSeconds = Number(values['watch-seconds']);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-slow-readers-'));
const identity = await testIdentity(dir);
const service = await startChildService({
  ...identity.env,
  PORT: '0',
  DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
  NODE_OPTIONS: `--max-old-space-size=${heapMb}`,
});
const pid = service.process.pid!;
const rssMiB = () => {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'));
  return Number(line!.replace(/\D+/g, '')) / 1024;
};

try {
  const api = client(service.url);
  const owner = await identity.ownerToken('owner-slow-readers');
  const lamp = await attachDevice(api, owner, { name: 'Lamp' });
  const agent = await createAgent(api, owner, { name: 'silent', access: 'act', principal: 'agent:silent' });
  await grant(api, owner, agent.principal, lamp.id, ['set_power']);
  const taskIds: string[] = [];
  for (let i = 0; i < 100; i++) {
    const res = await postMcp(service.url, agent.token, {
      method: 'tools/call',
      params: { name: toolName('set_power', lamp), arguments: { on: true }, _meta: declaringTasks({}, { 'dfc/waitSeconds': 0 }) },
    });
    const taskId = res.result.taskId as string;
    await next(api, lamp);
    await report(api, lamp, { actionId: taskId, ok: true, result: { data: 'x'.repeat(15_000) } });
    taskIds.push(taskId);
  }
  await sleep(2000);
  const before = rssMiB();

  const { hostname, port } = new URL(service.url);
  const sockets: net.Socket[] = [];
  const started = performance.now();
  for (let i = 0; i < listens; i++) {
    const extra = i % 2 === 1 ? { 'com.example/trace': String(i) } : {};
    const body = JSON.stringify({
      jsonrpc: '2.0',
      id: `silent-${i}`,
      method: 'subscriptions/listen',
      params: { notifications: { taskIds, toolsListChanged: true }, _meta: declaringTasks({}, extra) },
    });
    const socket = net.connect(Number(port), hostname);
    socket.pause();
    socket.on('error', () => {});
    socket.write(
      `POST /mcp HTTP/1.1\r\nhost: ${hostname}:${port}\r\nauthorization: Bearer ${agent.token}\r\ncontent-type: application/json\r\n` +
        `accept: application/json, text/event-stream\r\nmcp-protocol-version: 2026-07-28\r\nmcp-method: subscriptions/listen\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`,
    );
    sockets.push(socket);
    await sleep(70);
  }
  const sentSeconds = (performance.now() - started) / 1000;
  let peak = rssMiB();
  const samples: string[] = [];
  for (let t = 0; t < watchSeconds * 2; t++) {
    await sleep(500);
    peak = Math.max(peak, rssMiB());
    if (t % 10 === 9) samples.push(`${(t + 1) / 2} s: ${rssMiB().toFixed(0)} MiB`);
  }
  const after = rssMiB();
  const healthy = (await fetch(`${service.url}/healthz`)).status;
  const output = service.output();
  const count = (text: string) => output.split('\n').filter((l) => l.includes(text)).length;
  console.log(
    `command: npx tsx scripts/slow-reader-memory.ts --listens ${listens} --heap-mb ${heapMb} --watch-seconds ${watchSeconds} (Node ${process.version})`,
  );
  console.log(`${listens} never-read listens of one agent connection, each naming 100 finished tasks with 15 kB results, sent in ${sentSeconds.toFixed(1)} s`);
  console.log(`service RSS before: ${before.toFixed(0)} MiB, peak: ${peak.toFixed(0)} MiB, after ${watchSeconds} s: ${after.toFixed(0)} MiB`);
  console.log(`samples: ${samples.join(', ')}`);
  const refused = count('"errorCode":"capacity_exceeded"');
  console.log(
    `listens answered with a stream: ${listens - refused}; refused at the connection's cap: ${refused}; ` +
      `connections closed at the write timeout: ${count('its client took no bytes within the write timeout')}; streams cut at their bound: ${count('mcp subscription cut')}`,
  );
  console.log(`GET /healthz afterwards: ${healthy}; process exited: ${service.process.exitCode !== null}`);
  for (const socket of sockets) socket.destroy();
} finally {
  service.process.kill('SIGTERM');
  await service.exited;
  fs.rmSync(dir, { recursive: true, force: true });
}

/**
 * `npm run bench:export`: GET /v1/actions/export over 1,000,000 actions (docs/reference/api.md "Lists page,
 * the export streams").
 *
 * 1. Starts the real service (scripts/bench-server.ts, a child process, so its RSS is its
 *    own) on a temp libSQL file, creates a workspace and a device through the API.
 * 2. Seeds ACTIONS finished actions straight into that file with one recursive-CTE INSERT
 *    per 100,000 rows (the documented seeding shortcut: the rows are what the service would
 *    have written, ids valid v4 UUIDs, one per millisecond), in a second connection the
 *    service sees through WAL.
 * 3. Streams the export (JSON, or NDJSON with `--ndjson`) and discards it as it arrives,
 *    while a second loop calls GET /healthz back to back and /proc samples the server's RSS.
 *
 * Reports: seeding time, export time and size, the server's RSS before and at its peak
 * (growth), and the /healthz latency p50/p99/max during the export — the event-loop delay
 * another request sees, HTTP included.
 */
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import Database from 'libsql';
import { signDevelopmentSession } from '../src/auth/owner.js';
import { parseConfig } from '../src/config.js';
import { measuringEnv } from './measuring-env.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ACTIONS = Number(process.env.ACTIONS ?? 1_000_000);
const SEED_BATCH = 100_000;
const format = process.argv.includes('--ndjson') ? 'ndjson' : 'json';

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-bench-export-'));
const env = measuringEnv(dir);
const config = parseConfig(env);
const child = spawn(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(ROOT, 'scripts/bench-server.ts')], {
  cwd: ROOT,
  env: { ...process.env, ...env },
  stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
});
const ready = await new Promise<{ url: string; pid: number }>((resolve, reject) => {
  child.on('message', (message: { type: string; url: string; pid: number }) => {
    if (message.type === 'ready') resolve(message);
  });
  child.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
});

async function api(method: 'GET' | 'POST', route: string, token: string, body?: unknown): Promise<any> {
  const res = await fetch(`${ready.url}${route}`, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  if (!res.ok) throw new Error(`${method} ${route}: ${res.status} ${await res.text()}`);
  return res.json();
}

function rssMiB(pid: number): number {
  const line = fs
    .readFileSync(`/proc/${pid}/status`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('VmRSS:'))!;
  return Number(line.split(/\s+/)[1]) / 1024;
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))]!;
}

try {
  const owner = await signDevelopmentSession(config, 'bench-export');
  const setup = await api('POST', '/v1/device-setup-tokens', owner, { name: 'bench' });
  const attached = await api('POST', '/v1/sdk/devices', setup.data.token, { name: 'Lamp', kind: 'device' });
  const deviceId: string = attached.data.device.id;

  const seedStart = performance.now();
  const db = new Database(env.DATABASE_URL!.slice('file:'.length));
  db.pragma('busy_timeout = 5000');
  const { workspaceId } = db.prepare('SELECT workspace_id AS workspaceId FROM devices WHERE id = ?').get(deviceId) as { workspaceId: string };
  const t0 = Date.now() - ACTIONS - 1000;
  const insert = db.prepare(
    `WITH RECURSIVE n(i) AS (SELECT ? UNION ALL SELECT i + 1 FROM n WHERE i + 1 < ?)
     INSERT INTO actions (id, workspace_id, device_id, target_id, capability, arguments, status, principal, created_at, expires_at, dispatched_at, completed_at, result)
     SELECT printf('%08x-0000-4000-8000-%012x', i, i), ?, ?, ?, 'set_brightness', '{"level":42}', 'succeeded', 'agent:bench',
            ? + i, ? + i + 30000, ? + i + 1, ? + i + 2, '{"ok":true}' FROM n`,
  );
  for (let from = 0; from < ACTIONS; from += SEED_BATCH) {
    db.exec('BEGIN');
    insert.run(from, Math.min(ACTIONS, from + SEED_BATCH), workspaceId, deviceId, deviceId, t0, t0, t0, t0);
    db.exec('COMMIT');
  }
  db.close();
  const seedSeconds = (performance.now() - seedStart) / 1000;

  child.send({ type: 'rss' });
  await new Promise((resolve) => setTimeout(resolve, 500));
  const rssBefore = rssMiB(ready.pid);
  let rssPeak = rssBefore;
  const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, rssMiB(ready.pid))), 20);

  let exporting = true;
  const latencies: number[] = [];
  const health = (async () => {
    while (exporting) {
      const start = performance.now();
      const res = await fetch(`${ready.url}/healthz`);
      await res.arrayBuffer();
      latencies.push(performance.now() - start);
    }
  })();

  const exportStart = performance.now();
  const res = await fetch(`${ready.url}/v1/actions/export`, {
    headers: { authorization: `Bearer ${owner}`, ...(format === 'ndjson' ? { accept: 'application/x-ndjson' } : {}) },
  });
  if (res.status !== 200) throw new Error(`export answered ${res.status}`);
  let bytes = 0;
  let tail = '';
  const decoder = new TextDecoder();
  for await (const chunk of res.body!) {
    bytes += chunk.byteLength;
    tail = (tail + decoder.decode(chunk, { stream: true })).slice(-200);
  }
  const exportSeconds = (performance.now() - exportStart) / 1000;
  exporting = false;
  await health;
  clearInterval(sampler);

  const count = Number(/"count":(\d+)/.exec(tail)?.[1]);
  if (count !== ACTIONS) throw new Error(`the export counted ${count} actions, expected ${ACTIONS}`);
  latencies.sort((a, b) => a - b);
  const round = (n: number) => Math.round(n * 10) / 10;
  console.log(
    JSON.stringify(
      {
        actions: ACTIONS,
        format,
        seedSeconds: round(seedSeconds),
        exportSeconds: round(exportSeconds),
        exportMiB: round(bytes / 1024 / 1024),
        serverRssBeforeMiB: round(rssBefore),
        serverRssPeakMiB: round(rssPeak),
        serverRssGrowthMiB: round(rssPeak - rssBefore),
        healthzDuringExport: {
          requests: latencies.length,
          p50Ms: round(percentile(latencies, 50)),
          p99Ms: round(percentile(latencies, 99)),
          maxMs: round(latencies[latencies.length - 1]!),
        },
      },
      null,
      2,
    ),
  );
} finally {
  child.send({ type: 'stop' });
  await new Promise((resolve) => child.once('exit', resolve));
  fs.rmSync(dir, { recursive: true, force: true });
}

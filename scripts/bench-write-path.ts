/**
 * The write path of one device round trip on its own, without HTTP: the action's INSERT, the
 * claim and the completion, each committed (as `EmbeddedDb` commits a standalone write), on the
 * real schema with its triggers, `--count` times on a fresh file, for each checkpoint variant
 * in turn, `--rounds` times. Prints medians per round trip: the event loop's time (wall; the
 * driver is synchronous, so this is what requests in flight wait) and the process's CPU (the
 * checkpoint worker's included). docs/contributors/performance-history.md "A checkpoint off the event loop".
 *
 *   npx tsx scripts/bench-write-path.ts [--count 3000] [--rounds 5]
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { EmbeddedDb } from '../src/store/embedded.js';
import { migrate } from '../src/store/migrate.js';

const { values } = parseArgs({ options: { count: { type: 'string', default: '3000' }, rounds: { type: 'string', default: '5' } } });
const COUNT = Number(values.count);
const ROUNDS = Number(values.rounds);

const variants = {
  'checkpoints on the event loop (SQLite autocheckpoint, 1,000 pages)': false,
  'checkpoints in the worker, backstop on the event loop': true,
} as const;

interface Figures {
  wallUs: number;
  cpuUs: number;
  walBytes: number;
}

async function writePath(backgroundCheckpoints: boolean): Promise<Figures> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-write-path-'));
  const file = path.join(dir, 'service.db');
  const db = new EmbeddedDb(file, { backgroundCheckpoints });
  try {
    await migrate(db);
    const now = Date.now();
    await db.run('INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)', ['w', 'bench', 'r', now]);
    for (let d = 0; d < 100; d++) {
      await db.run(
        "INSERT INTO devices (id, workspace_id, name, kind, token_hash, attached_via, created_at) VALUES (?, 'w', 'lamp', 'device', ?, 'bench', ?)",
        [`d${d}`, `h${d}`, now],
      );
    }
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    for (let i = 0; i < COUNT; i++) {
      const id = `a${i}`;
      const device = `d${i % 100}`;
      const at = Date.now();
      await db.run(
        `INSERT INTO actions (id, workspace_id, device_id, target_id, capability, arguments, status, principal, created_at, expires_at)
         VALUES (?, 'w', ?, ?, 'set_power', '{"on":true}', 'queued', 'agent:bench', ?, ?)`,
        [id, device, device, at, at + 60_000],
      );
      await db.run("UPDATE actions SET status = 'received', dispatched_at = ? WHERE id = ? AND status = 'queued'", [at, id]);
      await db.run(`UPDATE actions SET status = 'succeeded', completed_at = ?, result = '{"on":true}' WHERE id = ? AND status = 'received'`, [at, id]);
    }
    const wallUs = ((performance.now() - started) * 1000) / COUNT;
    const cpu = process.cpuUsage(cpuBefore);
    return { wallUs, cpuUs: (cpu.user + cpu.system) / COUNT, walBytes: fs.statSync(`${file}-wal`).size };
  } finally {
    await db.close();
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const runs = new Map<string, Figures[]>();
for (let round = 0; round < ROUNDS; round++) {
  for (const [name, background] of Object.entries(variants)) runs.set(name, [...(runs.get(name) ?? []), await writePath(background)]);
}
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
console.log(`write path, ${COUNT} round trips × ${ROUNDS} rounds, medians per round trip (Node ${process.version}, load ${os.loadavg()[0]!.toFixed(1)})`);
for (const [name, figures] of runs) {
  const wall = median(figures.map((f) => f.wallUs)).toFixed(0);
  const cpu = median(figures.map((f) => f.cpuUs)).toFixed(0);
  const wal = (Math.max(...figures.map((f) => f.walBytes)) / 2 ** 20).toFixed(1);
  console.log(`${name}: event loop ${wall} µs, CPU ${cpu} µs, largest log ${wal} MiB`);
}

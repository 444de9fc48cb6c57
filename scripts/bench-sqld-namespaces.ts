/**
 * `npm run bench:namespaces` — would one sqld database per workspace (sqld namespaces) let
 * writers proceed in parallel where one database makes them wait for each other? A
 * measurement, not a test (docs/contributors/performance-history.md "Namespaces, measured").
 *
 * A fresh sqld with `--enable-namespaces` and its admin listener; N writers, each a
 * `RemoteDb` of its own (the service's remote driver: its own WebSocket, writer queue and
 * group commit, as one instance of the service has), each running `--loops` loops of the
 * round trip's three writes (an INSERT, then two guarded UPDATEs of that row, each awaited
 * before the next), on the service's migrated schema. The same writers run into ONE
 * database (all in one namespace), into N namespaces (one each), and spread over all N
 * namespaces (each writer with a connection to every namespace, each loop on one: an instance
 * serving every workspace with a database per workspace), in turn, `--rounds` times; the
 * script reports writes per second of each, their ratio to one database, sqld's CPU, and
 * what a new namespace costs to create and migrate.
 *
 *   npm run bench:namespaces [-- --writers 2,4,10 --loops 10 --duration 5 --rounds 2 --no-pin]
 *
 * How a client reaches a namespace: sqld takes it from the first label of the Host header
 * (`<namespace>.<anything>`), on HTTP and on the WebSocket upgrade alike; a Host of
 * `127.0.0.1` asks for the namespace `127`. Namespaces are created on the admin listener,
 * `POST /v1/namespaces/<namespace>/create` with `{}`. `@libsql/client` takes no Host header
 * or lookup of its own, and `<namespace>.localhost` does not resolve on every machine (not
 * on this one), so this script answers `*.localhost` with 127.0.0.1 in `dns.lookup`, which
 * `net.connect` calls; a deployment would give each namespace a DNS name (a wildcard record).
 *
 * With `taskset` present sqld is pinned to core 0 and the writers to core 1, as the bench
 * pins the server and its load; the writers' own CPU is reported, since one process drives
 * them all.
 */
import { execFileSync } from 'node:child_process';
import dns from 'node:dns';
import os from 'node:os';
import { parseArgs } from 'node:util';
import type { Db } from '../src/store/driver.js';
import { openDb } from '../src/store/open.js';
import { startBenchSqld } from './bench-sqld.js';
import { procCpuMs } from './proc-cpu.js';

const { values: opts } = parseArgs({
  options: {
    writers: { type: 'string', default: '2,4' },
    loops: { type: 'string', default: '10' },
    duration: { type: 'string', default: '5' },
    rounds: { type: 'string', default: '2' },
    'no-pin': { type: 'boolean', default: false },
  },
});
const WRITERS = opts.writers.split(',').map(Number);
const LOOPS = Number(opts.loops);
const DURATION_S = Number(opts.duration);
const ROUNDS = Number(opts.rounds);
if (!WRITERS.every((n) => Number.isInteger(n) && n >= 1) || !(LOOPS >= 1) || !(DURATION_S > 0) || !(ROUNDS >= 1)) {
  console.error('usage: npm run bench:namespaces -- [--writers 2,4] [--loops 10] [--duration 5] [--rounds 2] [--no-pin]');
  process.exit(2);
}

const lookup = dns.lookup;
// `*.localhost` is loopback (RFC 6761), but not every resolver says so: see above.
dns.lookup = ((host: string, options: unknown, callback?: unknown) => {
  const [settings, done] = typeof options === 'function' ? [{}, options] : [options as dns.LookupOptions, callback];
  if (!host.endsWith('.localhost')) return (lookup as (...args: unknown[]) => void)(host, options, callback);
  const reply = done as (error: null, address: string | dns.LookupAddress[], family?: number) => void;
  if (settings?.all) reply(null, [{ address: '127.0.0.1', family: 4 }]);
  else reply(null, '127.0.0.1', 4);
}) as typeof dns.lookup;

const pinned =
  !opts['no-pin'] &&
  os.cpus().length >= 2 &&
  (() => {
    try {
      execFileSync('taskset', ['-pc', '1', String(process.pid)], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  })();

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** sqld's CPU time so far (ms), from /proc (Linux). */
function cpuMs(pid: number): number {
  const ms = procCpuMs(`/proc/${pid}/stat`);
  if (ms === undefined) throw new Error('sqld CPU is read from /proc: this bench runs on Linux');
  return ms;
}

async function startSqld() {
  const sqld = await startBenchSqld({ pinned, namespaces: true });
  const { adminUrl, port } = sqld;
  return {
    pid: sqld.child.pid!,
    async create(namespace: string) {
      const response = await fetch(`${adminUrl}/v1/namespaces/${namespace}/create`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{}',
      });
      if (!response.ok) throw new Error(`creating namespace ${namespace}: ${response.status} ${await response.text()}`);
    },
    /** A namespace's URL for the service's driver, over WebSocket. */
    url: (namespace: string) => `ws://${namespace}.localhost:${port}`,
    stop: sqld.stop,
  };
}

type Sqld = Awaited<ReturnType<typeof startSqld>>;

/** Opens (and migrates) one writer's database in `namespace`, with the table the writes go to. */
async function openWriter(sqld: Sqld, namespace: string): Promise<Db> {
  const db = await openDb(sqld.url(namespace));
  await db.script('CREATE TABLE IF NOT EXISTS bench_writes (id TEXT PRIMARY KEY, status TEXT NOT NULL, updated_at INTEGER NOT NULL)');
  return db;
}

let rowIds = 0;

/** The round trip's three writes, one after another: queued, claimed, done. */
async function threeWrites(db: Db): Promise<void> {
  const id = `row-${++rowIds}`;
  await db.run("INSERT INTO bench_writes (id, status, updated_at) VALUES (?, 'queued', ?)", [id, Date.now()]);
  await db.run("UPDATE bench_writes SET status = 'claimed', updated_at = ? WHERE id = ? AND status = 'queued'", [Date.now(), id]);
  await db.run("UPDATE bench_writes SET status = 'done', updated_at = ? WHERE id = ? AND status = 'claimed'", [Date.now(), id]);
}

/**
 * Every writer's loops for a warm-up second and then DURATION_S: writes per second, sqld and
 * own CPU. `writers[i]` is writer i's databases; its loop l writes to `writers[i][l % length]`.
 */
async function measure(sqld: Sqld, writers: Db[][]) {
  let running = true;
  let counting = false;
  let writes = 0;
  let failures = 0;
  const loops = writers.flatMap((dbs) =>
    Array.from({ length: LOOPS }, async (_, l) => {
      while (running) {
        try {
          await threeWrites(dbs[l % dbs.length]!);
          if (counting) writes += 3;
        } catch (error) {
          // A write the driver gave up on (503 in the service) is a finding, not the end of the run.
          failures++;
          console.error(`write failed: ${error instanceof Error ? error.message : String(error)}`);
        }
      }
    }),
  );
  await sleep(1000);
  const [sqldBefore, ownBefore] = [cpuMs(sqld.pid), process.cpuUsage()];
  counting = true;
  await sleep(DURATION_S * 1000);
  counting = false;
  const [sqldAfter, own] = [cpuMs(sqld.pid), process.cpuUsage(ownBefore)];
  running = false;
  await Promise.all(loops);
  return {
    writesPerSecond: Math.round(writes / DURATION_S),
    failures,
    sqldCpuPercent: Math.round((sqldAfter - sqldBefore) / (DURATION_S * 10)),
    writersCpuPercent: Math.round((own.user + own.system) / (DURATION_S * 1e4)),
  };
}

type Measure = Awaited<ReturnType<typeof measure>>;
const LAYOUTS = ['one', 'own', 'spread'] as const;
type Layout = (typeof LAYOUTS)[number];
const cell = (m: Measure) =>
  `${m.writesPerSecond}/s (sqld CPU ${m.sqldCpuPercent} %, writers ${m.writersCpuPercent} %${m.failures ? `, ${m.failures} failed` : ''})`;
const mean = (values: number[]) => Math.round(values.reduce((a, b) => a + b, 0) / values.length);

/**
 * The three layouts for `n` writers: `one`, every writer on one shared database; `own`, each
 * writer on a namespace of its own; `spread`, every writer on all `n` namespaces, each of its
 * loops on one (as an instance serving every workspace would be with a database per workspace:
 * its writes of one turn split over as many databases, so its group commits are smaller).
 */
async function layouts(n: number, setUp: { createMs: number; migrateMs: number }): Promise<Record<Layout, Db[][]>> {
  const shared = `one${n}`;
  await sqld.create(shared);
  // One at a time into a namespace: the first migrates, the others find it done.
  const one: Db[][] = [];
  for (let i = 0; i < n; i++) one.push([await openWriter(sqld, shared)]);
  // The first database of each namespace is timed: what a new workspace's database would cost to set up.
  const own: Db[][] = [];
  for (let i = 0; i < n; i++) {
    const started = performance.now();
    await sqld.create(`n${n}w${i}`);
    const created = performance.now();
    own.push([await openWriter(sqld, `n${n}w${i}`)]);
    setUp.createMs += (created - started) / n;
    setUp.migrateMs += (performance.now() - created) / n;
  }
  const spread: Db[][] = [];
  for (let i = 0; i < n; i++) spread.push(await Promise.all(Array.from({ length: n }, (_, k) => openWriter(sqld, `n${n}w${k}`))));
  return { one, own, spread };
}

const sqld = await startSqld();
const rows: string[] = [];
const report: unknown[] = [];
const setUps: string[] = [];
try {
  for (const n of WRITERS) {
    const setUp = { createMs: 0, migrateMs: 0 };
    const dbs = await layouts(n, setUp);
    const runs: Record<Layout, Measure>[] = [];
    for (let round = 0; round < ROUNDS; round++) {
      const run = {} as Record<Layout, Measure>;
      for (const layout of LAYOUTS) run[layout] = await measure(sqld, dbs[layout]);
      runs.push(run);
    }
    await Promise.all(LAYOUTS.flatMap((layout) => dbs[layout].flat()).map((db) => db.close()));
    report.push({ writers: n, loopsPerWriter: LOOPS, runs, namespaceSetUp: setUp });
    setUps.push(`${n} writers: create ${setUp.createMs.toFixed(1)} ms, migrate ${setUp.migrateMs.toFixed(1)} ms`);
    const ratio = (run: Record<Layout, Measure>, layout: Layout) => (run[layout].writesPerSecond / run.one.writesPerSecond).toFixed(2);
    for (const run of runs) rows.push(`| ${n} | ${cell(run.one)} | ${cell(run.own)} | ${cell(run.spread)} | ${ratio(run, 'own')}×, ${ratio(run, 'spread')}× |`);
    const avg = Object.fromEntries(LAYOUTS.map((layout) => [layout, mean(runs.map((run) => run[layout].writesPerSecond))])) as Record<Layout, number>;
    rows.push(`| ${n}, mean | ${avg.one}/s | ${avg.own}/s | ${avg.spread}/s | **${(avg.own / avg.one).toFixed(2)}×, ${(avg.spread / avg.one).toFixed(2)}×** |`);
  }
} finally {
  await sqld.stop();
}

console.log(
  `\nnpm run bench:namespaces — Node ${process.version}, ${os.cpus().length} cores, ${pinned ? 'sqld on core 0, writers on core 1' : 'not pinned'}, ` +
    `${LOOPS} loops per writer, ${DURATION_S} s per measure, load average ${os
      .loadavg()
      .map((l) => l.toFixed(1))
      .join(' ')}\n`,
);
console.log('| writers | one database | one namespace per writer | each writer on every namespace | ÷ one database |');
console.log('|---|---|---|---|---|');
for (const row of rows) console.log(row);
console.log(`\nA new namespace, mean (admin create; open and migrate the service's schema): ${setUps.join('; ')}`);
console.log(`\n${JSON.stringify(report)}`);

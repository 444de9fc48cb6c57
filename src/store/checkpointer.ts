import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';

/**
 * Copies the write-ahead log into the database file from a worker thread, so that the event
 * loop does not wait for a checkpoint's page copies and file syncs (docs/contributors/performance-history.md "A
 * checkpoint off the event loop").
 *
 * The worker's checkpoints are PASSIVE: they never wait for, or block, the serving connection.
 * Under continuous writes a passive checkpoint never reaches the log's end, and only a log
 * copied to its end can start over, so the serving connection keeps SQLite's autocheckpoint as
 * the backstop that does (`BACKSTOP_PAGES`). The two take turns: a checkpoint holds SQLite's
 * checkpoint lock through its file syncs (tens of milliseconds on a slow disk), and a backstop
 * that finds the worker's under way is skipped, so the log would grow past the mark by whatever
 * is written meanwhile. The worker therefore copies only the first three quarters of each log
 * (`WORKER_SHARE`) and leaves the rest to the backstop, which then finds the lock free.
 */
export interface Checkpointer {
  /** Ends the worker; resolves once it has closed its connection. */
  stop(): Promise<void>;
}

/** How often the worker copies the log: often enough that the backstop finds little left. */
export const CHECKPOINT_INTERVAL_MS = 20;

/**
 * The serving connection's autocheckpoint with the worker running. Larger than SQLite's 1,000
 * pages: each backstop checkpoint syncs two files on the event loop, so fewer is better, and
 * it copies only the quarter the worker left. The log file stays at about this size (32 MiB
 * with 4 KiB pages).
 */
export const BACKSTOP_PAGES = 8000;

/** The worker checkpoints only while the log holds fewer frames than this. */
export const WORKER_SHARE = (BACKSTOP_PAGES * 3) / 4;

// Plain CommonJS evaluated in the worker (`eval: true`): no second entry file to find from both
// the TypeScript sources and a build. libsql's path is resolved here, by the caller's module.
// The log's length is the wal-index header's mxFrame: a 32-bit integer in native byte order at
// byte 16 of the -shm file (SQLite's documented WAL-index format), readable without a lock; a
// stale read only moves one checkpoint between the worker and the backstop. The first failure
// ends the worker (the backstop alone keeps the log bounded) after saying why.
const WORKER_SOURCE = `
const fs = require('node:fs');
const os = require('node:os');
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.libsql);
const db = new Database(workerData.file);
const checkpoint = db.prepare('PRAGMA wal_checkpoint(PASSIVE)');
const header = Buffer.alloc(4);
let shm;
const logFrames = () => {
  if (shm === undefined) {
    if (!fs.existsSync(workerData.file + '-shm')) return 0;
    shm = fs.openSync(workerData.file + '-shm', 'r');
  }
  fs.readSync(shm, header, 0, 4, 16);
  return os.endianness() === 'LE' ? header.readUInt32LE(0) : header.readUInt32BE(0);
};
const stop = () => {
  clearInterval(timer);
  if (shm !== undefined) fs.closeSync(shm);
  db.close();
  parentPort.close();
};
const timer = setInterval(() => {
  try {
    if (logFrames() < workerData.share) checkpoint.all();
  } catch (error) {
    parentPort.postMessage(String((error && error.message) || error));
    stop();
  }
}, workerData.intervalMs);
parentPort.once('message', stop);
`;

const libsqlPath = createRequire(import.meta.url).resolve('libsql');

export function startCheckpointer(file: string, onFailure: (message: string) => void): Checkpointer {
  const worker = new Worker(WORKER_SOURCE, { eval: true, workerData: { file, libsql: libsqlPath, intervalMs: CHECKPOINT_INTERVAL_MS, share: WORKER_SHARE } });
  // An optimisation, not a duty: its timer must not keep the process alive.
  worker.unref();
  worker.on('message', (message: string) => onFailure(message));
  worker.on('error', (error) => onFailure(error.message));
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  return {
    async stop() {
      // Referenced again: awaiting the exit must keep the loop alive until it happens.
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}

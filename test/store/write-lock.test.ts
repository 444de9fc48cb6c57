import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { DatabaseLocked, DatabaseUnavailable } from '../../src/store/driver.js';
import { EmbeddedDb, LOCK_WAIT_MS } from '../../src/store/embedded.js';
import { holdWriteLock, type LockHolder } from '../helpers/lock-holder.js';

/**
 * The embedded driver and another process holding its file's write lock
 * (docs/operators/database.md "Another process on the file"): the driver waits for the lock
 * from timers, never inside SQLite's busy handler on the event loop, for at most the lock wait,
 * and then fails with `DatabaseLocked` (503 `unavailable`).
 */

const opened: EmbeddedDb[] = [];
const holders: LockHolder[] = [];
afterEach(async () => {
  await Promise.all(holders.splice(0).map((holder) => holder.release()));
  await Promise.all(opened.splice(0).map((db) => db.close()));
});

async function openTable(options: ConstructorParameters<typeof EmbeddedDb>[1] = {}): Promise<{ db: EmbeddedDb; file: string }> {
  const file = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-lock-')), 'lock.db');
  const db = new EmbeddedDb(file, options);
  opened.push(db);
  await db.script('CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT NOT NULL)');
  await db.run('INSERT INTO notes (body) VALUES (?)', ['before']);
  return { db, file };
}

async function lock(file: string, maxHoldMs?: number): Promise<LockHolder> {
  const holder = await holdWriteLock(file, maxHoldMs);
  holders.push(holder);
  return holder;
}

/** Resolves once `count` timers have fired one after another: the event loop is turning. */
async function timersFire(count: number): Promise<void> {
  for (let i = 0; i < count; i++) await new Promise((resolve) => setTimeout(resolve, 1));
}

const pending = <T>(promise: Promise<T>) => {
  let settled = false;
  promise.then(
    () => (settled = true),
    () => (settled = true),
  );
  return () => !settled;
};

describe('a write lock held by another process', () => {
  it('the embedded connection has no busy timeout: SQLite never sleeps on the event loop for a lock', async () => {
    const { db } = await openTable();
    const [settings] = await db.connectionSettings();
    expect(settings!.busyTimeoutMs).toBe(0);
  });

  it('a write waits for the lock from timers while the event loop turns, and commits once the lock is released', async () => {
    // A wait far longer than the test: what ends it is the release, not the clock.
    const { db, file } = await openTable({ lockWaitMs: 120_000 });
    const holder = await lock(file, 120_000);
    const write = db.run('INSERT INTO notes (body) VALUES (?)', ['waited']);
    const stillWaiting = pending(write);
    const transaction = db.transaction(async (tx) => tx.run('INSERT INTO notes (body) VALUES (?)', ['in a transaction']));
    await timersFire(20);
    expect(stillWaiting()).toBe(true);
    // Reads do not wait for another connection's write lock (WAL).
    expect(await db.all('SELECT body FROM notes ORDER BY id')).toEqual([{ body: 'before' }]);
    expect(await holder.held()).toBe(true);
    await holder.release();
    expect(await write).toEqual({ changes: 1 });
    expect(await transaction).toEqual({ changes: 1 });
    expect(await db.all('SELECT body FROM notes ORDER BY id')).toEqual([{ body: 'before' }, { body: 'waited' }, { body: 'in a transaction' }]);
  });

  it('a write, a transaction and a batch fail with DatabaseLocked after the lock wait, reads answer, and nothing of them was written', async () => {
    const { db, file } = await openTable();
    const holder = await lock(file);
    const failures = await Promise.allSettled([
      db.run('INSERT INTO notes (body) VALUES (?)', ['lost 1']),
      db.transaction(async (tx) => tx.run('INSERT INTO notes (body) VALUES (?)', ['lost 2'])),
      db.batch([{ sql: 'INSERT INTO notes (body) VALUES (?)', args: ['lost 3'] }]),
    ]);
    for (const failure of failures) {
      expect(failure.status).toBe('rejected');
      const reason = (failure as PromiseRejectedResult).reason as unknown;
      expect(reason).toBeInstanceOf(DatabaseLocked);
      expect(reason).toBeInstanceOf(DatabaseUnavailable);
    }
    expect(await db.get('SELECT count(*) AS n FROM notes')).toEqual({ n: 1 });
    // All of it while the lock was held: each failure came from the wait, not from its end.
    expect(await holder.held()).toBe(true);
    await holder.release();
    expect(await db.run('INSERT INTO notes (body) VALUES (?)', ['after'])).toEqual({ changes: 1 });
    expect(await db.all('SELECT body FROM notes ORDER BY id')).toEqual([{ body: 'before' }, { body: 'after' }]);
  });

  it('once a write has waited out the lock, later writes fail at once until the lock is free again', async () => {
    const { db, file } = await openTable();
    // One wait each would take 20 lock waits: longer than the holder holds the lock.
    const holder = await lock(file, 20 * LOCK_WAIT_MS * 0.6);
    for (let i = 0; i < 20; i++) await expect(db.run('INSERT INTO notes (body) VALUES (?)', [`lost ${i}`])).rejects.toBeInstanceOf(DatabaseLocked);
    expect(await holder.held()).toBe(true);
    await holder.release();
    expect(await db.run('INSERT INTO notes (body) VALUES (?)', ['after'])).toEqual({ changes: 1 });
  });

  it('checkWriteLock reports the lock held without waiting for it, and free once released', async () => {
    const { db, file } = await openTable({ lockWaitMs: 120_000 });
    const holder = await lock(file, 120_000);
    await expect(db.checkWriteLock()).rejects.toBeInstanceOf(DatabaseLocked);
    await holder.release();
    await expect(db.checkWriteLock()).resolves.toBeUndefined();
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { openDb } from '../../src/store/open.js';
import { RemoteDb } from '../../src/store/remote.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';

/**
 * Read groups on a libSQL server (docs/performance.md "Why a second instance lowers
 * throughput"): one read batch in flight at a time per driver, the reads arriving meanwhile
 * joining the next, on a real sqld over WebSocket. Counted by the driver's own counters.
 */
let sqld: TestSqld;
let db: RemoteDb;
beforeAll(async () => {
  sqld = await startSqld();
  const opened = await openDb(sqld.url.replace(/^http/, 'ws'));
  if (!(opened instanceof RemoteDb)) throw new Error('a ws:// URL opens the remote driver');
  db = opened;
});
afterAll(async () => {
  await db?.close();
  await sqld?.stop();
});

/** A read sqld takes a while to answer (hundreds of milliseconds), to keep a batch in flight. */
const SLOW = 'SELECT count(*) AS n FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 1000000) SELECT x FROM c)';
const quick = (i: number) => db.get<{ i: number }>('SELECT ? AS i', [i]);
const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('reads while a read batch is in flight', () => {
  it('wait for it and go together in the next batch, each answered', async () => {
    const before = db.stats();
    const slow = db.get<{ n: number }>(SLOW);
    await later(20);
    const second = Promise.all([1, 2, 3].map(quick));
    await later(20);
    const third = Promise.all([4, 5].map(quick));
    expect(await slow).toEqual({ n: 1_000_000 });
    expect(await second).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }]);
    expect(await third).toEqual([{ i: 4 }, { i: 5 }]);
    const after = db.stats();
    expect(after.readBatches - before.readBatches).toBe(2);
    expect(after.readStatements - before.readStatements).toBe(6);
  });

  it('are still answered when the batch before them failed', async () => {
    const failing = db.get('SELECT * FROM no_such_table');
    await later(0);
    const next = quick(7);
    await expect(failing).rejects.toThrow();
    expect(await next).toEqual({ i: 7 });
  });
});

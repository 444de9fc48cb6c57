import { describe, expect, it } from 'vitest';
import { useRemoteDb } from '../helpers/remote-db.js';

/**
 * Read groups on a libSQL server (docs/contributors/performance-history.md "Why a second instance lowers
 * throughput"): one read batch in flight at a time per driver for a short while, the reads
 * arriving meanwhile joining the next, and none held up for long by a slow one; on a real sqld
 * over WebSocket, counted by the driver's own counters.
 */
const remote = useRemoteDb();

/** A read sqld takes a while to answer (hundreds of milliseconds), to keep a batch in flight. */
const SLOW = 'SELECT count(*) AS n FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 3000000) SELECT x FROM c)';
const quick = (i: number) => remote.db.get<{ i: number }>('SELECT ? AS i', [i]);
const later = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('reads while a read batch is in flight', () => {
  it('of one turn go together in the next batch, each answered', async () => {
    const before = remote.db.stats();
    const slow = remote.db.get<{ n: number }>(SLOW);
    await later(5);
    const next = Promise.all([1, 2, 3].map(quick));
    expect(await slow).toEqual({ n: 3_000_000 });
    expect(await next).toEqual([{ i: 1 }, { i: 2 }, { i: 3 }]);
    const after = remote.db.stats();
    expect(after.readBatches - before.readBatches).toBe(2);
    expect(after.readStatements - before.readStatements).toBe(4);
  });

  it('wait for a slow batch only briefly: a quick read behind it is answered first', async () => {
    const answered: string[] = [];
    const slow = remote.db.get(SLOW).then(() => answered.push('slow'));
    await later(5);
    const next = quick(1).then(() => answered.push('quick'));
    await Promise.all([slow, next]);
    expect(answered).toEqual(['quick', 'slow']);
  });

  it('are still answered when the batch before them failed', async () => {
    // Its failure is awaited from the start: on a stream kept open it can come back before
    // the next read is even sent, and an unawaited rejection would fail the run.
    const failing = expect(remote.db.get('SELECT * FROM no_such_table')).rejects.toThrow();
    await later(0);
    const next = quick(7);
    await failing;
    expect(await next).toEqual({ i: 7 });
  });
});

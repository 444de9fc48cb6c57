import type { Db } from './driver.js';

/**
 * The cheapest statements that prove the database answers and can take a write now
 * (docs/operators/probes.md "Probes"): `SELECT 1`, which another process's write lock does not
 * stop, and a look at that lock, which never waits for it.
 */
export async function ping(db: Db): Promise<void> {
  await db.get('SELECT 1 AS one');
  await db.checkWriteLock?.();
}

import type { Db } from './driver.js';

/** The cheapest statement that proves the database answers (docs/operators/probes.md "Probes"). */
export async function ping(db: Db): Promise<void> {
  await db.get('SELECT 1 AS one');
}

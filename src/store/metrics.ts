import { statusIn } from './actions.js';
import type { Queryable } from './driver.js';

/** Actions waiting for a device, across every workspace (the queue depth gauge). */
export async function countAllQueued(db: Queryable): Promise<number> {
  const row = await db.get<{ n: number }>(`SELECT count(*) AS n FROM actions WHERE ${statusIn(['queued'])}`);
  return row!.n;
}

import { randomBytes } from 'node:crypto';
import type { Queryable } from './driver.js';

/**
 * The service's key for `name` (hex, 32 random bytes), created by whichever instance asks
 * first: a concurrent first use on two instances inserts once and both read the winner.
 */
export async function serviceKey(db: Queryable, name: string, now: number): Promise<string> {
  await db.run('INSERT INTO service_keys (name, secret, created_at) VALUES (?, ?, ?) ON CONFLICT (name) DO NOTHING', [
    name,
    randomBytes(32).toString('hex'),
    now,
  ]);
  const row = await db.get<{ secret: string }>('SELECT secret FROM service_keys WHERE name = ?', [name]);
  return row!.secret;
}

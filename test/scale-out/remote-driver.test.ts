import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/driver.js';
import { openDb } from '../../src/store/open.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';

/**
 * The remote driver against a real libSQL server (sqld), over both transports it speaks:
 * Hrana over WebSocket (`ws://`, what `libsql://` uses) and Hrana over HTTP (`http://`).
 */
let sqld: TestSqld;
beforeAll(async () => {
  sqld = await startSqld();
});
afterAll(async () => {
  await sqld?.stop();
});

const insert = (id: string, externalId = id) => ({
  sql: 'INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)',
  args: [id, externalId, `r-${id}-${Math.random()}`, 1],
});

describe.each([
  { transport: 'WebSocket', url: () => sqld.url.replace(/^http/, 'ws') },
  { transport: 'HTTP', url: () => sqld.url },
])('the remote driver on sqld over $transport', ({ transport, url }) => {
  let db: Db;
  beforeAll(async () => {
    db = await openDb(url());
  });
  afterAll(async () => {
    await db?.close();
  });

  it("commits a batch as a whole and reports each statement's changes", async () => {
    const [a, b] = [`${transport}-batch-a`, `${transport}-batch-b`];
    const results = await db.batch([insert(a), insert(b), { sql: 'UPDATE workspaces SET created_at = 2 WHERE id IN (?, ?)', args: [a, b] }]);
    expect(results.map((result) => result.changes)).toEqual([1, 1, 2]);
    expect(await db.all('SELECT id, created_at AS createdAt FROM workspaces WHERE id IN (?, ?) ORDER BY id', [a, b])).toEqual([
      { id: a, createdAt: 2 },
      { id: b, createdAt: 2 },
    ]);
  });

  it('rolls a batch back as a whole when a later statement fails', async () => {
    const id = `${transport}-rollback`;
    // The second insert repeats the external id, which is unique: the first must not stay.
    await expect(db.batch([insert(id, `${transport}-same`), insert(`${id}-2`, `${transport}-same`)])).rejects.toThrow();
    expect(await db.all('SELECT id FROM workspaces WHERE id LIKE ?', [`${id}%`])).toEqual([]);
  });

  it('lets concurrent writers on two connections all commit: none is refused as busy', async () => {
    // A second client is what a second instance of the service would be.
    const other = await openDb(url());
    const ids = Array.from({ length: 120 }, (_, i) => `${transport}-concurrent-${i}`);
    await Promise.all(
      ids.map((id, i) =>
        i % 2 === 0
          ? [db, other][i % 4 === 0 ? 0 : 1]!.transaction(async (tx) => {
              await tx.get('SELECT count(*) AS n FROM workspaces');
              await tx.run(insert(id).sql, insert(id).args);
              await tx.get('SELECT count(*) AS n FROM workspaces');
              await tx.run('UPDATE workspaces SET created_at = 3 WHERE id = ?', [id]);
            })
          : [db, other][i % 4 === 1 ? 0 : 1]!.run(insert(id).sql, insert(id).args),
      ),
    ).finally(() => other.close());
    expect((await db.get<{ n: number }>('SELECT count(*) AS n FROM workspaces WHERE id LIKE ?', [`${transport}-concurrent-%`]))?.n).toBe(120);
  });
});

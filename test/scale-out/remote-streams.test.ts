import { describe, expect, it } from 'vitest';
import { useRemoteDb } from '../helpers/remote-db.js';

/**
 * Hrana streams kept open between calls on the WebSocket transport (docs/performance.md "One
 * stream for many batches"): sqld opens a SQLite connection for every stream, so the remote
 * driver's group commits, read groups, batches and lone statements borrow a stream from a
 * small pool instead of opening one each; a call that failed leaves nothing behind for the
 * next one on a real sqld.
 */
const remote = useRemoteDb();

const INSERT = 'INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)';
const insert = (id: string) => remote.db.run(INSERT, [id, id, `r-${id}`, 1]);
const exists = async (id: string) => (await remote.db.get<{ id: string }>('SELECT id FROM workspaces WHERE id = ?', [id]))?.id === id;

describe('streams on the WebSocket transport', () => {
  it('are kept open: forty groups, batches and lone statements one after another open at most a few', async () => {
    const before = remote.db.stats();
    for (let i = 0; i < 10; i++) {
      await Promise.all([insert(`group-${i}-a`), insert(`group-${i}-b`)]);
      await insert(`alone-${i}`);
      await remote.db.batch([{ sql: INSERT, args: [`batch-${i}`, `batch-${i}`, `r-batch-${i}`, 1] }]);
      expect(await Promise.all([exists(`group-${i}-a`), exists(`alone-${i}`), exists(`batch-${i}`)])).toEqual([true, true, true]);
    }
    const after = remote.db.stats();
    expect(after.streamsOpened - before.streamsOpened).toBeLessThanOrEqual(3);
  });

  it('a batch that failed leaves no transaction open: the next calls commit and read as usual', async () => {
    await insert('taken');
    await expect(
      remote.db.batch([
        { sql: INSERT, args: ['fresh', 'fresh', 'r-fresh', 1] },
        { sql: INSERT, args: ['taken', 'taken', 'r-taken', 1] },
      ]),
    ).rejects.toThrow(/UNIQUE/);
    await expect(Promise.all([insert('after-1'), insert('after-2')])).resolves.toHaveLength(2);
    await insert('after-3');
    expect(await Promise.all(['fresh', 'after-1', 'after-2', 'after-3'].map(exists))).toEqual([false, true, true, true]);
  });

  it('a statement that failed alone leaves its stream usable by the next one', async () => {
    await expect(remote.db.get('SELECT * FROM no_such_table')).rejects.toThrow(/no such table/);
    await expect(insert('taken')).rejects.toThrow(/UNIQUE/);
    await insert('after-failures');
    expect(await exists('after-failures')).toBe(true);
  });
});

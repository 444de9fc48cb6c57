import { describe, expect, it } from 'vitest';
import { openDb } from '../../src/store/open.js';
import { socketTarget, StreamPool } from '../../src/store/remote-streams.js';
import { useRemoteDb } from '../helpers/remote-db.js';

/**
 * Hrana streams kept open between calls on the WebSocket transport (docs/contributors/performance-history.md "One
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

  it('a statement that failed alone leaves nothing behind: the next one commits', async () => {
    await expect(remote.db.get('SELECT * FROM no_such_table')).rejects.toThrow(/no such table/);
    await expect(insert('taken')).rejects.toThrow(/UNIQUE/);
    await insert('after-failures');
    expect(await exists('after-failures')).toBe(true);
  });
});

describe('the address the streams use', () => {
  it('is read from DATABASE_URL as @libsql/client reads it: libsql: is wss:, ?tls=0 is ws:, options are not part of it', () => {
    expect(socketTarget('libsql://db-org.turso.io', 'tok')).toEqual({ url: 'wss://db-org.turso.io/', authToken: 'tok' });
    expect(socketTarget('libsql://127.0.0.1:8080?tls=0', undefined)).toEqual({ url: 'ws://127.0.0.1:8080/', authToken: undefined });
    expect(socketTarget('libsql://db.example?authToken=from-url', undefined)).toEqual({ url: 'wss://db.example/', authToken: 'from-url' });
    expect(socketTarget('ws://127.0.0.1:8080', undefined)).toEqual({ url: 'ws://127.0.0.1:8080/', authToken: undefined });
  });

  it('serves a libsql:// DATABASE_URL on a real sqld: statements and batches commit', async () => {
    const db = await openDb(`${remote.sqldUrl.replace(/^http/, 'libsql')}?tls=0`);
    try {
      await db.run(INSERT, ['via-libsql', 'via-libsql', 'r-via-libsql', 1]);
      await db.batch([{ sql: INSERT, args: ['via-libsql-batch', 'via-libsql-batch', 'r-via-libsql-batch', 1] }]);
      expect(await Promise.all(['via-libsql', 'via-libsql-batch'].map(exists))).toEqual([true, true]);
    } finally {
      await db.close();
    }
  });
});

describe('the socket the streams share', () => {
  it('is replaced once old, and a call still out on the old one is answered', async () => {
    const pool = new StreamPool(remote.sqldUrl.replace(/^http/, 'ws'), undefined, { socketAgeMs: 20 });
    try {
      const slow = pool.query('WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 200000) SELECT count(*) AS c FROM n');
      await new Promise((resolve) => setTimeout(resolve, 30));
      const quick = await pool.query('SELECT 2 AS v');
      expect(quick.rows[0]?.[0]).toBe(2);
      expect((await slow).rows[0]?.[0]).toBe(200000);
      await new Promise((resolve) => setTimeout(resolve, 30));
      expect((await pool.query('SELECT 3 AS v')).rows[0]?.[0]).toBe(3);
      expect(pool.opened).toBe(3);
    } finally {
      pool.close();
    }
  });
});

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import type { Db } from '../../src/store/driver.js';
import { BACKSTOP_PAGES } from '../../src/store/checkpointer.js';
import { EmbeddedDb } from '../../src/store/embedded.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { openDb } from '../../src/store/open.js';
import { RemoteDb } from '../../src/store/remote.js';
import { client } from '../helpers/api.js';
import { createSetupToken } from '../helpers/fixtures.js';
import { startTestServer, useTestServer } from '../helpers/server.js';

const tempDir = () => fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-store-'));

const opened: Db[] = [];
afterEach(async () => {
  await Promise.all(opened.splice(0).map((db) => db.close()));
});
function track<T extends Db>(db: T): T {
  opened.push(db);
  return db;
}

/**
 * `busyTimeout`: the embedded driver has none (SQLite's busy handler would sleep on the event
 * loop; it waits for a lock from timers instead, test/store/write-lock.test.ts); the remote
 * driver, which meets a file only here, keeps SQLite's.
 */
function expectFileSettings(settings: Awaited<ReturnType<Db['connectionSettings']>>, busyTimeout: 'none' | 'some') {
  expect(settings.length).toBeGreaterThan(0);
  for (const connection of settings) {
    expect(connection.journalMode.toLowerCase()).toBe('wal');
    if (busyTimeout === 'none') expect(connection.busyTimeoutMs).toBe(0);
    else expect(connection.busyTimeoutMs).toBeGreaterThan(0);
    expect(connection.foreignKeys).toBe(true);
  }
}

describe('connection settings', () => {
  const server = useTestServer();

  it('the running service uses the embedded driver with WAL, no busy timeout on the event loop and foreign keys on every connection', async () => {
    expect(server.service.db.mode).toBe('embedded');
    expectFileSettings(await server.service.db.connectionSettings(), 'none');
  });

  it('the remote driver on a file: URL reports WAL, a busy timeout and foreign keys on every connection', async () => {
    const db = track(new RemoteDb(`file:${path.join(tempDir(), 'remote.db')}`, undefined));
    await migrate(db);
    expectFileSettings(await db.connectionSettings(), 'some');
  });

  it('enforces foreign keys', async () => {
    const db = track(await openDb(`file:${path.join(tempDir(), 'fk.db')}`));
    await expect(
      db.run(
        `INSERT INTO connections (id, workspace_id, purpose, name, principal, access, token_hash, token_prefix, device_limit, created_by, created_at)
         VALUES ('c', 'no-such-workspace', 'agent', 'n', 'p', 'read', 'h', 'p', 0, 'o', 0)`,
      ),
    ).rejects.toThrow(/FOREIGN KEY/i);
  });
});

describe('migrations', () => {
  it('are numbered, unique and in order', () => {
    const migrations = loadMigrations();
    expect(migrations.length).toBeGreaterThan(0);
    const versions = migrations.map((m) => m.version);
    expect(versions).toEqual([...versions].sort((a, b) => a - b));
    expect(new Set(versions).size).toBe(versions.length);
    expect(versions[0]).toBe(1);
  });

  it('apply everything on a new file, creating its folder', async () => {
    const file = path.join(tempDir(), 'nested', 'folder', 'service.db');
    const db = track(new EmbeddedDb(file));
    expect(await migrate(db)).toEqual(loadMigrations().map((m) => m.version));
    expect(fs.existsSync(file)).toBe(true);
  });

  it('are idempotent: opening the same file again applies nothing', async () => {
    const url = `file:${path.join(tempDir(), 'twice.db')}`;
    const first = await openDb(url);
    await first.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('w', 'kept', 'r', 1)");
    await first.close();

    const second = track(await openDb(url));
    expect(await migrate(second)).toEqual([]);
    const recorded = await second.all<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(recorded.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
    expect(await second.get('SELECT external_id AS externalId FROM workspaces')).toEqual({ externalId: 'kept' });
  });

  it('apply only the new ones when a migration is added', async () => {
    const db = track(new EmbeddedDb(path.join(tempDir(), 'grow.db')));
    const all = loadMigrations();
    await migrate(db, all);
    const next = { version: all.at(-1)!.version + 1, name: 'zz_test_only', sql: 'CREATE TABLE zz_test_only (x INTEGER);' };
    expect(await migrate(db, [...all, next])).toEqual([next.version]);
    expect(await migrate(db, [...all, next])).toEqual([]);
  });

  it('leave no trace of a migration that fails half-way', async () => {
    const db = track(new EmbeddedDb(path.join(tempDir(), 'broken.db')));
    const all = loadMigrations();
    await migrate(db, all);
    const broken = { version: all.at(-1)!.version + 1, name: 'broken', sql: 'CREATE TABLE half (x INTEGER); NOT SQL AT ALL;' };
    await expect(migrate(db, [...all, broken])).rejects.toThrow();
    expect(await db.get("SELECT name FROM sqlite_master WHERE name = 'half'")).toBeUndefined();
    expect(await db.get('SELECT version FROM schema_migrations WHERE version = ?', [broken.version])).toBeUndefined();
  });
});

describe.each([
  { driver: 'embedded (libsql)', open: (file: string) => new EmbeddedDb(file) as Db },
  { driver: 'remote (@libsql/client on a file: URL)', open: (file: string) => new RemoteDb(`file:${file}`, undefined) as Db },
])('the $driver driver', ({ open }) => {
  async function fresh(): Promise<Db> {
    const db = track(open(path.join(tempDir(), 'driver.db')));
    await migrate(db);
    return db;
  }

  it('migrates, writes and reads rows as plain records', async () => {
    const db = await fresh();
    const result = await db.run('INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)', ['w1', 'ext', 'r1', 1_700_000_000_000]);
    expect(result.changes).toBe(1);
    expect(await db.get('SELECT id, external_id AS externalId, created_at AS createdAt FROM workspaces WHERE id = ?', ['w1'])).toEqual({
      id: 'w1',
      externalId: 'ext',
      createdAt: 1_700_000_000_000,
    });
    expect(await db.all('SELECT id FROM workspaces')).toEqual([{ id: 'w1' }]);
    expect(await db.get('SELECT id FROM workspaces WHERE id = ?', ['missing'])).toBeUndefined();
  });

  it('commits a transaction as a whole', async () => {
    const db = await fresh();
    const value = await db.transaction(async (tx) => {
      await tx.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('a', 'a', 'ra', 1)");
      await tx.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('b', 'b', 'rb', 1)");
      return 'done';
    });
    expect(value).toBe('done');
    expect((await db.all('SELECT id FROM workspaces ORDER BY id')).length).toBe(2);
  });

  it('rolls a transaction back as a whole when it throws', async () => {
    const db = await fresh();
    await expect(
      db.transaction(async (tx) => {
        await tx.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('a', 'a', 'ra', 1)");
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(await db.all('SELECT id FROM workspaces')).toEqual([]);
  });

  it("runs a batch in order and reports each statement's changes", async () => {
    const db = await fresh();
    const results = await db.batch([
      { sql: "INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('a', 'a', 'ra', 1)" },
      { sql: 'UPDATE workspaces SET created_at = ? WHERE id = ?', args: [2, 'a'] },
      { sql: "DELETE FROM workspaces WHERE id = 'missing'" },
    ]);
    expect(results.map((result) => result.changes)).toEqual([1, 1, 0]);
    expect(await db.all('SELECT id, created_at AS createdAt FROM workspaces')).toEqual([{ id: 'a', createdAt: 2 }]);
  });

  it('rolls a batch back as a whole when one statement fails', async () => {
    const db = await fresh();
    await expect(
      db.batch([
        { sql: "INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('a', 'a', 'ra', 1)" },
        { sql: "INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('a', 'again', 'rb', 1)" },
      ]),
    ).rejects.toThrow();
    expect(await db.all('SELECT id FROM workspaces')).toEqual([]);
  });

  it('reports the changes of a guarded UPDATE (0 when the guard fails)', async () => {
    const db = await fresh();
    await db.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('a', 'a', 'ra', 1)");
    expect((await db.run("UPDATE workspaces SET created_at = 2 WHERE id = 'a' AND created_at = 1")).changes).toBe(1);
    expect((await db.run("UPDATE workspaces SET created_at = 3 WHERE id = 'a' AND created_at = 1")).changes).toBe(0);
  });
});

describe('the embedded driver under concurrent requests', () => {
  it('keeps statements issued during an open transaction out of it', async () => {
    const db = track(new EmbeddedDb(path.join(tempDir(), 'exclusive.db')));
    await migrate(db);
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const failing = db.transaction(async (tx) => {
      await tx.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('tx', 'tx', 'rtx', 1)");
      await gate;
      throw new Error('roll back');
    });
    // Issued while the transaction is open: must not land inside it (and so survive its rollback).
    const outside = db.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES ('out', 'out', 'rout', 1)");
    release();
    await expect(failing).rejects.toThrow('roll back');
    await outside;
    expect(await db.all('SELECT id FROM workspaces')).toEqual([{ id: 'out' }]);
  });
});

describe('group commit (embedded driver)', () => {
  /** The database under test, and a second connection to the same file that sees only what is committed. */
  async function pair(name: string): Promise<{ db: EmbeddedDb; observer: EmbeddedDb }> {
    const file = path.join(tempDir(), name);
    const db = track(new EmbeddedDb(file));
    await db.script(`CREATE TABLE items (id TEXT PRIMARY KEY, value TEXT);
      CREATE TABLE parents (id TEXT PRIMARY KEY);
      CREATE TABLE children (id TEXT PRIMARY KEY, parent_id TEXT REFERENCES parents (id) DEFERRABLE INITIALLY DEFERRED);`);
    return { db, observer: track(new EmbeddedDb(file, { backgroundCheckpoints: false })) };
  }
  const committedIds = async (observer: Db) => (await observer.all<{ id: string }>('SELECT id FROM items ORDER BY id')).map((row) => row.id);

  it('commits the writes of one event-loop turn together, and answers none before that commit', async () => {
    const { db, observer } = await pair('turn.db');
    const ids = Array.from({ length: 20 }, (_, i) => `i${String(i).padStart(2, '0')}`);
    const seenAtFirstAnswer: string[][] = [];
    const writes = ids.map((id, i) =>
      db.run('INSERT INTO items (id) VALUES (?)', [id]).then(async () => {
        if (i === 0) seenAtFirstAnswer.push(await committedIds(observer));
      }),
    );
    // Still the same turn: all twenty ran, none is committed yet.
    expect(await committedIds(observer)).toEqual([]);
    await Promise.all(writes);
    expect(seenAtFirstAnswer).toEqual([ids]);
  });

  it('a statement that fails on its own fails alone: the rest of its group commits', async () => {
    const { db, observer } = await pair('alone.db');
    await db.run("INSERT INTO items (id) VALUES ('taken')");
    const results = await Promise.allSettled([
      db.run("INSERT INTO items (id) VALUES ('a')"),
      db.run("INSERT INTO items (id) VALUES ('taken')"),
      db.run("INSERT INTO items (id) VALUES ('b')"),
    ]);
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect(await committedIds(observer)).toEqual(['a', 'b', 'taken']);
  });

  it('a read in an open group answers only once what it saw is committed', async () => {
    const { db, observer } = await pair('read.db');
    const write = db.run("INSERT INTO items (id) VALUES ('x')");
    const read = db.all<{ id: string }>('SELECT id FROM items').then(async (rows) => ({ rows, committed: await committedIds(observer) }));
    await write;
    expect(await read).toEqual({ rows: [{ id: 'x' }], committed: ['x'] });
  });

  it('a group its commit refuses fails every statement in it, keeps nothing, and the next write works', async () => {
    const { db, observer } = await pair('refused.db');
    // The deferred foreign key is checked at COMMIT: the statement succeeds, the group's commit fails.
    const results = await Promise.allSettled([
      db.run("INSERT INTO items (id) VALUES ('lost')"),
      db.run("INSERT INTO children (id, parent_id) VALUES ('orphan', 'nobody')"),
    ]);
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected']);
    expect((results[0] as PromiseRejectedResult).reason).toBeInstanceOf(Error);
    expect(await committedIds(observer)).toEqual([]);
    await db.run("INSERT INTO items (id) VALUES ('after')");
    expect(await committedIds(observer)).toEqual(['after']);
  });

  it('a statement whose error ends the transaction fails its group, and the statements after it in the turn run in a new group', async () => {
    const { db, observer } = await pair('ended.db');
    await db.run("INSERT INTO items (id) VALUES ('taken')");
    // OR ROLLBACK stands for any error SQLite answers by rolling the transaction back (disk full, I/O).
    const results = await Promise.allSettled([
      db.run("INSERT INTO items (id) VALUES ('rolled-back')"),
      db.run("INSERT OR ROLLBACK INTO items (id) VALUES ('taken')"),
      db.run("INSERT INTO items (id) VALUES ('after')"),
    ]);
    const committed = await committedIds(observer);
    // Whatever a statement was answered, the database must agree with it.
    expect(results.map((r) => r.status)).toEqual(['rejected', 'rejected', 'fulfilled']);
    expect(committed).toEqual(['after', 'taken']);
  });

  it('close() lets a write issued while it waits commit, and the process lives on', () => {
    // A request's second write, issued once its first is answered, lands while close() is
    // under way; libsql aborts the process (a panic, not an exception) when a closed
    // connection is asked anything, so this runs in a process of its own.
    const script = `
      import { EmbeddedDb } from './src/store/embedded.ts';
      const db = new EmbeddedDb(process.env.DB_FILE, { backgroundCheckpoints: false });
      await db.script('CREATE TABLE items (id TEXT PRIMARY KEY)');
      const first = db.run("INSERT INTO items (id) VALUES ('first')");
      const second = first.then(() => db.run("INSERT INTO items (id) VALUES ('second')"));
      await db.close();
      console.log(await second.then(() => 'second committed', (error) => error.message));`;
    const child = spawnSync(process.execPath, ['--import', 'tsx', '--input-type=module', '--eval', script], {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: { ...process.env, DB_FILE: path.join(tempDir(), 'closing.db') },
      encoding: 'utf8',
      timeout: 30_000,
    });
    expect({ status: child.status, stdout: child.stdout.trim() }).toEqual({ status: 0, stdout: 'second committed' });
  });

  it('the schema has no deferred constraint, so no write of one request can make the commit of its group fail', async () => {
    const db = track(await openDb(`file:${path.join(tempDir(), 'schema.db')}`));
    const deferred = await db.all<{ name: string }>("SELECT name FROM sqlite_master WHERE sql LIKE '%DEFERRABLE%'");
    expect(deferred).toEqual([]);
  });

  it('statements queued behind a transaction share one group once it ends, not one turn each', async () => {
    const { db, observer } = await pair('queued.db');
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const open = db.transaction(async (tx) => {
      await tx.run("INSERT INTO items (id) VALUES ('first')");
      await gate;
    });
    await new Promise((resolve) => setImmediate(resolve));
    const ids = Array.from({ length: 20 }, (_, i) => `q${String(i).padStart(2, '0')}`);
    const seenAtFirstAnswer: string[][] = [];
    const writes = ids.map((id, i) =>
      db.run('INSERT INTO items (id) VALUES (?)', [id]).then(async () => {
        if (i === 0) seenAtFirstAnswer.push(await committedIds(observer));
      }),
    );
    release();
    await open;
    await Promise.all(writes);
    expect(seenAtFirstAnswer).toEqual([['first', ...ids]]);
  });

  it('an interactive transaction begins after the open group commits, and its rollback takes only its own writes', async () => {
    const { db, observer } = await pair('transaction.db');
    const grouped = db.run("INSERT INTO items (id) VALUES ('grouped')");
    const failing = db.transaction(async (tx) => {
      await tx.run("INSERT INTO items (id) VALUES ('in-transaction')");
      throw new Error('roll back');
    });
    await grouped;
    await expect(failing).rejects.toThrow('roll back');
    expect(await committedIds(observer)).toEqual(['grouped']);
  });
});

describe('background checkpoints (embedded driver)', () => {
  const PAGE = 4096;
  const fileBytes = (file: string) => fs.statSync(file).size;
  const walBytes = (file: string) => (fs.existsSync(`${file}-wal`) ? fs.statSync(`${file}-wal`).size : 0);

  /** A table of `rows` rows of `pages` pages each (overflow pages), every row its own commit. */
  async function writeRows(db: Db, rows: number, pages = 1): Promise<void> {
    await db.run('CREATE TABLE IF NOT EXISTS pages (id INTEGER PRIMARY KEY, body BLOB)');
    for (let i = 0; i < rows; i++) await db.run('INSERT INTO pages (body) VALUES (zeroblob(?))', [pages * PAGE]);
  }

  async function waitFor(check: () => boolean, ms: number): Promise<boolean> {
    const deadline = Date.now() + ms;
    while (Date.now() < deadline) {
      if (check()) return true;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return check();
  }

  it('copies committed pages into the database file without any commit doing it', async () => {
    // 300 pages: far below both autocheckpoint marks, so only the worker can copy them.
    const file = path.join(tempDir(), 'background.db');
    const db = track(new EmbeddedDb(file));
    await writeRows(db, 300);
    expect(await waitFor(() => fileBytes(file) >= 300 * PAGE, 5000)).toBe(true);
  });

  it('with background checkpoints off, the same pages stay in the log until the autocheckpoint mark', async () => {
    const file = path.join(tempDir(), 'inline.db');
    const db = track(new EmbeddedDb(file, { backgroundCheckpoints: false }));
    await writeRows(db, 300);
    expect(await waitFor(() => fileBytes(file) >= 300 * PAGE, 300)).toBe(false);
    expect(walBytes(file)).toBeGreaterThanOrEqual(300 * PAGE);
  });

  it('keeps the log bounded under continuous writes (the backstop restarts it)', async () => {
    // 16,000 commits of two pages each: a log never restarted would hold all ~125 MiB; the
    // backstop restarts it at 32 MiB. A backstop skipped while the worker's checkpoint syncs
    // lets the log grow by what is written meanwhile: 47 MiB once in CI, 50 MiB on a machine
    // at load 8 (docs/contributors/performance-history.md "A checkpoint off the event loop"), so the bound is 2.5
    // times the mark, 80 MiB, well below the 125 MiB of a log never restarted.
    const file = path.join(tempDir(), 'bounded.db');
    const db = track(new EmbeddedDb(file));
    await writeRows(db, 16_000, 2);
    expect(fileBytes(file) + walBytes(file)).toBeGreaterThanOrEqual(32_000 * PAGE);
    expect(walBytes(file)).toBeLessThan(2.5 * BACKSTOP_PAGES * PAGE);
  });

  it('close() ends the worker: none of its resources outlives the database', async () => {
    const ports = () => process.getActiveResourcesInfo().filter((resource) => resource === 'MessagePort').length;
    const before = ports();
    const db = new EmbeddedDb(path.join(tempDir(), 'closed.db'));
    await writeRows(db, 50);
    expect(ports()).toBe(before + 1);
    await db.close();
    expect(ports()).toBe(before);
  });
});

describe('restart on the same database', () => {
  it('keeps tokens and devices: a setup token issued before a restart still attaches after it', async () => {
    const first = await startTestServer();
    const setup = await createSetupToken(client(first.url), await first.ownerToken('restart-owner'), { name: 'survives', deviceLimit: 2 });
    await first.close();

    const second = await startTestServer({ dir: first.dir });
    try {
      const res = await client(second.url).post('/v1/sdk/devices', { token: setup.token, body: { name: 'after restart' } });
      expect(res.status).toBe(201);
    } finally {
      await second.close();
    }
  });
});

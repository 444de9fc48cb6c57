import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startSqldCounter, type SqldCounter } from '../../scripts/sqld-counter.js';
import { DatabaseUnavailable, type Db } from '../../src/store/driver.js';
import { openDb } from '../../src/store/open.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';

/**
 * Group commit on a libSQL server (docs/contributors/performance-history.md "Group commit on a libSQL server"): the remote driver sends the standalone writes of one event-loop turn to a real sqld as
 * one batch in one transaction. Each rule runs over both transports; a second connection,
 * which sees only what is committed, is the witness.
 */
let sqld: TestSqld;
let counter: SqldCounter;
beforeAll(async () => {
  sqld = await startSqld();
  counter = await startSqldCounter(sqld.url);
});
afterAll(async () => {
  await counter?.close();
  await sqld?.stop();
});

const INSERT = 'INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?) RETURNING id, external_id AS externalId';
const insert = (db: Db, id: string, externalId = id) => db.get<{ id: string; externalId: string }>(INSERT, [id, externalId, `r-${id}`, 1]);
const ids = (prefix: string, n: number) => Array.from({ length: n }, (_, i) => `${prefix}-${i}`);
const stored = async (witness: Db, prefix: string) =>
  (await witness.all<{ id: string }>('SELECT id FROM workspaces WHERE id LIKE ? ORDER BY id', [`${prefix}-%`])).map((row) => row.id).sort();

const transports = [
  { transport: 'WebSocket', url: () => sqld.url.replace(/^http/, 'ws') },
  { transport: 'HTTP', url: () => sqld.url },
];

async function withDbs<T>(url: string, fn: (db: Db, witness: Db) => Promise<T>): Promise<T> {
  const db = await openDb(url);
  const witness = await openDb(url);
  try {
    return await fn(db, witness);
  } finally {
    await db.close();
    await witness.close();
  }
}

describe('concurrent writes of one turn', () => {
  it.each(transports)('commit together over $transport, each caller getting its own RETURNING row', async ({ transport, url }) => {
    await withDbs(url(), async (db) => {
      const mine = ids(`${transport}-turn`, 20);
      const answers = await Promise.all(mine.map((id) => insert(db, id)));
      expect(answers).toEqual(mine.map((id) => ({ id, externalId: id })));
    });
  });

  it('go to sqld in one network round trip (counted over HTTP by a proxy)', async () => {
    await withDbs(counter.url, async (db) => {
      const before = counter.counts();
      await Promise.all(ids('counted', 20).map((id) => insert(db, id)));
      const after = counter.counts();
      expect(after.roundTrips - before.roundTrips).toBe(1);
      // BEGIN, the 20 statements, COMMIT and the ROLLBACK step that runs only if the COMMIT fails.
      expect(after.statements - before.statements).toBe(23);
    });
  });
});

describe('a statement of a group that fails on its own', () => {
  it.each(transports)('fails alone over $transport: the others of its turn commit', async ({ transport, url }) => {
    await withDbs(url(), async (db, witness) => {
      const prefix = `${transport}-alone`;
      const mine = ids(prefix, 6);
      // The fourth repeats the first's external id, which is unique.
      const outcomes = await Promise.allSettled(mine.map((id, i) => insert(db, id, i === 3 ? mine[0] : id)));
      expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      const refused = (outcomes[3] as PromiseRejectedResult).reason;
      // A constraint is a bug of the caller's, not an outage (docs/reference/errors.md "Errors": 500, not 503).
      expect(refused).not.toBeInstanceOf(DatabaseUnavailable);
      expect(String(refused)).toMatch(/UNIQUE/i);
      expect(await stored(witness, prefix)).toEqual(mine.filter((_, i) => i !== 3).sort());
    });
  });

  it.each(transports)('fails alone over $transport when its error also ends the transaction (INSERT OR ROLLBACK)', async ({ transport, url }) => {
    await withDbs(url(), async (db, witness) => {
      const prefix = `${transport}-rollback`;
      const mine = ids(prefix, 5);
      const outcomes = await Promise.allSettled(
        mine.map((id, i) =>
          i === 2
            ? db.run('INSERT OR ROLLBACK INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)', [id, mine[0]!, `r-${id}`, 1])
            : insert(db, id),
        ),
      );
      expect(outcomes.map((outcome) => outcome.status)).toEqual(['fulfilled', 'fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
      expect(await stored(witness, prefix)).toEqual(mine.filter((_, i) => i !== 2).sort());
    });
  });
});

describe('a write of a group', () => {
  it.each(transports)('is answered over $transport only once the whole group is visible to another connection', async ({ transport, url }) => {
    await withDbs(url(), async (db, witness) => {
      const prefix = `${transport}-visible`;
      const mine = ids(prefix, 10);
      // What the witness saw the moment each caller had its answer: the whole group every time,
      // where writes committed one by one would show the first caller only its own row.
      const seen = await Promise.all(mine.map(async (id) => (await insert(db, id), stored(witness, prefix))));
      for (const rows of seen) expect(rows).toEqual([...mine].sort());
    });
  });
});

describe('reads of one turn', () => {
  it('go to sqld in one network round trip (counted over HTTP by a proxy)', async () => {
    await withDbs(counter.url, async (db) => {
      await Promise.all(ids('read', 3).map((id) => insert(db, id)));
      const before = counter.counts();
      const rows = await Promise.all(ids('read', 3).map((id) => db.get<{ id: string }>('SELECT id FROM workspaces WHERE id = ?', [id])));
      expect(counter.counts().roundTrips - before.roundTrips).toBe(1);
      expect(rows).toEqual(ids('read', 3).map((id) => ({ id })));
    });
  });

  it.each(transports)("are each answered over $transport when together they pass sqld's 10 MB answer limit", async ({ transport, url }) => {
    await withDbs(url(), async (db) => {
      const id = `${transport}-large`;
      await insert(db, id, transport.slice(0, 1).repeat(4_000_000));
      const read = () => db.get<{ externalId: string }>('SELECT external_id AS externalId FROM workspaces WHERE id = ?', [id]);
      const rows = await Promise.all([read(), read(), read()]);
      expect(rows.map((row) => row?.externalId.length)).toEqual([4_000_000, 4_000_000, 4_000_000]);
    });
  });

  it.each(transports)('are answered over $transport while a write transaction holds the writer queue', async ({ transport, url }) => {
    await withDbs(url(), async (db) => {
      const id = `${transport}-read-beside`;
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      const transaction = db.transaction(async (tx) => {
        await tx.run('INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)', [id, id, `r-${id}`, 1]);
        await held;
      });
      // The transaction's row is not committed yet: the read sees the database without it.
      expect(await db.get('SELECT id FROM workspaces WHERE id = ?', [id])).toBeUndefined();
      release();
      await transaction;
      expect(await db.get('SELECT id FROM workspaces WHERE id = ?', [id])).toEqual({ id });
    });
  });
});

describe('sqld killed while a group is on its way', () => {
  it.each(transports)(
    'fails every caller of the group over $transport with DatabaseUnavailable, and loses nothing that was answered',
    async ({ transport, url }) => {
      await withDbs(url(), async (db, witness) => {
        const answered: string[] = [];
        let failedRounds = 0;
        for (const [round, delayMs] of [0, 0, 1, 2, 5].entries()) {
          const prefix = `${transport}-outage-${round}`;
          const mine = ids(prefix, 10);
          const outcomes = Promise.allSettled(mine.map((id) => insert(db, id).then(() => answered.push(id))));
          // Killed in the same turn as the group forms, or a moment later while it is in flight.
          const killed = new Promise((resolve) => setTimeout(resolve, delayMs)).then(() => sqld.stop());
          const settled = await outcomes;
          await killed;
          const statuses = new Set(settled.map((outcome) => outcome.status));
          // All or nothing: one batch, one transaction.
          expect(statuses.size).toBe(1);
          if (statuses.has('rejected')) failedRounds++;
          for (const outcome of settled) if (outcome.status === 'rejected') expect(outcome.reason).toBeInstanceOf(DatabaseUnavailable);
          await sqld.start();
        }
        // Killed in the same turn, the group cannot have reached sqld: at least those rounds failed.
        expect(failedRounds).toBeGreaterThanOrEqual(2);
        // Served again without a new driver, and every answered write is there.
        await insert(db, `${transport}-outage-after`);
        const all = await witness.all<{ id: string }>('SELECT id FROM workspaces WHERE id LIKE ?', [`${transport}-outage-%`]);
        expect(all.map((row) => row.id)).toEqual(expect.arrayContaining([...answered, `${transport}-outage-after`]));
      });
    },
    60_000,
  );
});

import { describe, expect, it } from 'vitest';
import { useRemoteDb } from '../helpers/remote-db.js';

/**
 * The remote driver's writer-queue counters (`RemoteDb#stats`), which the bench reads to say
 * where a round trip's time goes on a libSQL server (docs/contributors/performance-history.md "Why a second
 * instance lowers throughput"), on a real sqld over WebSocket.
 */
const remote = useRemoteDb();

const INSERT = 'INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, ?, ?, ?)';
const insert = (id: string) => remote.db.run(INSERT, [id, id, `r-${id}`, 1]);

describe('the writer queue counters', () => {
  it('count the writes of one turn as one turn holding all their statements', async () => {
    const before = remote.db.stats();
    await Promise.all(Array.from({ length: 12 }, (_, i) => insert(`turn-${i}`)));
    const after = remote.db.stats();
    expect(after.turns - before.turns).toBe(1);
    expect(after.statementsHeld - before.statementsHeld).toBe(12);
    expect(after.heldMs).toBeGreaterThan(before.heldMs);
  });

  it('count a transaction as one turn and each statement it runs', async () => {
    const before = remote.db.stats();
    await remote.db.transaction(async (tx) => {
      await tx.run(INSERT, ['tx-1', 'tx-1', 'r-tx-1', 1]);
      await tx.run(INSERT, ['tx-2', 'tx-2', 'r-tx-2', 1]);
      await tx.get('SELECT id FROM workspaces WHERE id = ?', ['tx-1']);
    });
    const after = remote.db.stats();
    expect(after.turns - before.turns).toBe(1);
    expect(after.statementsHeld - before.statementsHeld).toBe(3);
  });

  it('count a batch as one turn holding its statements', async () => {
    const before = remote.db.stats();
    await remote.db.batch([
      { sql: INSERT, args: ['batch-1', 'batch-1', 'r-batch-1', 1] },
      { sql: INSERT, args: ['batch-2', 'batch-2', 'r-batch-2', 1] },
    ]);
    const after = remote.db.stats();
    expect(after.turns - before.turns).toBe(1);
    expect(after.statementsHeld - before.statementsHeld).toBe(2);
  });

  it('count the time a turn waited behind the one before it', async () => {
    const before = remote.db.stats();
    let release!: () => void;
    const holding = remote.db.transaction(async (tx) => {
      await tx.run(INSERT, ['held', 'held', 'r-held', 1]);
      await new Promise<void>((resolve) => (release = resolve));
    });
    const waiting = insert('behind');
    await new Promise((resolve) => setTimeout(resolve, 50));
    release();
    await Promise.all([holding, waiting]);
    const after = remote.db.stats();
    expect(after.turns - before.turns).toBe(2);
    expect(after.waitMs - before.waitMs).toBeGreaterThanOrEqual(40);
  });

  it('count the reads of one turn as one read batch', async () => {
    const before = remote.db.stats();
    await Promise.all(Array.from({ length: 5 }, (_, i) => remote.db.get('SELECT id FROM workspaces WHERE id = ?', [`turn-${i}`])));
    const after = remote.db.stats();
    expect(after.readBatches - before.readBatches).toBe(1);
    expect(after.readStatements - before.readStatements).toBe(5);
  });
});

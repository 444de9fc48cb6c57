import fs from 'node:fs';
import path from 'node:path';
import Database from 'libsql';
import { BACKSTOP_PAGES, startCheckpointer, type Checkpointer } from './checkpointer.js';
import {
  DatabaseLocked,
  guarded,
  isBusy,
  isWriteStatement,
  type ConnectionSettings,
  type Db,
  type Queryable,
  type RunResult,
  type SqlValue,
  type Statement as BatchStatement,
} from './driver.js';

type Statement = Database.Statement<unknown[]>;

/** A transaction shared by the standalone statements of one event-loop turn. */
interface Group {
  /** Settles when the group ends: resolved once committed, rejected when rolled back. */
  committed: Promise<void>;
  settle(error?: unknown): void;
  /**
   * Set while the group waits for the write lock another connection holds: its statements run
   * once it is taken, or fail with the wait. Unset once the group holds the lock.
   */
  waiting: Promise<void> | undefined;
}

export interface EmbeddedOptions {
  /** Checkpoints in a worker thread (the default for a file); off, SQLite's own autocheckpoint does it all. */
  backgroundCheckpoints?: boolean;
  /** Told why the background checkpointer stopped; the backstop carries on without it. */
  onCheckpointerFailure?: (message: string) => void;
  /** How long a write waits for another connection's write lock: `LOCK_WAIT_MS` unless a test needs a longer wait. */
  lockWaitMs?: number;
}

/**
 * How long a write waits for the write lock while another connection holds it (another process
 * on the file: a backup tool, an operator's `sqlite3`, a second instance started on it by
 * mistake). SQLite's own busy handler would sleep on the calling thread, which for this
 * synchronous driver is the event loop: with it, every request and /healthz stopped for the
 * whole timeout, once per write. So the connection's `busy_timeout` is 0, a write that finds
 * the lock taken polls for it from timers (`LOCK_POLL_MS`) while the event loop serves
 * everything else, and after this long it fails with 503 `unavailable` (docs/operators/database.md
 * "Another process on the file").
 */
export const LOCK_WAIT_MS = 1000;

/** The pauses between two tries for the lock, the last one repeated: SQLite's own busy handler's first steps. */
const LOCK_POLL_MS = [1, 2, 5, 10, 20];

/**
 * The embedded default: one synchronous `libsql` connection to a local file in WAL mode.
 * Statements are prepared once and cached by their text.
 *
 * The connection is shared by every request, so a transaction whose body awaits would let
 * another request's statement run inside it. `#exclusive` queues everything that arrives
 * while a transaction is open until it commits or rolls back.
 *
 * Standalone writes are committed in groups (docs/contributors/performance-history.md "Group commit"): the first
 * write of an event-loop turn opens a transaction, every statement of the same turn runs in
 * it, and one COMMIT at the end of the turn (`setImmediate`) ends it. Nothing is answered
 * before its group commits: each statement's promise settles only then, reads that ran in
 * the group included (they may have seen the group's uncommitted writes), and a group that
 * fails to commit, or that a statement's error rolled back, fails every statement in it.
 * Only database-level trouble can do either while the schema has no DEFERRABLE constraint
 * (one request's write checked at COMMIT would fail its whole group).
 */
export class EmbeddedDb implements Db {
  readonly mode = 'embedded' as const;
  readonly #db: Database.Database;
  readonly #statements = new Map<string, Statement>();
  #tail: Promise<unknown> = Promise.resolve();
  #inTransaction = false;
  /** A `transaction()` holds the lock: between its BEGIN and its COMMIT or ROLLBACK. */
  #transactionOpen = false;
  /** The open group of standalone statements, committed at the end of this event-loop turn. */
  #group: Group | undefined;
  readonly #checkpointer: Checkpointer | undefined;
  /**
   * Set when a write waited `LOCK_WAIT_MS` in vain, cleared when the lock is next taken. While
   * it is set, a write that finds the lock taken fails at once instead of waiting again: a
   * request making several writes, and the requests queued behind it, fail fast rather than
   * one wait each.
   */
  #lockedOut = false;
  readonly #lockWaitMs: number;

  constructor(file: string, options: EmbeddedOptions = {}) {
    this.#lockWaitMs = options.lockWaitMs ?? LOCK_WAIT_MS;
    fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
    this.#db = new Database(file);
    this.#db.pragma('journal_mode = WAL');
    // Waiting for another connection's lock happens off the event loop (`LOCK_WAIT_MS`).
    this.#db.pragma('busy_timeout = 0');
    // NORMAL is durable in WAL mode against process crashes (only an OS crash can lose the
    // last transactions); facts.md measured 30 kill -9 runs with no acknowledged write lost.
    this.#db.pragma('synchronous = NORMAL');
    this.#db.pragma('foreign_keys = ON');
    if ((options.backgroundCheckpoints ?? true) && !this.#db.memory) {
      this.#db.pragma(`wal_autocheckpoint = ${BACKSTOP_PAGES}`);
      this.#checkpointer = startCheckpointer(file, options.onCheckpointerFailure ?? (() => {}));
    }
  }

  #statement(sql: string): Statement {
    let statement = this.#statements.get(sql);
    if (!statement) {
      statement = this.#db.prepare<unknown[]>(sql);
      this.#statements.set(sql, statement);
    }
    return statement;
  }

  readonly #direct: Queryable = {
    all: async <T>(sql: string, args: readonly SqlValue[] = []) => this.#statement(sql).all(...args) as T[],
    get: async <T>(sql: string, args: readonly SqlValue[] = []) => {
      const row = this.#statement(sql).get(...args) as (Record<string, unknown> & { _metadata?: unknown }) | undefined;
      // libsql 0.5's `get()` (unlike `all()`) adds a `_metadata` timing property to the row;
      // repositories and their callers expect exactly the selected columns.
      if (row) delete row._metadata;
      return row as T | undefined;
    },
    run: async (sql: string, args: readonly SqlValue[] = []): Promise<RunResult> => {
      const info = this.#statement(sql).run(...args);
      return { changes: info.changes };
    },
  };

  async #exclusive<T>(fn: () => Promise<T>): Promise<T> {
    const previous = this.#tail;
    let release!: () => void;
    this.#tail = new Promise<void>((resolve) => (release = resolve));
    await previous;
    try {
      return await fn();
    } finally {
      release();
    }
  }

  // Every entry point classifies its failures (`guarded`, src/store/driver.ts): the write lock
  // held past `LOCK_WAIT_MS` (another process holds the file) and disk trouble are 503
  // `unavailable`, not a 500 (docs/reference/errors.md "Errors").
  //
  // A write outside a transaction takes the lock with `BEGIN IMMEDIATE` first: a prepared
  // write statement that fails with SQLITE_BUSY is left "in progress" by libsql 0.5 (no reset
  // after the failed step), and every later COMMIT on the connection then fails with "SQL
  // statements in progress" until that statement happens to run again. A failed `BEGIN`
  // leaves nothing behind.
  all<T>(sql: string, args?: readonly SqlValue[]): Promise<T[]> {
    return guarded(() => this.#one(sql, (q) => q.all<T>(sql, args)));
  }

  get<T>(sql: string, args?: readonly SqlValue[]): Promise<T | undefined> {
    return guarded(() => this.#one(sql, (q) => q.get<T>(sql, args)));
  }

  run(sql: string, args?: readonly SqlValue[]): Promise<RunResult> {
    return guarded(() => this.#one(sql, (q) => q.run(sql, args)));
  }

  #one<T>(sql: string, call: (q: Queryable) => Promise<T>): Promise<T> {
    // A read waits only for this connection's own open transaction or group (it may see their
    // writes, so it is answered once they commit). While a write still waits for another
    // connection's lock, nothing is written yet, and reads answer at once.
    // (Asked of this object's own state: the driver's `inTransaction` costs a native call.)
    const holding = this.#transactionOpen || (this.#group !== undefined && this.#group.waiting === undefined);
    if (!holding && !isWriteStatement(sql)) return call(this.#direct);
    if (this.#inTransaction) {
      // Behind an open (or waiting) transaction, then as any statement: its turn ends once it
      // has run, not once its group commits, so the statements queued behind it share a group.
      let answer!: Promise<T>;
      return this.#exclusive(async () => {
        answer = this.#one(sql, call);
        answer.catch(() => {});
      }).then(() => answer);
    }
    return this.#grouped(call);
  }

  /**
   * Runs `call` in this turn's group, opening it (`BEGIN IMMEDIATE`, the lock taken before
   * any write: the libsql busy pitfall above) if it is the turn's first, and answers once
   * the group has committed.
   */
  async #grouped<T>(call: (q: Queryable) => Promise<T>): Promise<T> {
    const group = this.#group ?? this.#openGroup();
    if (group.waiting) {
      await group.waiting;
      // A statement that ran first may have ended the group (its error rolled it back).
      if (this.#group !== group) return this.#grouped(call);
    }
    // `call` runs the statement before it returns. A failed statement changed nothing, unless
    // its error ended the transaction (SQLite rolls back on some, disk full among them): then
    // everything the group had done is gone and every statement in it fails. The group ends
    // now, not once this promise settles: a statement issued in between would otherwise run
    // outside any transaction, be committed, and be answered as failed with the group.
    const ran = call(this.#direct);
    if (!this.#db.inTransaction && this.#group === group) {
      this.#group = undefined;
      ran.then(
        () => group.settle(new Error('the group transaction ended before its commit')),
        (error: unknown) => group.settle(error),
      );
    }
    const value = await ran;
    await group.committed;
    return value;
  }

  #openGroup(): Group {
    const locked = this.#tryBegin();
    let settle!: (error?: unknown) => void;
    const committed = new Promise<void>((resolve, reject) => (settle = (error) => (error === undefined ? resolve() : reject(error))));
    // Each statement awaits it; a group whose every statement failed on its own has no one to.
    committed.catch(() => {});
    const group: Group = { committed, settle, waiting: undefined };
    this.#group = group;
    if (locked) {
      setImmediate(() => this.#commitGroup(group));
      return group;
    }
    // The statements of this turn and those arriving meanwhile wait together; the commit is
    // scheduled once the lock is taken, after every one of them has run (they resume first).
    group.waiting = this.#waitForLock(Date.now() + this.#lockWaitMs).then(
      () => {
        group.waiting = undefined;
        setImmediate(() => this.#commitGroup(group));
      },
      (error: unknown) => {
        this.#endGroup(group, error);
        throw error;
      },
    );
    group.waiting.catch(() => {});
    return group;
  }

  /**
   * `BEGIN IMMEDIATE` once: true when the write lock is taken, false when another connection
   * holds it. Never sleeps (`busy_timeout` is 0); any other failure is thrown.
   */
  #tryBegin(): boolean {
    try {
      this.#db.exec('BEGIN IMMEDIATE');
    } catch (error) {
      if (isBusy(error)) return false;
      throw error;
    }
    this.#lockedOut = false;
    return true;
  }

  /**
   * Takes the write lock another connection holds, trying again after each pause of
   * `LOCK_POLL_MS` until `deadline`; the event loop serves everything else meanwhile. Fails
   * with `DatabaseLocked` at the deadline, or after one more try while a wait has already run
   * out (`#lockedOut`).
   */
  async #waitForLock(deadline: number): Promise<void> {
    for (let attempt = 0; ; attempt++) {
      const left = this.#lockedOut ? 0 : deadline - Date.now();
      if (left <= 0) {
        this.#lockedOut = true;
        throw new DatabaseLocked(`not free within ${this.#lockWaitMs} ms`);
      }
      await new Promise((resolve) => setTimeout(resolve, Math.min(LOCK_POLL_MS[Math.min(attempt, LOCK_POLL_MS.length - 1)]!, left)));
      if (this.#tryBegin()) return;
    }
  }

  /** Takes the write lock at once if it is free, else waits for it until `deadline`. */
  async #begin(deadline: number): Promise<void> {
    if (!this.#tryBegin()) await this.#waitForLock(deadline);
  }

  async checkWriteLock(): Promise<void> {
    // This connection's own open transaction holds the lock: nobody else does.
    if (this.#db.inTransaction) return;
    if (!this.#tryBegin()) throw new DatabaseLocked('held now');
    this.#db.exec('ROLLBACK');
  }

  #commitGroup(group: Group): void {
    if (this.#group !== group) return;
    try {
      this.#db.exec('COMMIT');
      this.#endGroup(group);
    } catch (error) {
      try {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
      } catch {
        // Runs in a timer, where a throw would end the process: the next BEGIN reports the state.
      }
      this.#endGroup(group, error);
    }
  }

  #endGroup(group: Group, error?: unknown): void {
    this.#group = undefined;
    group.settle(error);
  }

  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    return guarded(() => this.#transaction(fn));
  }

  #transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    // The lock wait counts from the call, not from the turn in the queue below.
    const deadline = Date.now() + this.#lockWaitMs;
    return this.#exclusive(async () => {
      // Statements arriving from now on queue behind this transaction; the group already
      // open commits first (its statements cannot share this transaction's rollback).
      this.#inTransaction = true;
      try {
        // The group's failure is its own statements' to report.
        while (this.#group) await this.#group.committed.catch(() => {});
        await this.#begin(deadline);
        this.#transactionOpen = true;
      } catch (error) {
        this.#inTransaction = false;
        throw error;
      }
      try {
        const result = await fn(this.#direct);
        this.#db.exec('COMMIT');
        return result;
      } catch (error) {
        if (this.#db.inTransaction) this.#db.exec('ROLLBACK');
        throw error;
      } finally {
        this.#transactionOpen = false;
        this.#inTransaction = false;
      }
    });
  }

  batch(statements: readonly BatchStatement[]): Promise<RunResult[]> {
    return this.transaction(async (tx) => {
      const results: RunResult[] = [];
      for (const { sql, args } of statements) results.push(await tx.run(sql, args));
      return results;
    });
  }

  script(sql: string): Promise<void> {
    return this.transaction(async () => {
      this.#db.exec(sql);
    });
  }

  /**
   * Reads a PRAGMA's value. Not `pragma(name, { simple: true })`: in libsql 0.5 that answers
   * the whole row object (its pluck mode applies to `all()` only), which reported
   * "[object Object]" as the journal mode.
   */
  #pragma(name: string): unknown {
    const row = this.#db.prepare(`PRAGMA ${name}`).all()[0] as Record<string, unknown> | undefined;
    return row === undefined ? undefined : Object.values(row)[0];
  }

  async connectionSettings(): Promise<ConnectionSettings[]> {
    return [
      {
        journalMode: String(this.#pragma('journal_mode')),
        busyTimeoutMs: Number(this.#pragma('busy_timeout')),
        foreignKeys: Number(this.#pragma('foreign_keys')) === 1,
      },
    ];
  }

  async close(): Promise<void> {
    await this.#checkpointer?.stop();
    // Closes only once no transaction or group is open: a statement answered while this waits
    // can be followed by its request's next one, which opens a new group, and a group whose
    // connection closed under it would ask the closed connection `inTransaction` (a libsql
    // panic: the process aborts). The last check and the close run in one synchronous step.
    for (;;) {
      const tail = this.#tail;
      await tail;
      const group = this.#group;
      if (group) await group.committed.catch(() => {});
      else if (tail === this.#tail) break;
    }
    this.#statements.clear();
    this.#db.close();
  }
}

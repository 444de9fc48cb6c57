/**
 * The thin driver interface every repository talks to. Two implementations: the embedded
 * default (`libsql` package, one connection, cached prepared statements — measured 1.7×
 * faster than `@libsql/client` on this machine and free of its pool pitfalls, see
 * docs/performance.md "Storage facts the code relies on") and a remote libSQL server (sqld / Turso) through `@libsql/client`.
 */
export type SqlValue = string | number | bigint | null;

export interface RunResult {
  changes: number;
}

/** One statement of a batch. */
export interface Statement {
  sql: string;
  args?: readonly SqlValue[];
}

export interface Queryable {
  all<T>(sql: string, args?: readonly SqlValue[]): Promise<T[]>;
  get<T>(sql: string, args?: readonly SqlValue[]): Promise<T | undefined>;
  run(sql: string, args?: readonly SqlValue[]): Promise<RunResult>;
}

export interface ConnectionSettings {
  journalMode: string;
  busyTimeoutMs: number;
  foreignKeys: boolean;
}

export interface Db extends Queryable {
  readonly mode: 'embedded' | 'remote';
  /**
   * Runs `fn` in one write transaction. The body must only talk to the database (no
   * network waits): other requests queue behind it until it commits. On a libSQL server a
   * transaction the server reports busy is rolled back and `fn` runs again, so a body keeps
   * no effects outside `tx` beyond what it returns.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /**
   * Runs writes that need no answer between them in order, in one transaction: all or
   * nothing. On a libSQL server the whole batch is one network round trip, where an
   * interactive transaction costs one per statement and one to commit.
   */
  batch(statements: readonly Statement[]): Promise<RunResult[]>;
  /** Runs a multi-statement script (migrations) in one transaction. */
  script(sql: string): Promise<void>;
  /** The settings of every connection the store holds, for the test that asserts them. */
  connectionSettings(): Promise<ConnectionSettings[]>;
  close(): Promise<void>;
}

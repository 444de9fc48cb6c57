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
   * network waits): other requests queue behind it until it commits.
   */
  transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T>;
  /** Runs a multi-statement script (migrations) in one transaction. */
  script(sql: string): Promise<void>;
  /** The settings of every connection the store holds, for the test that asserts them. */
  connectionSettings(): Promise<ConnectionSettings[]>;
  close(): Promise<void>;
}

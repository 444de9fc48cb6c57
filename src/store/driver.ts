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
  /**
   * Throws `DatabaseLocked` when another connection holds the write lock now, without waiting
   * for it: what a readiness probe asks beside `SELECT 1`, which a held lock does not stop.
   * Only the embedded driver has one: a libSQL server's lock is its own to manage.
   */
  checkWriteLock?(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The database cannot serve now: unreachable, not answering within the driver's bound, busy
 * past the busy timeout, out of disk. Both drivers throw this, and only for such failures
 * (`unavailableFrom`), so that one mapping turns it into 503 `unavailable` with Retry-After
 * (docs/reference/errors.md "Errors"); any other driver error (a constraint, bad SQL) is a bug and stays as it
 * was thrown (500 `internal`). The message names the cause for the log, never SQL or
 * arguments; callers are not shown it.
 */
export class DatabaseUnavailable extends Error {
  constructor(reason: string, options?: { cause?: unknown }) {
    super(`database unavailable: ${reason}`, options);
    this.name = 'DatabaseUnavailable';
  }
}

/**
 * Another connection (another process on the embedded file) held the write lock for longer than
 * a write waits for it. A kind of `DatabaseUnavailable`, so it maps to 503 alike; a readiness
 * probe names it (docs/operators/probes.md "Probes").
 */
export class DatabaseLocked extends DatabaseUnavailable {
  constructor(reason: string) {
    super(`write lock held by another connection: ${reason}`);
    this.name = 'DatabaseLocked';
  }
}

/**
 * SQLite result codes (the primary code, before any `_EXTENDED` suffix) that say "not now"
 * rather than "wrong": lock contention that outlasted the busy timeout, and disk trouble
 * (full, I/O error, cannot open). A retry later can succeed once the contention ends or an
 * operator frees the disk, so the caller gets 503, and the log line says which it was.
 */
const NOT_NOW_SQLITE_CODES = new Set(['SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_FULL', 'SQLITE_IOERR', 'SQLITE_CANTOPEN', 'SQLITE_PROTOCOL']);

/**
 * Codes of `@libsql/client` for a server that did not answer or dropped its stream (sqld
 * restarted, an HTTP 5xx or 401 from a proxy or Turso, a closed WebSocket). SQL errors it
 * reports carry SQLite's own codes instead.
 */
const TRANSPORT_CODES = new Set([
  'SERVER_ERROR',
  'HRANA_CLOSED_ERROR',
  'HRANA_WEBSOCKET_ERROR',
  'HRANA_PROTO_ERROR',
  'STREAM_EXPIRED',
  'STREAM_NOT_FOUND',
  'PROTOCOL_VERSION_ERROR',
]);

const errorCode = (error: unknown): string | undefined => {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
};

/** SQLite's "another connection holds the lock" (`SQLITE_BUSY` and its extended codes). */
export const isBusy = (error: unknown): boolean => errorCode(error)?.startsWith('SQLITE_BUSY') ?? false;

const describe = (error: unknown): string => {
  const parts: string[] = [];
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 3; depth++, e = e.cause) {
    const code = errorCode(e);
    parts.push(code && !e.message.includes(code) ? `${e.message} (${code})` : e.message);
  }
  return parts.join(': ') || String(error);
};

/**
 * The one classification of driver failures. `answeredByServer` is given by a network driver
 * (the remote one): an error that is not an answer from the server — a refused connection, a
 * timeout, an abort — means the server is out of reach.
 */
export function unavailableFrom(error: unknown, answeredByServer?: (error: unknown) => boolean): DatabaseUnavailable | undefined {
  if (error instanceof DatabaseUnavailable) return error;
  const code = errorCode(error);
  const primary = code?.match(/^SQLITE_[A-Z]+/)?.[0];
  const notNow =
    (primary !== undefined && NOT_NOW_SQLITE_CODES.has(primary)) ||
    (answeredByServer !== undefined && (!answeredByServer(error) || (code !== undefined && TRANSPORT_CODES.has(code))));
  return notNow ? new DatabaseUnavailable(describe(error), { cause: error }) : undefined;
}

/** Runs one driver call, throwing `DatabaseUnavailable` for the failures that mean it. */
export async function guarded<T>(call: () => Promise<T> | T, answeredByServer?: (error: unknown) => boolean): Promise<T> {
  try {
    return await call();
  } catch (error) {
    throw unavailableFrom(error, answeredByServer) ?? error;
  }
}

/**
 * A statement that may write (`WITH … INSERT` included); anything else only reads. Both
 * drivers run such a statement outside a transaction under their write discipline
 * (src/store/embedded.ts, src/store/remote.ts).
 */
export const isWriteStatement = (sql: string): boolean => /^\s*(?:INSERT|UPDATE|DELETE|REPLACE|WITH)\b/i.test(sql);

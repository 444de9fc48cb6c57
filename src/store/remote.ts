// Over 400 lines: one class, RemoteDb, whose writer queue, read and write groups and stream pool share private state; the helpers above it serve only it
import { createClient, LibsqlBatchError, LibsqlError, type Client, type InStatement } from '@libsql/client';
import { createClient as createWebSocketClient } from '@libsql/client/ws';
import {
  DatabaseUnavailable,
  guarded,
  isWriteStatement,
  type ConnectionSettings,
  type Db,
  type Queryable,
  type RunResult,
  type SqlValue,
  type Statement,
  unavailableFrom,
} from './driver.js';
import { StreamPool, type Answer } from './remote-streams.js';

/**
 * An error the server answered (bad SQL, a constraint, SQLITE_BUSY) rather than a failure to
 * reach it. A call still in flight on a WebSocket client given up after a timeout (`#bounded`)
 * fails with the client's own "manually closed" error: the server never answered it.
 */
const answeredByServer = (error: unknown) => error instanceof LibsqlError && !/client was manually closed/i.test(error.message);

/**
 * How long one HTTP request to the server may take, connecting included (docs/reference/errors.md "Errors":
 * a database that does not answer is 503 `unavailable` within a bounded time). Without it an
 * address that accepts connections and never answers would hold a request for undici's five
 * minutes. The server's own busy timeout (5 s) fits inside it.
 */
const REQUEST_TIMEOUT_MS = 8000;

const boundedFetch = (request: Request) => fetch(request, { signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS) });

/** What a call on the WebSocket transport throws when the server gives no answer within the bound. */
class NoAnswer extends Error {
  constructor() {
    super(`no answer from the database server within ${REQUEST_TIMEOUT_MS} ms`);
    this.name = 'NoAnswer';
  }
}

function rows<T>(result: Answer): T[] {
  // Rows from @libsql/client are array-like objects with column getters; repositories
  // expect plain records.
  return result.rows.map((row) => {
    const record: Record<string, unknown> = {};
    result.columns.forEach((column, index) => {
      record[column] = row[index];
    });
    return record as T;
  });
}

function statement(sql: string, args: readonly SqlValue[] = []): InStatement {
  return { sql, args: [...args] };
}

function queryable(target: { execute(stmt: InStatement): Promise<Answer> }): Queryable {
  return {
    all: async <T>(sql: string, args?: readonly SqlValue[]) => rows<T>(await guarded(() => target.execute(statement(sql, args)), answeredByServer)),
    get: async <T>(sql: string, args?: readonly SqlValue[]) => rows<T>(await guarded(() => target.execute(statement(sql, args)), answeredByServer))[0],
    run: async (sql: string, args?: readonly SqlValue[]): Promise<RunResult> => {
      const result = await guarded(() => target.execute(statement(sql, args)), answeredByServer);
      return { changes: result.rowsAffected };
    },
  };
}

const isBusy = (error: unknown) => error instanceof LibsqlError && error.code.startsWith('SQLITE_BUSY');

const pause = (attempt: number) => new Promise((resolve) => setTimeout(resolve, Math.min(100, 2 ** attempt) * (0.5 + Math.random())));

/**
 * How long a writer waits for another writer's lock before the caller sees SQLITE_BUSY, from
 * timers. Longer than the embedded driver's wait (`LOCK_WAIT_MS`, src/store/embedded.ts): on a
 * shared server the other writers are this service's own instances taking turns, not another
 * program holding the file.
 */
const BUSY_TIMEOUT_MS = 5000;

/**
 * sqld answers SQLITE_BUSY at once when another stream holds the write lock (measured: 15
 * pollers over three instances met it within 30 ms), where the embedded driver would wait
 * for the lock. A statement refused so did nothing, so it is sent again after a short,
 * growing pause, for up to BUSY_TIMEOUT_MS; only then does the caller see it (503
 * `unavailable`, docs/reference/errors.md "Errors"). `refused` says whether to try again.
 */
async function whileBusy<T>(call: () => Promise<T>, refused: (error: unknown) => boolean = isBusy, stats?: WriterQueueStats): Promise<T> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!refused(error) || Date.now() >= deadline) throw error;
      if (stats) stats.busyRetries++;
      await pause(attempt);
    }
  }
}

/**
 * What one instance's database traffic has cost so far (`RemoteDb#stats`), read by the
 * bench (scripts/bench.ts, docs/contributors/performance-history.md "Why a second instance lowers throughput"):
 * the writer queue's turns, how long each waited for its turn and held it (the time its
 * statements kept sqld's write lock or waited for it), the statements sent while held, the
 * writes sqld refused as busy (another instance held the lock) and sent again, and the read
 * groups. Counting costs two clock reads per turn.
 */
export interface WriterQueueStats {
  turns: number;
  waitMs: number;
  heldMs: number;
  statementsHeld: number;
  busyRetries: number;
  readBatches: number;
  readStatements: number;
  /** Hrana streams the WebSocket transport's pool opened (`StreamPool`); each costs sqld a connection. */
  streamsOpened: number;
}

/** A standalone statement waiting in a group (`RemoteDb#grouped`) for its answer. */
interface Member {
  stmt: InStatement;
  resolve(result: Answer): void;
  reject(error: unknown): void;
}

/**
 * At most this many statements go in one group. Bodies are at most 16 KiB (docs/reference/errors.md "Errors"),
 * so a group's request and answer stay far below sqld's 10 MB answer limit, which would fail
 * the whole group (docs/contributors/performance-history.md "Statements per request": a too large batch made sqld
 * close the WebSocket). Twenty device loops fill a group with about 20.
 */
const GROUP_LIMIT = 100;

/**
 * How long a read group waits for the read batch in flight before it, collecting the reads
 * that arrive meanwhile (`RemoteDb#grouped`). Short enough that a slow read (an export, a
 * stalled server) holds up no other read longer than this; long enough to cover a loopback or
 * LAN batch, which is when waiting saves sqld a stream.
 */
const READ_JOIN_MS = 20;

/** Whichever comes first: `previous` settling, or `ms` passing. */
function settledOrAfter(previous: Promise<unknown>, ms: number): Promise<unknown> {
  let timer: NodeJS.Timeout | undefined;
  const elapsed = new Promise((resolve) => {
    timer = setTimeout(resolve, ms);
    timer.unref();
  });
  return Promise.race([previous, elapsed]).finally(() => clearTimeout(timer));
}

const isReadStatement = (sql: string) => /^\s*SELECT\b/i.test(sql);

/**
 * Which member of a failed group batch failed on its own: a statement the server refused
 * (a constraint, bad SQL) with `@libsql/client`'s index. Anything else (the server out of
 * reach, busy, out of disk, the transaction ended otherwise) is the whole group's.
 */
function failedAlone(error: unknown): number | undefined {
  if (!(error instanceof LibsqlBatchError) || error.code === 'TRANSACTION_CLOSED') return undefined;
  return unavailableFrom(error, answeredByServer) === undefined ? error.statementIndex : undefined;
}

/**
 * Which transport a URL takes. `libsql://`, `ws://` and `wss://` go over the Hrana WebSocket
 * transport: one socket, each statement a frame on it, measured about 4× faster per statement
 * than Hrana over HTTP, where each statement is its own HTTP request (docs/performance.md "On a
 * libSQL server (sqld)"); `libsql://` means TLS, as `wss://`. `http://` and `https://` stay on
 * HTTP, for a proxy that does not pass WebSocket upgrades. The outage tests run over both
 * (test/hostile/database-outage.test.ts); calls on the socket are bounded by `RemoteDb`'s own timer.
 */
const isWebSocketUrl = (url: string) => /^(?:wss?|libsql):/i.test(url);

function createRemoteClient(config: Parameters<typeof createClient>[0]): Client {
  return isWebSocketUrl(config.url) ? createWebSocketClient(config) : createClient(config);
}

/**
 * A libSQL server (sqld, Turso) reached over `libsql://`, `http://`, `https://`, `ws://` or
 * `wss://`. The server owns durability and WAL; each interactive transaction is its own
 * server-side stream.
 *
 * A `file:` URL also works here (the tests use it to exercise this driver without a server).
 * `@libsql/client` then keeps a pool of local connections, and a PRAGMA run through
 * `execute()` reaches only one of them (docs/performance.md "Storage facts the code relies
 * on"), so the busy timeout is given to the
 * client, which sets it on every connection it opens, and WAL, which the file itself
 * remembers, is switched on once before the first statement. `openDb` serves `file:` URLs
 * with the embedded driver; this path is for exercising the remote driver only.
 */
export class RemoteDb implements Db {
  readonly mode = 'remote' as const;
  #client: Client;
  readonly #connect: () => Client;
  readonly #webSocket: boolean;
  /** On the WebSocket transport, the streams standalone statements and batches go on, kept open between them. */
  readonly #streams: StreamPool | undefined;
  readonly #direct: Queryable;
  readonly #groupedWrites: Queryable;
  readonly #groupedReads: Queryable;
  readonly #ready: Promise<unknown>;
  /**
   * This instance's writes, one at a time. sqld refuses a second writer with SQLITE_BUSY at
   * once instead of queueing it, so concurrent requests of one instance would otherwise spin
   * on each other's lock through `whileBusy`, each retry a network round trip (measured: MCP
   * round trips at 4/s with p50 2.4 s on sqld with 20 devices, docs/performance.md "On a
   * libSQL server (sqld)"). Queued here, they wait for each other without asking the server;
   * only other instances' writers are met as SQLITE_BUSY. Reads never wait for writes.
   */
  #writes: Promise<unknown> = Promise.resolve();
  /**
   * The groups of standalone writes and of reads still taking statements (docs/performance.md
   * "On a libSQL server (sqld)", its group commit), sent by `#grouped`.
   */
  #writeGroup: Member[] | undefined;
  #readGroup: Member[] | undefined;
  /** Read groups not yet answered, for `close()`. */
  readonly #readsInFlight = new Set<Promise<void>>();
  /** The last read group sent or waiting to be (`#grouped`): the next one waits for its answer, up to READ_JOIN_MS. */
  #lastRead: Promise<unknown> = Promise.resolve();
  readonly #stats: WriterQueueStats = {
    turns: 0,
    waitMs: 0,
    heldMs: 0,
    statementsHeld: 0,
    busyRetries: 0,
    readBatches: 0,
    readStatements: 0,
    streamsOpened: 0,
  };

  /** A copy of the counters so far (`WriterQueueStats`). */
  stats(): WriterQueueStats {
    return { ...this.#stats, streamsOpened: this.#streams?.opened ?? 0 };
  }

  #oneWriter<T>(fn: () => Promise<T>): Promise<T> {
    const queued = performance.now();
    const previous = this.#writes;
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    // The next writer waits for the one before it as well as for this one: order is kept
    // even when this one stops waiting.
    this.#writes = Promise.all([previous, mine]);
    return (async () => {
      try {
        // Waiting is bounded like the embedded driver's busy timeout: behind a writer stuck on
        // a server that does not answer, the queue answers 503 instead of growing (docs/reference/errors.md "Errors").
        let timer: NodeJS.Timeout | undefined;
        const turn = await Promise.race([
          previous.then(() => true),
          new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), BUSY_TIMEOUT_MS))),
        ]);
        clearTimeout(timer);
        if (!turn) throw new DatabaseUnavailable(`another write of this instance held the database for ${BUSY_TIMEOUT_MS} ms`);
        const started = performance.now();
        this.#stats.turns++;
        this.#stats.waitMs += started - queued;
        try {
          return await fn();
        } finally {
          this.#stats.heldMs += performance.now() - started;
        }
      } finally {
        release();
      }
    })();
  }

  constructor(url: string, authToken: string | undefined) {
    const local = url.startsWith('file:');
    this.#webSocket = isWebSocketUrl(url);
    this.#connect = () =>
      createRemoteClient({
        url,
        intMode: 'number',
        ...(authToken ? { authToken } : {}),
        ...(local ? { timeout: BUSY_TIMEOUT_MS } : { fetch: boundedFetch }),
      });
    this.#client = this.#connect();
    this.#streams = this.#webSocket ? new StreamPool(url, authToken) : undefined;
    this.#direct = queryable({ execute: (stmt: InStatement) => this.#execute(stmt) });
    this.#groupedWrites = queryable({ execute: (stmt: InStatement) => this.#grouped(stmt, 'write') });
    this.#groupedReads = queryable({ execute: (stmt: InStatement) => this.#grouped(stmt, 'read') });
    this.#ready = local ? this.#client.execute('PRAGMA journal_mode = WAL') : Promise.resolve();
    // A failure surfaces on the first statement that awaits it, not as an unhandled rejection.
    this.#ready.catch(() => undefined);
  }

  /**
   * The WebSocket transport's bound (docs/reference/errors.md "Errors": no hang): `boundedFetch` covers HTTP
   * only, and a socket whose host stopped answering without closing it would hold every call
   * on it for good. A call that outlasts REQUEST_TIMEOUT_MS fails as not answered, and the
   * socket is given up for a new one, so the service recovers once the server answers again.
   */
  #bounded<T>(call: Promise<T>): Promise<T> {
    if (!this.#webSocket) return call;
    const client = this.#client;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        if (this.#client === client) {
          this.#client = this.#connect();
          client.close();
          this.#streams?.reset();
        }
        reject(new NoAnswer());
      }, REQUEST_TIMEOUT_MS);
    });
    return Promise.race([call, timedOut]).finally(() => clearTimeout(timer));
  }

  /** One statement, autocommitted; refused as busy, it is sent again. */
  #execute(stmt: InStatement): Promise<Answer> {
    const streams = this.#streams;
    return whileBusy(() => this.#bounded(streams ? streams.query(stmt) : this.#client.execute(stmt)), isBusy, this.#stats);
  }

  /** `@libsql/client`'s batch (one transaction, one request), on a kept stream on the WebSocket transport. */
  #batch(stmts: InStatement[], mode: 'write' | 'read'): Promise<Answer[]> {
    return this.#bounded(this.#streams ? this.#streams.batch(stmts, mode) : this.#client.batch(stmts, mode));
  }

  // Writes and reads of one event-loop turn go to the server in one batch each (`#grouped`).
  async all<T>(sql: string, args?: readonly SqlValue[]): Promise<T[]> {
    await this.#ready;
    return this.#queryableFor(sql).all<T>(sql, args);
  }

  async get<T>(sql: string, args?: readonly SqlValue[]): Promise<T | undefined> {
    await this.#ready;
    return this.#queryableFor(sql).get<T>(sql, args);
  }

  async run(sql: string, args?: readonly SqlValue[]): Promise<RunResult> {
    await this.#ready;
    return this.#queryableFor(sql).run(sql, args);
  }

  /** Anything neither a write nor a SELECT (the migrations' CREATE, a test's DROP) goes alone, as before. */
  #queryableFor(sql: string): Queryable {
    return isWriteStatement(sql) ? this.#groupedWrites : isReadStatement(sql) ? this.#groupedReads : this.#direct;
  }

  /**
   * Group commit (docs/performance.md "On a libSQL server (sqld)"). sqld
   * spends about 1.5 ms of CPU on every stream it opens for this schema, and `@libsql/client`
   * opens one per statement (on the WebSocket transport `StreamPool` keeps a few open
   * instead), where a statement inside a stream costs it about 0.1 ms; and it
   * commits one write at a time. So the standalone statements of one event-loop turn go
   * together: the writes as one batch in one transaction (one stream, one round trip, one
   * commit), sent once their turn in `#oneWriter` comes, so that the writes arriving while
   * earlier ones hold the queue join them; the reads as one read-only batch, sent at the end
   * of the turn without waiting for any write (they see only what is committed), or, while
   * the previous read batch is unanswered, once it is (or READ_JOIN_MS has passed), with the
   * reads that arrived meanwhile. Each statement is answered only once its batch has committed.
   */
  #grouped(stmt: InStatement, mode: 'write' | 'read'): Promise<Answer> {
    let group = mode === 'write' ? this.#writeGroup : this.#readGroup;
    if (!group || group.length >= GROUP_LIMIT) {
      const opened: Member[] = [];
      group = opened;
      const send = async () => {
        // The rest of this turn joins, as do, for writes, those that arrived while earlier writes held the queue.
        await new Promise((resolve) => setImmediate(resolve));
        this.#closeGroup(opened);
        await this.#commitGroup(opened, mode);
      };
      const failed = (error: unknown) => {
        // The writer queue gave up waiting (`#oneWriter`'s bound): nothing of the group was sent.
        // (`#commitGroup` answers every member itself otherwise.)
        this.#closeGroup(opened);
        for (const member of opened) member.reject(error);
      };
      if (mode === 'write') {
        this.#writeGroup = opened;
        this.#oneWriter(send).catch(failed);
      } else {
        this.#readGroup = opened;
        // One read batch in flight at a time, for up to READ_JOIN_MS: the reads arriving while
        // it is answered join the next, so a busy instance sends fewer, larger batches, each one
        // stream fewer for sqld to open (docs/contributors/performance-history.md "One read batch in flight"); a
        // slower batch is not waited for any longer, so it holds up no other read.
        const sent = settledOrAfter(this.#lastRead, READ_JOIN_MS).then(send).catch(failed);
        this.#lastRead = sent;
        this.#readsInFlight.add(sent);
        void sent.finally(() => this.#readsInFlight.delete(sent));
      }
    }
    const members = group;
    return new Promise<Answer>((resolve, reject) => members.push({ stmt, resolve, reject }));
  }

  #closeGroup(group: Member[]): void {
    if (this.#writeGroup === group) this.#writeGroup = undefined;
    if (this.#readGroup === group) this.#readGroup = undefined;
  }

  /**
   * Sends a group and answers each member. A lone statement goes as it always did
   * (autocommit, one round trip). Several go as `@libsql/client`'s batch: BEGIN (IMMEDIATE for
   * writes), the statements, COMMIT, all in one request; the server runs each statement only
   * if the one before it succeeded, and rolls back otherwise. A statement the server refused
   * on its own (a constraint, bad SQL) then fails alone: it is taken out and the others are
   * sent again, so they commit exactly as if it had run by itself and changed nothing.
   * Whatever else fails a batch (the server out of reach or busy past the busy timeout, disk
   * trouble) fails every member; none of them was answered before.
   */
  async #commitGroup(group: Member[], mode: 'write' | 'read'): Promise<void> {
    if (mode === 'write') this.#stats.statementsHeld += group.length;
    else {
      this.#stats.readBatches++;
      this.#stats.readStatements += group.length;
    }
    let pending = group;
    while (pending.length > 0) {
      if (pending.length === 1) {
        const [only] = pending as [Member];
        await this.#execute(only.stmt).then(only.resolve, only.reject);
        return;
      }
      try {
        const results = await whileBusy(
          () =>
            this.#batch(
              pending.map((member) => member.stmt),
              mode,
            ),
          isBusy,
          this.#stats,
        );
        pending.forEach((member, index) => member.resolve(results[index]!));
        return;
      } catch (error) {
        if (mode === 'read' && error instanceof LibsqlError && error.code === 'RESPONSE_TOO_LARGE') {
          // sqld limits a whole batch's answer to 10 MB, where each read alone stays within it
          // (measured: three 4 MB reads fail together, each alone is answered). Reads change
          // nothing, so each is simply sent by itself. A write group cannot reach the limit
          // (GROUP_LIMIT).
          await Promise.all(pending.map((member) => this.#execute(member.stmt).then(member.resolve, member.reject)));
          return;
        }
        const alone = failedAlone(error);
        if (alone === undefined || alone >= pending.length) {
          for (const member of pending) member.reject(error);
          return;
        }
        pending[alone]!.reject(error);
        pending = pending.filter((_, index) => index !== alone);
      }
    }
  }

  /**
   * A write transaction takes the lock with its first statement (the client sends BEGIN
   * IMMEDIATE with it). When the server refuses that one as busy, nothing of the transaction
   * ran: it is begun again, `fn` included (its code before its first statement runs again),
   * as `whileBusy` does for single statements.
   */
  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    await this.#ready;
    let refusedAtBegin = false;
    return this.#oneWriter(() =>
      whileBusy(
        async () => {
          refusedAtBegin = false;
          // Only the client's own calls are classified: what `fn` throws (a DomainError) is its own.
          const tx = await guarded(() => this.#bounded(this.#client.transaction('write')), answeredByServer);
          let first = true;
          const execute = async (stmt: InStatement) => {
            const isFirst = first;
            first = false;
            this.#stats.statementsHeld++;
            try {
              return await this.#bounded(tx.execute(stmt));
            } catch (error) {
              if (isFirst && isBusy(error)) refusedAtBegin = true;
              throw error;
            }
          };
          try {
            const result = await fn(queryable({ execute }));
            await guarded(() => this.#bounded(tx.commit()), answeredByServer);
            return result;
          } catch (error) {
            await this.#bounded(tx.rollback()).catch(() => undefined);
            throw error;
          } finally {
            tx.close();
          }
        },
        () => refusedAtBegin,
        this.#stats,
      ),
    );
  }

  /** `@libsql/client`'s batch: one request that the server runs as one transaction; refused as busy, nothing ran. */
  async batch(statements: readonly Statement[]): Promise<RunResult[]> {
    await this.#ready;
    const results = await guarded(
      () =>
        this.#oneWriter(() => {
          this.#stats.statementsHeld += statements.length;
          return whileBusy(
            () =>
              this.#batch(
                statements.map(({ sql, args }) => statement(sql, args)),
                'write',
              ),
            isBusy,
            this.#stats,
          );
        }),
      answeredByServer,
    );
    return results.map((result) => ({ changes: result.rowsAffected }));
  }

  script(sql: string): Promise<void> {
    // Refused as busy (another instance migrating): nothing ran, so it is run again once the lock is free.
    return guarded(() => whileBusy(() => this.#script(sql)), answeredByServer);
  }

  async #script(sql: string): Promise<void> {
    await this.#ready;
    const tx = await this.#bounded(this.#client.transaction('write'));
    try {
      await this.#bounded(tx.executeMultiple(sql));
      await this.#bounded(tx.commit());
    } finally {
      tx.close();
    }
  }

  async connectionSettings(): Promise<ConnectionSettings[]> {
    await this.#ready;
    const journal = await this.#client.execute('PRAGMA journal_mode');
    const busy = await this.#client.execute('PRAGMA busy_timeout');
    const fk = await this.#client.execute('PRAGMA foreign_keys');
    return [
      {
        journalMode: String(journal.rows[0]?.[0] ?? ''),
        busyTimeoutMs: Number(busy.rows[0]?.[0] ?? 0),
        foreignKeys: Number(fk.rows[0]?.[0] ?? 0) === 1,
      },
    ];
  }

  /** Closes once the statements already issued are answered (each is bounded, docs/reference/errors.md "Errors"), the open groups' included. */
  async close(): Promise<void> {
    while (this.#writeGroup || this.#readsInFlight.size > 0) await Promise.all([this.#writes, ...this.#readsInFlight]);
    await this.#writes;
    this.#client.close();
    this.#streams?.close();
  }
}

import { createClient, LibsqlError, type Client, type InStatement, type ResultSet, type Transaction } from '@libsql/client';
import { createClient as createWebSocketClient } from '@libsql/client/ws';
import type { ConnectionSettings, Db, Queryable, RunResult, SqlValue, Statement } from './driver.js';

function rows<T>(result: ResultSet): T[] {
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

function queryable(target: Pick<Client | Transaction, 'execute'>): Queryable {
  return {
    all: async <T>(sql: string, args?: readonly SqlValue[]) => rows<T>(await target.execute(statement(sql, args))),
    get: async <T>(sql: string, args?: readonly SqlValue[]) => rows<T>(await target.execute(statement(sql, args)))[0],
    run: async (sql: string, args?: readonly SqlValue[]): Promise<RunResult> => {
      const result = await target.execute(statement(sql, args));
      return { changes: result.rowsAffected };
    },
  };
}

/** Same as the embedded driver: a writer waits this long for a lock before SQLITE_BUSY. */
const BUSY_TIMEOUT_MS = 5000;

function isBusy(error: unknown): boolean {
  return error instanceof LibsqlError && (error.code === 'SQLITE_BUSY' || error.code.startsWith('SQLITE_BUSY_'));
}

/**
 * Runs `attempt` again while the server answers SQLITE_BUSY, for up to BUSY_TIMEOUT_MS, with a
 * short jittered pause between tries. sqld queues a writer behind another connection's
 * transaction only for a while; under concurrent writers (measured: 32 manifests at once from
 * one instance) it answers SQLITE_BUSY instead, where the embedded driver's busy timeout would
 * have waited. A busy statement or transaction has changed nothing, so trying it again is safe.
 */
async function whileBusy<T>(attempt: () => Promise<T>): Promise<T> {
  const deadline = Date.now() + BUSY_TIMEOUT_MS;
  for (let tries = 0; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (!isBusy(error) || Date.now() >= deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, Math.min(50, 2 ** tries) * (0.5 + Math.random())));
    }
  }
}

/**
 * Which transport a URL takes. `libsql://` (and `ws://`, `wss://`) go over the Hrana WebSocket
 * transport: one socket, each statement a frame on it, measured about 4× faster per statement
 * than Hrana over HTTP, where each statement is its own HTTP request (docs/performance.md "On a
 * libSQL server (sqld)"). `@libsql/client`'s Node entry would send `libsql://` over HTTP, so
 * the WebSocket client is chosen here. `http://` and `https://` keep HTTP, for a server
 * reachable only through a proxy that does not pass WebSocket upgrades.
 */
function createRemoteClient(config: Parameters<typeof createClient>[0]): Client {
  return /^(libsql|wss?):/i.test(config.url) ? createWebSocketClient(config) : createClient(config);
}

/**
 * A libSQL server (sqld, Turso) reached over `libsql://`, `ws://`, `wss://`, `http://` or
 * `https://`. The server owns durability and WAL; each interactive transaction is its own
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
  readonly #client: Client;
  readonly #direct: Queryable;
  readonly #ready: Promise<unknown>;

  constructor(url: string, authToken: string | undefined) {
    const local = url.startsWith('file:');
    this.#client = createRemoteClient({
      url,
      intMode: 'number',
      ...(authToken ? { authToken } : {}),
      ...(local ? { timeout: BUSY_TIMEOUT_MS } : {}),
    });
    this.#direct = queryable(this.#client);
    this.#ready = local ? this.#client.execute('PRAGMA journal_mode = WAL') : Promise.resolve();
    // A failure surfaces on the first statement that awaits it, not as an unhandled rejection.
    this.#ready.catch(() => undefined);
  }

  async all<T>(sql: string, args?: readonly SqlValue[]): Promise<T[]> {
    await this.#ready;
    return whileBusy(() => this.#direct.all<T>(sql, args));
  }

  async get<T>(sql: string, args?: readonly SqlValue[]): Promise<T | undefined> {
    await this.#ready;
    return whileBusy(() => this.#direct.get<T>(sql, args));
  }

  async run(sql: string, args?: readonly SqlValue[]): Promise<RunResult> {
    await this.#ready;
    return whileBusy(() => this.#direct.run(sql, args));
  }

  /** A busy transaction is rolled back and `fn` runs again from the start (see `Db.transaction`). */
  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
    await this.#ready;
    return whileBusy(async () => {
      const tx = await this.#client.transaction('write');
      try {
        const result = await fn(queryable(tx));
        await tx.commit();
        return result;
      } catch (error) {
        await tx.rollback().catch(() => undefined);
        throw error;
      } finally {
        tx.close();
      }
    });
  }

  /** `@libsql/client`'s batch: one request that the server runs as one transaction. */
  async batch(statements: readonly Statement[]): Promise<RunResult[]> {
    await this.#ready;
    const results = await whileBusy(() =>
      this.#client.batch(
        statements.map(({ sql, args }) => statement(sql, args)),
        'write',
      ),
    );
    return results.map((result) => ({ changes: result.rowsAffected }));
  }

  async script(sql: string): Promise<void> {
    await this.#ready;
    const tx = await this.#client.transaction('write');
    try {
      await tx.executeMultiple(sql);
      await tx.commit();
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

  async close(): Promise<void> {
    this.#client.close();
  }
}

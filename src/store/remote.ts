import { createClient, type Client, type InStatement, type ResultSet, type Transaction } from '@libsql/client';
import type { ConnectionSettings, Db, Queryable, RunResult, SqlValue } from './driver.js';

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

/**
 * A libSQL server (sqld, Turso) reached over `libsql://`, `http://` or `https://`. The server
 * owns durability and WAL; each interactive transaction is its own server-side stream.
 */
export class RemoteDb implements Db {
  readonly mode = 'remote' as const;
  readonly #client: Client;
  readonly #direct: Queryable;

  constructor(url: string, authToken: string | undefined) {
    this.#client = createClient(authToken ? { url, authToken, intMode: 'number' } : { url, intMode: 'number' });
    this.#direct = queryable(this.#client);
  }

  all<T>(sql: string, args?: readonly SqlValue[]): Promise<T[]> {
    return this.#direct.all<T>(sql, args);
  }

  get<T>(sql: string, args?: readonly SqlValue[]): Promise<T | undefined> {
    return this.#direct.get<T>(sql, args);
  }

  run(sql: string, args?: readonly SqlValue[]): Promise<RunResult> {
    return this.#direct.run(sql, args);
  }

  async transaction<T>(fn: (tx: Queryable) => Promise<T>): Promise<T> {
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
  }

  async script(sql: string): Promise<void> {
    const tx = await this.#client.transaction('write');
    try {
      await tx.executeMultiple(sql);
      await tx.commit();
    } finally {
      tx.close();
    }
  }

  async connectionSettings(): Promise<ConnectionSettings[]> {
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

import * as hrana from '@libsql/hrana-client';
import { LibsqlBatchError, LibsqlError, type InStatement, type ResultSet } from '@libsql/client';
import { expandConfig } from '@libsql/core/config';
import { encodeBaseUrl } from '@libsql/core/uri';

/** What the remote driver reads of an answer: the same fields on both of its paths. */
export type Answer = Pick<ResultSet, 'columns' | 'rows' | 'rowsAffected'>;

/**
 * At most this many streams wait open between calls. The writer queue sends one write batch
 * at a time and one read batch is in flight at a time, mostly: a few cover the overlaps
 * (a lone statement beside a batch, a read group sent after READ_JOIN_MS).
 */
const IDLE_LIMIT = 4;

/**
 * A stream unused for this long is closed rather than used again, so that one a server or a
 * proxy may have dropped after a quiet spell is not the one a request meets.
 */
const IDLE_MS = 10_000;

/**
 * A socket older than this takes no new streams: the next call opens a fresh socket, and the
 * old one closes once its last borrowed stream is given back. `@libsql/client` rotates its
 * socket at the same age, so a connection a proxy dropped without a close is not kept for long.
 */
const SOCKET_AGE_MS = 60_000;

/**
 * The socket URL and token for a `DATABASE_URL`, parsed as `@libsql/client` parses it:
 * `libsql:` means `wss:` (`ws:` with `?tls=0`), and `?authToken=` and `?tls=` are options,
 * not part of the address.
 */
export function socketTarget(url: string, authToken: string | undefined): { url: string; authToken: string | undefined } {
  const config = expandConfig({ url, ...(authToken ? { authToken } : {}) }, false);
  return { url: encodeBaseUrl(config.scheme, config.authority, config.path).toString(), authToken: config.authToken };
}

interface IdleStream {
  stream: hrana.WsStream;
  client: hrana.WsClient;
  since: number;
}

/** `@libsql/client`'s own mapping of Hrana errors (its `mapHranaError`), so that one classification serves both paths. */
function errorCode(error: hrana.ClientError): string {
  if (error instanceof hrana.ResponseError && error.code !== undefined) return error.code;
  if (error instanceof hrana.ProtoError) return 'HRANA_PROTO_ERROR';
  if (error instanceof hrana.ClosedError) return error.cause instanceof hrana.ClientError ? errorCode(error.cause) : 'HRANA_CLOSED_ERROR';
  if (error instanceof hrana.WebSocketError) return 'HRANA_WEBSOCKET_ERROR';
  if (error instanceof hrana.ProtocolVersionError) return 'PROTOCOL_VERSION_ERROR';
  if (error instanceof hrana.InternalError) return 'INTERNAL_ERROR';
  return 'UNKNOWN';
}

function libsqlError(error: unknown): unknown {
  return error instanceof hrana.ClientError ? new LibsqlError(error.message, errorCode(error), undefined, undefined, error) : error;
}

function answer(result: hrana.RowsResult): Answer {
  return { columns: result.columnNames.map((name) => name ?? ''), rows: result.rows, rowsAffected: result.affectedRowCount };
}

function hranaStatement(stmt: InStatement): hrana.InStmt {
  if (typeof stmt === 'string') return stmt;
  return [stmt.sql, (stmt.args ?? []) as hrana.InValue[]];
}

/**
 * Hrana streams on one WebSocket, kept open between calls (docs/contributors/performance-history.md "One stream
 * for many batches"). sqld opens a SQLite connection for every stream and reads the schema
 * into it: 1.1–1.2 ms of its CPU per stream with the service's schema, against 0.1 ms for a
 * three-statement batch on a stream already open (measured). `@libsql/client` opens a stream
 * for every statement and batch; here each call borrows an idle stream, or opens one, and
 * gives it back. A stream is used by one call at a time, so calls never queue behind each
 * other on the server. A call that failed in any way closes its stream: the next one starts
 * on a fresh stream, with no transaction left open.
 */
export class StreamPool {
  readonly #url: string;
  readonly #authToken: string | undefined;
  readonly #socketAgeMs: number;
  #client: hrana.WsClient | undefined;
  #clientOpenedAt = 0;
  /** Streams borrowed and not yet given back, per socket: a retired socket closes at zero. */
  readonly #borrowed = new Map<hrana.WsClient, number>();
  #idle: IdleStream[] = [];
  /** Streams opened so far (`WriterQueueStats.streamsOpened`). */
  opened = 0;

  constructor(url: string, authToken: string | undefined, options: { socketAgeMs?: number } = {}) {
    this.#socketAgeMs = options.socketAgeMs ?? SOCKET_AGE_MS;
    const target = socketTarget(url, authToken);
    this.#url = target.url;
    this.#authToken = target.authToken;
  }

  /** One statement, autocommitted. */
  query(stmt: InStatement): Promise<Answer> {
    return this.#lend(async (stream) => answer(await stream.query(hranaStatement(stmt))));
  }

  /**
   * `@libsql/client`'s batch (its `executeHranaBatch`): BEGIN (IMMEDIATE for writes,
   * READONLY for reads), each statement only if the one before succeeded, COMMIT, and a
   * ROLLBACK unless the COMMIT succeeded; one request. A statement that failed is named by its
   * index (`LibsqlBatchError`), as `@libsql/client` names it.
   */
  batch(stmts: readonly InStatement[], mode: 'write' | 'read'): Promise<Answer[]> {
    return this.#lend(async (stream) => {
      const batch = stream.batch(false);
      const begin = batch.step();
      const begun = begin.run(mode === 'write' ? 'BEGIN IMMEDIATE' : 'BEGIN TRANSACTION READONLY');
      let last = begin;
      const results = stmts.map((stmt) => {
        const step = batch.step().condition(hrana.BatchCond.ok(last));
        last = step;
        return step.query(hranaStatement(stmt));
      });
      const commit = batch.step().condition(hrana.BatchCond.ok(last));
      const committed = commit.run('COMMIT');
      batch
        .step()
        .condition(hrana.BatchCond.not(hrana.BatchCond.ok(commit)))
        .run('ROLLBACK')
        .catch(() => undefined);
      await batch.execute();
      await begun;
      const answers: Answer[] = [];
      for (const [index, result] of results.entries()) {
        const rows = await result.catch((error: unknown) => {
          const mapped = libsqlError(error);
          if (!(mapped instanceof LibsqlError)) throw mapped;
          throw new LibsqlBatchError(mapped.message, index, mapped.code, undefined, undefined, error instanceof Error ? error : undefined);
        });
        if (rows === undefined)
          throw new LibsqlBatchError('Statement in a batch was not executed: the transaction was rolled back', index, 'TRANSACTION_CLOSED');
        answers.push(answer(rows));
      }
      await committed;
      return answers;
    });
  }

  /** Gives up the socket and every stream on it (a call that got no answer); the next call opens a new one. */
  reset(): void {
    this.#client?.close();
    this.#client = undefined;
    this.#idle = [];
  }

  close(): void {
    this.reset();
    for (const client of this.#borrowed.keys()) client.close();
    this.#borrowed.clear();
  }

  async #lend<T>(call: (stream: hrana.WsStream) => Promise<T>): Promise<T> {
    const { stream, client } = this.#take();
    let healthy = false;
    try {
      const result = await call(stream);
      healthy = true;
      return result;
    } catch (error) {
      throw libsqlError(error);
    } finally {
      if (healthy && !stream.closed && client === this.#client && this.#idle.length < IDLE_LIMIT) this.#idle.push({ stream, client, since: Date.now() });
      else stream.close();
      const left = (this.#borrowed.get(client) ?? 1) - 1;
      if (left > 0) this.#borrowed.set(client, left);
      else {
        this.#borrowed.delete(client);
        if (client !== this.#client) client.close();
      }
    }
  }

  #take(): { stream: hrana.WsStream; client: hrana.WsClient } {
    const now = Date.now();
    if (!this.#client || this.#client.closed || now - this.#clientOpenedAt > this.#socketAgeMs) {
      // A failed socket (the server restarted, the network dropped it) took its streams with
      // it; an old one is retired, closing once the streams still out on it come back.
      const old = this.#client;
      if (old && !this.#borrowed.has(old)) old.close();
      for (const idle of this.#idle) idle.stream.close();
      this.#client = hrana.openWs(this.#url, this.#authToken);
      this.#clientOpenedAt = now;
      this.#idle = [];
    }
    const client = this.#client;
    this.#borrowed.set(client, (this.#borrowed.get(client) ?? 0) + 1);
    for (let idle = this.#idle.pop(); idle; idle = this.#idle.pop()) {
      if (!idle.stream.closed && now - idle.since < IDLE_MS) return idle;
      idle.stream.close();
    }
    this.opened++;
    const stream = client.openStream();
    stream.intMode = 'number';
    return { stream, client };
  }
}

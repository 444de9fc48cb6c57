import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import type { Db } from './driver.js';

// Resolves to <package root>/src/store/migrations from both src/store and dist/store, so
// the compiled server reads the same SQL files the tests do.
const MIGRATIONS_DIR = fileURLToPath(new URL('../../src/store/migrations/', import.meta.url));

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function loadMigrations(dir = MIGRATIONS_DIR): Migration[] {
  return fs
    .readdirSync(dir)
    .filter((file) => /^\d{4}_[a-z0-9_]+\.sql$/.test(file))
    .sort()
    .map((file) => ({
      version: Number(file.slice(0, 4)),
      name: file.replace(/\.sql$/, ''),
      sql: fs.readFileSync(`${dir}/${file}`, 'utf8'),
    }));
}

/**
 * Applies every migration not yet recorded, each in its own transaction together with its
 * bookkeeping row, so a crash mid-way leaves the database at a whole version. Migrations
 * are append-only: a released file is never edited, a change is a new file.
 */
export async function migrate(db: Db, migrations = loadMigrations()): Promise<number[]> {
  await db.run('CREATE TABLE IF NOT EXISTS schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)');
  const done = new Set((await db.all<{ version: number }>('SELECT version FROM schema_migrations')).map((r) => r.version));
  const applied: number[] = [];
  for (const migration of migrations) {
    if (done.has(migration.version)) continue;
    try {
      await db.script(
        `${migration.sql}\nINSERT INTO schema_migrations (version, name, applied_at) VALUES (${migration.version}, '${migration.name}', ${Date.now()});`,
      );
    } catch (error) {
      // Another process starting on the same new file may have applied it meanwhile (its
      // transaction held the write lock while ours waited): then the version is recorded.
      if (await db.get('SELECT 1 AS one FROM schema_migrations WHERE version = ?', [migration.version])) continue;
      throw error;
    }
    applied.push(migration.version);
  }
  return applied;
}

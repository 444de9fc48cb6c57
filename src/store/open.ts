import type { Db } from './driver.js';
import { EmbeddedDb, type EmbeddedOptions } from './embedded.js';
import { migrate } from './migrate.js';
import { RemoteDb } from './remote.js';

/** Opens the database named by DATABASE_URL and brings its schema up to date. */
export async function openDb(url: string, authToken?: string, embedded: EmbeddedOptions = {}): Promise<Db> {
  const db = url.startsWith('file:') ? new EmbeddedDb(url.slice('file:'.length), embedded) : new RemoteDb(url, authToken);
  try {
    await migrate(db);
  } catch (error) {
    await db.close();
    throw error;
  }
  return db;
}

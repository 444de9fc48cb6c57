import { afterAll, beforeAll } from 'vitest';
import { openDb } from '../../src/store/open.js';
import { RemoteDb } from '../../src/store/remote.js';
import { startSqld, type TestSqld } from './sqld.js';

/**
 * A fresh sqld for the test file (or `describe`) that calls it, and the service's remote driver
 * on it over WebSocket (what `libsql://` uses): opened before the tests, closed after. Read
 * `.db` inside a hook or a test.
 */
export function useRemoteDb(): { readonly db: RemoteDb; readonly sqldUrl: string } {
  let sqld: TestSqld | undefined;
  let opened: RemoteDb | undefined;
  beforeAll(async () => {
    sqld = await startSqld();
    const db = await openDb(sqld.url.replace(/^http/, 'ws'));
    if (!(db instanceof RemoteDb)) throw new Error('a ws:// URL opens the remote driver');
    opened = db;
  });
  afterAll(async () => {
    await opened?.close();
    await sqld?.stop();
  });
  return {
    /** The sqld's own `http://` address, to open other clients on it. */
    get sqldUrl() {
      if (!sqld) throw new Error('sqld is not started yet: read .sqldUrl inside a hook or a test');
      return sqld.url;
    },
    get db() {
      if (!opened) throw new Error('the remote driver is not open yet: read .db inside a hook or a test');
      return opened;
    },
  };
}

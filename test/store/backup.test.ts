import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import Database from 'libsql';
import { afterAll, describe, expect, it } from 'vitest';
import { signDevelopmentSession } from '../../src/auth/owner.js';
import { client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { builtCli } from '../helpers/built-cli.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * `npm run backup` (docs/operators/backups.md): a copy taken from another process while the service
 * writes, restored by starting the service on it, holds everything the service had
 * acknowledged before the copy began — whether it still sat in the write-ahead log or the
 * checkpointer had already moved it into the database file.
 *
 * Half way through the load a reader on the side holds an old snapshot (as a long export or
 * an earlier backup still running does): no checkpoint can copy past it, so everything
 * written from then on lives only in the log. A copy of the database file alone misses all of
 * it; the backup must not.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const servers: TestServer[] = [];
afterAll(async () => {
  for (const server of servers) await server.close();
});

/** Resolves once `reached()` holds, checked every 10 ms: the test's timeout bounds the wait. */
async function until(reached: () => boolean): Promise<void> {
  while (!reached()) await new Promise((resolve) => setTimeout(resolve, 10));
}
/** At least this many actions acknowledged before the copy, each checked in it. */
const OWED = 20;
/** Each test starts the backup command as its own process, up to three times: slow on a loaded machine. */
const TIMEOUT_MS = 90_000;

/** Runs the command of `npm run backup -- …args` as an operator would: its own process, the service still running. */
function runBackup(args: string[], env: Record<string, string> = {}): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [builtCli('backup'), ...args], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += String(chunk)));
  child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}

/** How far an action had got, as its client was told: queued (201), handed out (`next`), finished (result). */
const RANK: Record<string, number> = { queued: 0, received: 1, succeeded: 2, failed: 2, cancelled: 2, expired: 2, rejected: 2 };

describe('npm run backup: a consistent copy of a running service', () => {
  it(
    'restores every action acknowledged before the backup began, at least as far as it had got',
    async () => {
      const server = await startTestServer({ env: { DEVICE_QUEUE_PER_PRINCIPAL: '100000', WORKSPACE_MAX_QUEUED_ACTIONS: '100000' } });
      servers.push(server);
      const api = client(server.url);
      const owner = await server.ownerToken('backup-owner');
      const agent = await createAgent(api, owner);
      const lamp = await attachDevice(api, owner);
      await grant(api, owner, agent.principal, lamp.id, ['set_brightness']);

      // Each action's acknowledgements, as (rank, time told): what the clients could rely on.
      const told = new Map<string, { rank: number; at: number }[]>();
      const tell = (id: string, rank: number) => told.set(id, [...(told.get(id) ?? []), { rank, at: Date.now() }]);
      let writing = true;
      const agents = Array.from({ length: 4 }, async () => {
        while (writing) {
          const res = await api.post(`/v1/devices/${lamp.id}/actions`, {
            token: agent.token,
            body: { capability: 'set_brightness', arguments: { level: 50 }, ttlSeconds: 300 },
          });
          expect(res.status, JSON.stringify(res.body)).toBe(201);
          tell(res.body.data.id, RANK.queued!);
        }
      });
      // The device finishes two commands of three and leaves the third `received`.
      const device = (async () => {
        let handed = 0;
        while (writing) {
          const res = await api.post(`/v1/device/${lamp.id}/next`, { token: lamp.token, headers: { 'x-service-workspace': lamp.workspace } });
          expect(res.status).toBe(200);
          const command = res.body.data;
          if (!command) continue;
          tell(command.id, RANK.received!);
          if (++handed % 3 === 0) continue;
          const result = await api.post(`/v1/device/${lamp.id}/result`, { token: lamp.token, body: { actionId: command.id, ok: true, result: { level: 50 } } });
          expect(result.status, JSON.stringify(result.body)).toBe(200);
          tell(command.id, RANK.succeeded!);
        }
      })();

      // The clients' loops end only with `writing`; a failed request in one ends the waits below.
      let failure: unknown;
      Promise.all([...agents, device]).catch((error: unknown) => (failure = error ?? new Error('a client failed')));
      const reached = async (state: () => boolean) => {
        await until(() => failure !== undefined || state());
        if (failure !== undefined) throw failure;
      };

      // Enough acknowledged before the copy to check it by, of each rank, however slowly the
      // machine runs: then a reader pins the log while more writes land after its snapshot.
      await reached(() => {
        const ranks = [...told.values()].map((acks) => Math.max(...acks.map((t) => t.rank)));
        return ranks.length > OWED && ranks.includes(RANK.received!) && ranks.includes(RANK.succeeded!);
      });
      const reader = new Database(server.config.databaseUrl.slice('file:'.length));
      reader.exec('BEGIN');
      reader.prepare('SELECT COUNT(*) FROM schema_migrations').all();
      const pinned = Date.now();
      await reached(() => [...told.values()].flat().filter((t) => t.at > pinned).length >= OWED);
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-backup-'));
      const destination = path.join(dir, 'nested', 'service-backup.db');
      const began = Date.now();
      const backup = await runBackup([destination], { DATABASE_URL: server.config.databaseUrl });
      const ended = Date.now();
      await reached(() => [...told.values()].flat().some((t) => t.at > ended));
      writing = false;
      await Promise.all([...agents, device]);
      reader.exec('COMMIT');
      reader.close();

      expect(backup.code, backup.stderr).toBe(0);
      const report = JSON.parse(backup.stdout);
      expect(report).toMatchObject({ destination, schemaVersion: expect.any(Number) });
      expect(report.bytes).toBe(fs.statSync(destination).size);
      expect(fs.readdirSync(path.dirname(destination))).toEqual(['service-backup.db']);
      // The copy was taken under load: the service acknowledged writes while it ran.
      const duringBackup = [...told.values()].flat().filter((t) => t.at >= began && t.at <= ended);
      expect(duringBackup.length).toBeGreaterThan(0);

      // Restore: the service started on the copy, as docs/operators/backups.md says.
      const restoredDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-restored-'));
      fs.copyFileSync(destination, path.join(restoredDir, 'service.db'));
      const restored = await startTestServer({ dir: restoredDir });
      servers.push(restored);
      const restoredApi = client(restored.url);
      const exported = await restoredApi.get('/v1/actions/export', { token: await restored.ownerToken('backup-owner') });
      expect(exported.status).toBe(200);
      const found = new Map<string, string>(exported.body.data.actions.map((a: { id: string; status: string }) => [a.id, a.status]));

      const owed = [...told].flatMap(([id, acks]) => {
        const before = acks.filter((t) => t.at < began);
        return before.length ? [{ id, rank: Math.max(...before.map((t) => t.rank)) }] : [];
      });
      expect(owed.length).toBeGreaterThan(OWED);
      const missing = owed.filter(({ id }) => !found.has(id));
      const behind = owed.filter(({ id, rank }) => found.has(id) && RANK[found.get(id)!]! < rank);
      expect({ missing: missing.length, behind: behind.length }).toEqual({ missing: 0, behind: 0 });
      expect(owed.filter(({ rank }) => rank === RANK.received).length).toBeGreaterThan(0);
      expect(owed.filter(({ rank }) => rank === RANK.succeeded).length).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );

  it(
    'writes a copy only its owner can read, which forgets the key of the event ids shown before it',
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-backup-'));
      const source = await startTestServer();
      servers.push(source);
      const api = client(source.url);
      const owner = await source.ownerToken('backup-keys');
      const lamp = await attachDevice(api, owner);
      // An event in the journal, and the key its shown id is encrypted with.
      await grant(api, owner, 'agent:backup-keys', lamp.id, ['set_power']);
      await source.service.db.run("INSERT OR IGNORE INTO service_keys (name, secret, created_at) VALUES ('event-ids', ?, 1)", ['00'.repeat(32)]);

      const destination = path.join(dir, 'copy.db');
      const backup = await runBackup([destination], { DATABASE_URL: source.config.databaseUrl });
      expect(backup.code, backup.stderr).toBe(0);
      expect(fs.statSync(destination).mode & 0o777).toBe(0o600);
      const copy = new Database(destination);
      try {
        expect(copy.prepare("SELECT count(*) AS n FROM service_keys WHERE name = 'event-ids'").get()).toMatchObject({ n: 0 });
        expect(copy.prepare('SELECT last_id FROM legacy_event_ids').get()).toMatchObject({ last_id: 0 });
        expect((copy.prepare('SELECT count(*) AS n FROM workspace_events').get() as { n: number }).n).toBeGreaterThan(0);
      } finally {
        copy.close();
      }
      expect((await source.service.db.get<{ n: number }>("SELECT count(*) AS n FROM service_keys WHERE name = 'event-ids'"))!.n).toBe(1);
    },
    TIMEOUT_MS,
  );

  it(
    'never overwrites an existing file, and sends a libSQL server to its own tools',
    async () => {
      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-backup-'));
      const source = await startTestServer();
      servers.push(source);
      const existing = path.join(dir, 'taken.db');
      fs.writeFileSync(existing, 'keep me');

      const refused = await runBackup([existing], { DATABASE_URL: source.config.databaseUrl });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toContain('already exists');
      expect(fs.readFileSync(existing, 'utf8')).toBe('keep me');

      const remote = await runBackup([path.join(dir, 'remote.db')], { DATABASE_URL: 'http://user:secret@127.0.0.1:1' });
      expect(remote.code).toBe(1);
      expect(remote.stderr).toContain('docs/operators/backups.md');
      expect(remote.stderr).not.toContain('secret');

      const nothing = await runBackup([path.join(dir, 'none.db')], { DATABASE_URL: `file:${path.join(dir, 'missing.db')}` });
      expect(nothing.code).toBe(1);
      expect(nothing.stderr).toContain('no database at');
      expect(fs.existsSync(path.join(dir, 'missing.db'))).toBe(false);
    },
    TIMEOUT_MS,
  );

  it(
    'copies the development signing key beside the backup, so owners stay signed in after a restore',
    async () => {
      const DEVELOPMENT = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };
      const source = await startTestServer({ env: DEVELOPMENT });
      servers.push(source);
      const session = await signDevelopmentSession(source.config, 'rhea');
      const lamp = await attachDevice(
        client(() => source.url),
        session,
      );
      const key = path.join(source.dir, 'development-identity-provider.jwk.json');

      const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-backup-'));
      const destination = path.join(dir, 'service-backup.db');
      const taken = await runBackup([destination], { DATABASE_URL: source.config.databaseUrl });
      expect(taken.code, taken.stderr).toBe(0);
      const keyCopy = `${destination}.development-identity-provider.jwk.json`;
      expect(JSON.parse(taken.stdout)).toMatchObject({ destination, developmentKey: keyCopy });
      expect(fs.readFileSync(keyCopy, 'utf8')).toBe(fs.readFileSync(key, 'utf8'));
      expect(fs.statSync(keyCopy).mode & 0o777).toBe(0o600);

      // Restored into a new data folder as docs/operators/backups.md says: the database, and the key beside it.
      const restore = async (withKey: boolean) => {
        const folder = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-restore-'));
        fs.copyFileSync(destination, path.join(folder, 'service.db'));
        if (withKey) fs.copyFileSync(keyCopy, path.join(folder, 'development-identity-provider.jwk.json'));
        const restored = await startTestServer({ dir: folder, env: DEVELOPMENT });
        servers.push(restored);
        return client(() => restored.url).get('/v1/devices', { token: session });
      };
      const kept = await restore(true);
      expect(kept.status).toBe(200);
      expect(kept.body.data.map((device: { id: string }) => device.id)).toEqual([lamp.id]);
      // Without the key the restored service makes a new one, and the session no longer verifies.
      expect((await restore(false)).status).toBe(401);
    },
    TIMEOUT_MS,
  );
});

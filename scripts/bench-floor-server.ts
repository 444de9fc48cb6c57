/**
 * The floor of `npm run bench` (scripts/bench.ts): what this machine can do at best for one
 * action round trip, measured in the same run as the service. A bare `node:http` server, no
 * framework, no validation library, no MCP, doing only what the contract makes irreducible:
 *
 *   POST /act/{device}     agent: token lookup by SHA-256, INSERT the action (committed),
 *                          wake the device's waiting `next`, answer once the result is in
 *   POST /next/{device}    device: token lookup, claim the oldest queued action in one guarded
 *                          UPDATE … RETURNING (committed), or wait until one is queued
 *   POST /result/{device}  device: token lookup, complete it in one guarded UPDATE (committed)
 *   POST /state/{device}   device: token lookup, one last-known value upserted (committed): the
 *                          floor of a state report (scripts/bench-state.ts)
 *
 * Three authenticated JSON POSTs and three durable writes to a libSQL file in WAL mode with
 * synchronous=NORMAL, the service's own settings. It also serves GET /healthz and
 * GET /bytes/{n} (n bytes from memory) so a large answer can be compared with its own
 * round trip. Not a second implementation of the service: a measuring device, nothing else
 * uses it.
 */
import { hash, randomBytes, randomUUID } from 'node:crypto';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import fs from 'node:fs';
import Database from 'libsql';

const devices = Number(process.env.FLOOR_DEVICES ?? '100');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-floor-'));
const db = new Database(path.join(dir, 'floor.db'));
db.pragma('journal_mode = WAL');
db.pragma('synchronous = NORMAL');
db.exec(`
  CREATE TABLE tokens (hash TEXT PRIMARY KEY, kind TEXT NOT NULL, device_id TEXT);
  CREATE TABLE actions (
    id TEXT PRIMARY KEY, device_id TEXT NOT NULL, status TEXT NOT NULL, arguments TEXT NOT NULL,
    result TEXT, created_at INTEGER NOT NULL, dispatched_at INTEGER, completed_at INTEGER
  );
  CREATE INDEX actions_queued ON actions (device_id, created_at) WHERE status = 'queued';
  CREATE TABLE state (device_id TEXT NOT NULL, capability TEXT NOT NULL, value TEXT NOT NULL, reported_at INTEGER NOT NULL, PRIMARY KEY (device_id, capability)) WITHOUT ROWID;
`);

// The cheapest SHA-256 of a string Node has, as the service's own token hash (src/domain/tokens.ts).
const sha256 = (token: string) => hash('sha256', token, 'hex');
const insertToken = db.prepare('INSERT INTO tokens (hash, kind, device_id) VALUES (?, ?, ?)');
const agentToken = randomBytes(32).toString('base64url');
insertToken.run(sha256(agentToken), 'agent', null);
const fleet = Array.from({ length: devices }, () => ({ id: randomUUID(), token: randomBytes(32).toString('base64url') }));
for (const device of fleet) insertToken.run(sha256(device.token), 'device', device.id);

const findToken = db.prepare('SELECT kind, device_id AS deviceId FROM tokens WHERE hash = ?');
const insertAction = db.prepare("INSERT INTO actions (id, device_id, status, arguments, created_at) VALUES (?, ?, 'queued', ?, ?)");
const claim = db.prepare(
  "UPDATE actions SET status = 'received', dispatched_at = ?1 WHERE id = (SELECT id FROM actions WHERE device_id = ?2 AND status = 'queued' ORDER BY created_at LIMIT 1) AND status = 'queued' RETURNING id, arguments",
);
const upsertState = db.prepare(
  'INSERT INTO state (device_id, capability, value, reported_at) VALUES (?, ?, ?, ?) ON CONFLICT (device_id, capability) DO UPDATE SET value = excluded.value, reported_at = excluded.reported_at',
);
const complete = db.prepare("UPDATE actions SET status = 'succeeded', result = ?, completed_at = ? WHERE id = ? AND device_id = ? AND status = 'received'");

/** Agents waiting for their action's result, and devices waiting for work. */
const results = new Map<string, (result: string) => void>();
const idle = new Map<string, () => void>();

function authorised(req: http.IncomingMessage, kind: 'agent' | 'device', deviceId: string): boolean {
  const header = req.headers.authorization ?? '';
  if (!header.startsWith('Bearer ')) return false;
  const row = findToken.get(sha256(header.slice(7))) as { kind: string; deviceId: string | null } | undefined;
  return row !== undefined && row.kind === kind && (kind === 'agent' || row.deviceId === deviceId);
}

function body(req: http.IncomingMessage): Promise<Record<string, unknown>> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      try {
        resolve(chunks.length ? JSON.parse(Buffer.concat(chunks).toString('utf8')) : {});
      } catch (error) {
        reject(error);
      }
    });
    req.on('error', reject);
  });
}

function send(res: http.ServerResponse, status: number, value: unknown): void {
  const text = JSON.stringify(value);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const bytes = new Map<number, Buffer>();

// eslint-disable-next-line @typescript-eslint/no-misused-promises -- the handler catches every error itself
const server = http.createServer(async (req, res) => {
  try {
    const [, route, param] = (req.url ?? '').split('/');
    if (req.method === 'GET' && route === 'healthz') return send(res, 200, { status: 'ok' });
    if (req.method === 'GET' && route === 'bytes') {
      const n = Number(param);
      if (!bytes.has(n)) bytes.set(n, Buffer.alloc(n, 'a'));
      res.writeHead(200, { 'content-type': 'application/octet-stream', 'content-length': n });
      return res.end(bytes.get(n));
    }
    const deviceId = param ?? '';
    if (req.method !== 'POST') return send(res, 404, { error: 'not found' });
    if (route === 'act') {
      if (!authorised(req, 'agent', deviceId)) return send(res, 401, { error: 'unauthorized' });
      const { arguments: args } = await body(req);
      const id = randomUUID();
      insertAction.run(id, deviceId, JSON.stringify(args ?? {}), Date.now());
      const result = new Promise<string>((resolve) => results.set(id, resolve));
      idle.get(deviceId)?.();
      return send(res, 200, { id, status: 'succeeded', result: JSON.parse(await result) });
    }
    if (route === 'next') {
      if (!authorised(req, 'device', deviceId)) return send(res, 401, { error: 'unauthorized' });
      await body(req);
      for (;;) {
        const row = claim.get(Date.now(), deviceId) as { id: string; arguments: string } | undefined;
        if (row) return send(res, 200, { id: row.id, args: JSON.parse(row.arguments) });
        await new Promise<void>((resolve) => idle.set(deviceId, resolve));
        idle.delete(deviceId);
      }
    }
    if (route === 'result') {
      if (!authorised(req, 'device', deviceId)) return send(res, 401, { error: 'unauthorized' });
      const report = await body(req);
      const id = String(report.actionId);
      const changed = complete.run(JSON.stringify(report.result ?? null), Date.now(), id, deviceId).changes;
      if (changed === 1) results.get(id)?.(JSON.stringify(report.result ?? null));
      results.delete(id);
      return send(res, changed === 1 ? 200 : 409, { ok: changed === 1 });
    }
    if (route === 'state') {
      if (!authorised(req, 'device', deviceId)) return send(res, 401, { error: 'unauthorized' });
      const { values } = await body(req);
      const entries = Object.entries((values ?? {}) as Record<string, unknown>);
      const now = Date.now();
      for (const [capability, value] of entries) upsertState.run(deviceId, capability, JSON.stringify(value), now);
      return send(res, 200, { data: { accepted: entries.length } });
    }
    send(res, 404, { error: 'not found' });
  } catch (error) {
    send(res, 500, { error: String(error) });
  }
});

server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  const { port } = server.address() as { port: number };
  process.send!({ type: 'ready', url: `http://127.0.0.1:${port}`, pid: process.pid, agentToken, devices: fleet });
});

process.on('message', (message: { type: string }) => {
  if (message.type === 'cpu') process.send!({ type: 'cpu', usage: process.cpuUsage() });
  if (message.type === 'stop') {
    server.closeAllConnections();
    server.close(() => {
      db.close();
      fs.rmSync(dir, { recursive: true, force: true });
      process.exit(0);
    });
  }
});

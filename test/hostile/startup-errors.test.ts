import { spawn } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SERVICE_MAIN } from '../helpers/entry-point.js';
import { TEST_AUDIENCE, TEST_ISSUER } from '../helpers/server.js';

/**
 * docs/operators/deploy.md "Deploy" (start-up failures): every start that fails for a reason an operator can fix
 * prints one line on stderr naming the cause and the variable to change, writes nothing that
 * looks like a start on stdout, and exits 1; a stack trace only with LOG_LEVEL=debug. Each
 * case runs the real entry point, the build of `src/main.ts`, in its own process.
 */

const root = path.resolve(import.meta.dirname, '../..');
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-startup-'));
let taken: net.Server;
let takenPort: number;
let idp: http.Server;
let idpUrl: string;
let closedPort: number;

function run(env: Record<string, string>): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const child = spawn(process.execPath, [SERVICE_MAIN], {
    cwd: root,
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', DATABASE_URL: `file:${path.join(dir, 'ok.db')}`, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += String(chunk)));
  child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
  // A start that did not fail is stopped once it says it listens: the test then fails on the exit code.
  child.stdout.on('data', () => stdout.includes('"listening"') && child.kill('SIGTERM'));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}

const external = (extra: Record<string, string>) => ({ OWNER_ISSUER: TEST_ISSUER, OWNER_AUDIENCE: TEST_AUDIENCE, ...extra });

beforeAll(async () => {
  taken = net.createServer();
  await new Promise<void>((resolve) => taken.listen(0, '127.0.0.1', resolve));
  takenPort = (taken.address() as AddressInfo).port;
  const closed = net.createServer();
  await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
  closedPort = (closed.address() as AddressInfo).port;
  await new Promise((resolve) => closed.close(resolve));
  // An identity provider whose key set URL answers, but not with a key set.
  idp = http.createServer((req, res) => {
    if (req.url === '/html') res.writeHead(200, { 'content-type': 'text/html' }).end('<html>login</html>');
    else if (req.url === '/empty') res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys": []}');
    else res.writeHead(404).end('not found');
  });
  await new Promise<void>((resolve) => idp.listen(0, '127.0.0.1', resolve));
  idpUrl = `http://127.0.0.1:${(idp.address() as AddressInfo).port}`;
  fs.writeFileSync(path.join(dir, 'not-json.json'), 'keys: none');
  fs.writeFileSync(path.join(dir, 'not-jwks.json'), JSON.stringify({ issuer: 'x' }));
  fs.writeFileSync(path.join(dir, 'a-file'), 'not a folder');
  fs.writeFileSync(path.join(dir, 'no-keys.json'), JSON.stringify({ keys: [] }));
  // A shared secret and an encryption key: a key set, but none of its keys can check an owner session's signature.
  fs.writeFileSync(
    path.join(dir, 'no-signing-key.json'),
    JSON.stringify({ keys: [{ kty: 'oct', k: 'c2VjcmV0', alg: 'HS256' }, { kty: 'RSA', use: 'enc', n: 'AQAB', e: 'AQAB' }, { kty: 'XX' }] }),
  );
});
afterAll(async () => {
  await new Promise((resolve) => taken.close(resolve));
  await new Promise((resolve) => idp.close(resolve));
});

// One process at a time, each with room to start on a loaded machine.
describe('a start that cannot succeed', { timeout: 60_000 }, () => {
  const cases: [string, string, () => Record<string, string>][] = [
    ['a bad variable', 'PORT', () => ({ PORT: 'eighty' })],
    ['a bad LOG_LEVEL', 'LOG_LEVEL', () => ({ LOG_LEVEL: 'loud' })],
    ['the port in use', 'PORT', () => ({ PORT: String(takenPort) })],
    ['a HOST that is not an address of this machine', 'HOST', () => ({ HOST: '203.0.113.7' })],
    ['a database folder that cannot be created', 'DATABASE_URL', () => ({ DATABASE_URL: `file:${path.join(dir, 'a-file', 'service.db')}` })],
    ['an unreachable database server', 'DATABASE_URL', () => ({ DATABASE_URL: `http://127.0.0.1:${closedPort}` })],
    ['a JWKS file that does not exist', 'OWNER_JWKS_FILE', () => external({ OWNER_JWKS_FILE: path.join(dir, 'missing.json') })],
    ['a JWKS file that is not JSON', 'OWNER_JWKS_FILE', () => external({ OWNER_JWKS_FILE: path.join(dir, 'not-json.json') })],
    ['a JWKS file that is JSON but not a key set', 'OWNER_JWKS_FILE', () => external({ OWNER_JWKS_FILE: path.join(dir, 'not-jwks.json') })],
    ['a JWKS file with no keys', 'OWNER_JWKS_FILE', () => external({ OWNER_JWKS_FILE: path.join(dir, 'no-keys.json') })],
    ['a JWKS file with no key that can verify a signature', 'OWNER_JWKS_FILE', () => external({ OWNER_JWKS_FILE: path.join(dir, 'no-signing-key.json') })],
    ['a JWKS URL that answers with no keys', 'OWNER_JWKS_URL', () => external({ OWNER_JWKS_URL: `${idpUrl}/empty` })],
    ['an unreachable JWKS URL', 'OWNER_JWKS_URL', () => external({ OWNER_JWKS_URL: `http://127.0.0.1:${closedPort}/jwks.json` })],
    ['a JWKS URL that answers 404', 'OWNER_JWKS_URL', () => external({ OWNER_JWKS_URL: `${idpUrl}/jwks.json` })],
    ['a JWKS URL that answers with a page', 'OWNER_JWKS_URL', () => external({ OWNER_JWKS_URL: `${idpUrl}/html` })],
  ];

  it.each(cases)('%s: one stderr line naming %s, no stack, exit 1', async (_name, variable, env) => {
    const result = await run(env());
    expect(result.code).toBe(1);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines, result.stderr).toHaveLength(1);
    expect(lines[0]).toMatch(/^cannot start: /);
    expect(lines[0]).toContain(variable);
    expect(result.stderr).not.toMatch(/\n\s+at /);
    expect(result.stdout).not.toContain('listening');
  });

  it('adds the stack trace with LOG_LEVEL=debug', async () => {
    const result = await run({ LOG_LEVEL: 'debug', PORT: String(takenPort) });
    expect(result.code).toBe(1);
    const [first, ...rest] = result.stderr.trimEnd().split('\n');
    expect(first).toMatch(/^cannot start: port \d+ is already in use/);
    expect(first).toContain('PORT');
    expect(rest.join('\n')).toMatch(/^\s+at /m);
  });

  it('never shows the credentials of a database URL', async () => {
    const result = await run({ DATABASE_URL: `http://user:hunter2@127.0.0.1:${closedPort}?authToken=sekrit`, DATABASE_AUTH_TOKEN: 'sekrit-too' });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('DATABASE_URL');
    for (const secret of ['hunter2', 'sekrit']) expect(result.stderr).not.toContain(secret);
  });
});

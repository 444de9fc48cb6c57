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
    // With the one-time code, so that the start gets as far as listening.
    ['a HOST that is not an address of this machine', 'HOST', () => ({ HOST: '203.0.113.7', DEVELOPMENT_SIGN_IN: 'code' })],
    ['the development sign-in in production', 'OWNER_JWKS_URL', () => ({ NODE_ENV: 'production' })],
    ['the development sign-in on every interface', 'OWNER_JWKS_URL', () => ({ HOST: '0.0.0.0' })],
    ['the development sign-in on every IPv6 interface', 'OWNER_JWKS_URL', () => ({ HOST: '::' })],
    ['the development sign-in on a LAN address', 'OWNER_JWKS_URL', () => ({ HOST: '192.168.1.20' })],
    [
      'a one-time code asked of an external identity provider',
      'DEVELOPMENT_SIGN_IN',
      () => external({ OWNER_JWKS_FILE: path.join(dir, 'no-keys.json'), DEVELOPMENT_SIGN_IN: 'code' }),
    ],
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

/**
 * docs/operators/identity-provider.md "Where the development sign-in is allowed": the development
 * sign-in lets whoever opens it choose any owner, so it is never served to others without a
 * one-time code from the log.
 */
describe('the development sign-in is never served to others without a code', { timeout: 60_000 }, () => {
  it('refuses production without an identity provider in one line that says what to set', async () => {
    const result = await run({ NODE_ENV: 'production', DATABASE_URL: `file:${path.join(dir, 'refused.db')}` });
    expect(result.code).toBe(1);
    expect(result.stderr.trimEnd().split('\n')).toHaveLength(1);
    for (const setting of ['NODE_ENV=production', 'OWNER_JWKS_URL', 'OWNER_JWKS_FILE', 'OWNER_ISSUER', 'OWNER_AUDIENCE', 'DEVELOPMENT_SIGN_IN=code']) {
      expect(result.stderr).toContain(setting);
    }
    // Refused before the database is opened: nothing was written.
    expect(fs.existsSync(path.join(dir, 'refused.db'))).toBe(false);
  });

  it('names the address when HOST is beyond loopback', async () => {
    const result = await run({ HOST: '0.0.0.0' });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain('with HOST=0.0.0.0 the development sign-in would let anyone who reaches the service sign in as any owner');
  });

  it('starts in production with DEVELOPMENT_SIGN_IN=code, printing the one-time code before it listens', async () => {
    const result = await run({ NODE_ENV: 'production', DEVELOPMENT_SIGN_IN: 'code' });
    // Stopped once it listens (by a signal that may come before its handler is installed): the exit code says nothing.
    expect(result.stderr).toBe('');
    const lines = result.stdout
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line) as Record<string, unknown>);
    const codeAt = lines.findIndex((line) => line.msg === 'development sign-in code');
    expect(codeAt).toBeGreaterThanOrEqual(0);
    expect(codeAt).toBeLessThan(lines.findIndex((line) => line.msg === 'listening'));
    const line = lines[codeAt]!;
    expect(line.level).toBe('warn');
    expect(line.code).toMatch(/^[0-9a-z]{5}(-[0-9a-z]{5}){3}$/);
    expect(line.signIn).toMatch(new RegExp(`/console/sign-in\\?code=${String(line.code)}$`));
  });

  it('starts in production with an identity provider, and prints no code', async () => {
    const identity = fs.mkdtempSync(path.join(dir, 'idp-'));
    const jwks = path.join(identity, 'jwks.json');
    fs.writeFileSync(
      jwks,
      JSON.stringify({
        keys: [
          {
            kty: 'EC',
            crv: 'P-256',
            x: 'f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU',
            y: 'x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0',
            use: 'sig',
            alg: 'ES256',
          },
        ],
      }),
    );
    const result = await run(external({ NODE_ENV: 'production', OWNER_JWKS_FILE: jwks }));
    expect(result.stderr).toBe('');
    expect(result.stdout).toContain('"msg":"listening"');
    expect(result.stdout).not.toContain('development sign-in code');
  });
});

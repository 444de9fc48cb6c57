import { execFile } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { builtCli } from '../helpers/built-cli.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The embedded default's development identity provider (docs/reference/rules.md "Credentials"): with no OWNER_JWKS_*
 * the server creates a signing key in its data folder, and `npm run owner-token` signs owner
 * sessions with it. Both run here as a newcomer would run them.
 */
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');
const KEY_FILE = 'development-identity-provider.jwk.json';

// Empty values count as unset (parseConfig), which switches the test harness's JWKS off.
const DEVELOPMENT_ENV = { OWNER_JWKS_FILE: '', OWNER_ISSUER: '', OWNER_AUDIENCE: '', OWNER_WORKSPACE_CLAIM: '' };

function cliEnv(databaseUrl: string, extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [key, value] of Object.entries(process.env)) if (!key.startsWith('OWNER_')) env[key] = value;
  return { ...env, DATABASE_URL: databaseUrl, ...extra };
}

/** Exactly what docs/getting-started.md tells a newcomer to run. */
async function npmOwnerToken(databaseUrl: string, args: string[]) {
  const { stdout } = await run('npm', ['run', 'owner-token', '--', ...args], { cwd: root, env: cliEnv(databaseUrl) });
  return stdout.trim().split('\n').at(-1)!.trim();
}

/** The same command without npm's and tsx's start-up cost (its build), for the other cases. */
function cli(databaseUrl: string, args: string[], extra: Record<string, string> = {}) {
  return run(process.execPath, [builtCli('owner-token'), ...args], { cwd: root, env: cliEnv(databaseUrl, extra) });
}

async function ownerToken(databaseUrl: string, args: string[]) {
  return { token: (await cli(databaseUrl, args)).stdout.trim() };
}

let databaseUrl: string;

const server = useTestServer({ env: DEVELOPMENT_ENV });
const api = server.api;

beforeAll(async () => {
  databaseUrl = server.config.databaseUrl;
});

describe('development identity provider', () => {
  it('is on when no OWNER_JWKS_* is set, and health says auth is not configured', async () => {
    expect(server.config.owner.mode).toBe('development');
    expect((await api.get('/healthz')).body.authConfigured).toBe(false);
  });

  it('creates its private signing key in the data folder, readable by the owner only', () => {
    const file = path.join(server.dir, KEY_FILE);
    expect(fs.existsSync(file)).toBe(true);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(JSON.parse(fs.readFileSync(file, 'utf8'))).toMatchObject({ kty: 'EC', crv: 'P-256', alg: 'ES256' });
  });

  it('`npm run owner-token -- --sub alice` prints a session the server accepts', async () => {
    const token = await npmOwnerToken(databaseUrl, ['--sub', 'alice']);
    expect(token.split('.')).toHaveLength(3);
    const res = await api.get('/v1/account', { token });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    expect(res.body.data).toMatchObject({ subject: 'alice', workspaceKey: 'alice' });

    const payload = JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString());
    expect(payload.exp - payload.iat).toBe(3600);
  });

  it('gives each subject its own workspace', async () => {
    const [aliceToken, bobToken] = await Promise.all([ownerToken(databaseUrl, ['--sub', 'alice']), ownerToken(databaseUrl, ['--sub', 'bob'])]);
    const alice = await api.get('/v1/account', { token: aliceToken.token });
    const bob = await api.get('/v1/account', { token: bobToken.token });
    expect(bob.body.data.workspaceId).not.toBe(alice.body.data.workspaceId);
  });

  it('prints usage and exits 2 without --sub', async () => {
    await expect(cli(databaseUrl, [])).rejects.toMatchObject({
      code: 2,
      stderr: expect.stringContaining('usage: npm run owner-token -- --sub NAME'),
    });
  });

  it('refuses (exit 1) when an external identity provider is configured', async () => {
    const extra = { OWNER_JWKS_FILE: path.join(server.dir, 'jwks.json'), OWNER_ISSUER: 'https://idp', OWNER_AUDIENCE: 'dfc' };
    await expect(cli(databaseUrl, ['--sub', 'x'], extra)).rejects.toMatchObject({
      code: 1,
      stderr: expect.stringContaining('external identity provider'),
    });
  });

  // docs/operators/identity-provider.md "Where the development sign-in is allowed": whoever can run it can read the key it signs with.
  it('needs no one-time code in any mode: in production and beyond loopback it prints a session the server accepts', async () => {
    const modes: Record<string, string>[] = [{ NODE_ENV: 'production' }, { HOST: '0.0.0.0' }, { NODE_ENV: 'production', DEVELOPMENT_SIGN_IN: 'code' }];
    for (const extra of modes) {
      const token = (await cli(databaseUrl, ['--sub', 'alice'], extra)).stdout.trim();
      expect((await api.get('/v1/account', { token })).status).toBe(200);
    }
  });

  it('signs with the key of its own data folder: a session for another folder is refused', async () => {
    const elsewhere = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-other-idp-'));
    const { token } = await ownerToken(`file:${path.join(elsewhere, 'service.db')}`, ['--sub', 'alice']);
    expect(fs.existsSync(path.join(elsewhere, KEY_FILE))).toBe(true);
    expect((await api.get('/v1/account', { token })).status).toBe(401);
  });
});

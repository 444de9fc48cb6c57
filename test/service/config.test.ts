import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, parseConfig } from '../../src/config.js';
import { SERVICE_MAIN } from '../helpers/entry-point.js';

const root = path.resolve(import.meta.dirname, '../..');

function errorOf(env: Record<string, string>): string {
  try {
    parseConfig(env);
  } catch (error) {
    expect(error).toBeInstanceOf(ConfigError);
    return (error as Error).message;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be refused`);
}

describe('parseConfig defaults', () => {
  it('needs no variable at all: embedded database, development identity provider', () => {
    const config = parseConfig({});
    expect(config).toMatchObject({
      port: 8787,
      host: '127.0.0.1',
      databaseUrl: 'file:./data/service.db',
      databaseAuthToken: undefined,
      dataDir: path.resolve('data'),
      publicBaseUrl: 'http://localhost:8787',
      deviceControlsEnabled: true,
      commit: undefined,
      expirySweepMs: 5000,
      logLevel: 'info',
      owner: { mode: 'development', workspaceClaim: 'sub' },
    });
  });

  it('treats empty values as unset', () => {
    expect(parseConfig({ PORT: '', DATABASE_URL: '', OWNER_JWKS_FILE: '' })).toMatchObject({ port: 8787, owner: { mode: 'development' } });
  });

  it('derives PUBLIC_BASE_URL from PORT and drops a trailing slash from an explicit one', () => {
    expect(parseConfig({ PORT: '9000' }).publicBaseUrl).toBe('http://localhost:9000');
    expect(parseConfig({ PUBLIC_BASE_URL: 'https://dfc.example.com/' }).publicBaseUrl).toBe('https://dfc.example.com');
  });

  it('puts local state next to a file database', () => {
    expect(parseConfig({ DATABASE_URL: 'file:/var/lib/dfc/db.sqlite' }).dataDir).toBe('/var/lib/dfc');
  });

  it('accepts libsql://, ws://, wss://, http:// and https:// database URLs with an auth token', () => {
    for (const url of ['libsql://db-org.turso.io', 'ws://127.0.0.1:8080', 'wss://db.example.com', 'http://127.0.0.1:8080', 'https://db.example.com']) {
      expect(parseConfig({ DATABASE_URL: url, DATABASE_AUTH_TOKEN: 'secret' })).toMatchObject({ databaseUrl: url, databaseAuthToken: 'secret' });
    }
  });

  it('shares nothing through Redis unless REDIS_URL is set, and accepts redis:// and rediss:// with a password', () => {
    expect(parseConfig({}).redisUrl).toBeUndefined();
    for (const url of ['redis://127.0.0.1:6379', 'rediss://:secret@cache.example.com:6380', 'rediss://default:secret@valkey.example.com']) {
      expect(parseConfig({ REDIS_URL: url }).redisUrl).toBe(url);
    }
  });

  it('prefixes Redis keys and the channel with dfc: unless REDIS_KEY_PREFIX names another', () => {
    expect(parseConfig({}).redisKeyPrefix).toBe('dfc:');
    expect(parseConfig({ REDIS_KEY_PREFIX: 'dfc-staging:' }).redisKeyPrefix).toBe('dfc-staging:');
  });

  it('uses an external identity provider when a JWKS is configured', () => {
    const config = parseConfig({
      OWNER_JWKS_URL: 'https://idp.example.com/jwks.json',
      OWNER_ISSUER: 'https://idp.example.com',
      OWNER_AUDIENCE: 'dfc',
      OWNER_WORKSPACE_CLAIM: 'org_id',
    });
    expect(config.owner).toEqual({
      mode: 'external',
      jwksUrl: 'https://idp.example.com/jwks.json',
      issuer: 'https://idp.example.com',
      audience: 'dfc',
      workspaceClaim: 'org_id',
    });
  });

  it.each([
    ['true', true],
    ['1', true],
    ['false', false],
    ['0', false],
  ])('reads DEVICE_CONTROLS_ENABLED=%s as %s', (value, expected) => {
    expect(parseConfig({ DEVICE_CONTROLS_ENABLED: value }).deviceControlsEnabled).toBe(expected);
  });

  it('accepts both ends of the PORT range', () => {
    expect(parseConfig({ PORT: '0' }).port).toBe(0);
    expect(parseConfig({ PORT: '65535' }).port).toBe(65535);
  });
});

describe('parseConfig errors name the variable in one line', () => {
  it.each([
    ['PORT', { PORT: 'eighty' }],
    ['PORT', { PORT: '65536' }],
    ['PORT', { PORT: '-1' }],
    ['PORT', { PORT: '80.5' }],
    ['DATABASE_URL', { DATABASE_URL: 'postgres://localhost/db' }],
    ['DATABASE_URL', { DATABASE_URL: './data/service.db' }],
    ['REDIS_URL', { REDIS_URL: 'http://127.0.0.1:6379' }],
    ['REDIS_URL', { REDIS_URL: '127.0.0.1:6379' }],
    ['REDIS_KEY_PREFIX', { REDIS_KEY_PREFIX: 'with space:' }],
    ['REDIS_KEY_PREFIX', { REDIS_KEY_PREFIX: 'x'.repeat(65) }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'not a url' }],
    ['PUBLIC_BASE_URL', { PUBLIC_BASE_URL: 'ftp://example.com' }],
    ['OWNER_JWKS_URL', { OWNER_JWKS_URL: 'file:///etc/jwks.json', OWNER_ISSUER: 'i', OWNER_AUDIENCE: 'a' }],
    ['OWNER_JWKS_FILE', { OWNER_JWKS_URL: 'https://idp/jwks', OWNER_JWKS_FILE: '/jwks.json', OWNER_ISSUER: 'i', OWNER_AUDIENCE: 'a' }],
    ['OWNER_ISSUER', { OWNER_JWKS_FILE: '/jwks.json', OWNER_AUDIENCE: 'a' }],
    ['OWNER_AUDIENCE', { OWNER_JWKS_URL: 'https://idp/jwks', OWNER_ISSUER: 'i' }],
    ['DEVICE_CONTROLS_ENABLED', { DEVICE_CONTROLS_ENABLED: 'yes' }],
    ['EXPIRY_SWEEP_SECONDS', { EXPIRY_SWEEP_SECONDS: '0' }],
    ['LOG_LEVEL', { LOG_LEVEL: 'verbose' }],
    // Its meaning changed (a total per device became a share per principal): refused, not ignored.
    ['DEVICE_QUEUE_PER_PRINCIPAL', { DEVICE_MAX_QUEUED_ACTIONS: '100' }],
  ])('%s: %j', (variable, env) => {
    const message = errorOf(env);
    expect(message).toContain(variable);
    expect(message).not.toContain('\n');
    expect(message.startsWith('invalid configuration: ')).toBe(true);
  });

  it('never echoes the value of DATABASE_AUTH_TOKEN', () => {
    const message = errorOf({ DATABASE_URL: 'mysql://x', DATABASE_AUTH_TOKEN: 'super-secret-token' });
    expect(message).not.toContain('super-secret-token');
  });
});

describe('WEBHOOK_ALLOW_PRIVATE_HOSTS (docs/operators/security.md "Webhooks to a home network")', () => {
  it('is empty by default', () => {
    expect(parseConfig({}).webhookAllowPrivateHosts).toEqual({ names: [], ranges: [] });
  });

  it('reads host names and IPv4 and IPv6 ranges, a bare address as a range of one', () => {
    const { webhookAllowPrivateHosts } = parseConfig({
      WEBHOOK_ALLOW_PRIVATE_HOSTS: ' NTFY.lan , 127.0.0.0/8,192.168.1.20, fd00::/8, [::1], homeassistant.local.',
    });
    expect(webhookAllowPrivateHosts).toEqual({
      names: ['ntfy.lan', 'homeassistant.local'],
      ranges: [
        { address: '127.0.0.0', prefix: 8, family: 'ipv4' },
        { address: '192.168.1.20', prefix: 32, family: 'ipv4' },
        { address: 'fd00::', prefix: 8, family: 'ipv6' },
        { address: '::1', prefix: 128, family: 'ipv6' },
      ],
    });
  });

  it.each(['10.0.0.0/33', 'fd00::/129', '10.0.0.0/8/8', '10.0.0.0/x', 'ntfy.lan/24', 'http://ntfy.lan', 'ntfy lan', '10.0.0.0/-1'])(
    'refuses %j, naming the entry',
    (entry) => {
      const message = errorOf({ WEBHOOK_ALLOW_PRIVATE_HOSTS: `ntfy.lan,${entry}` });
      expect(message).toContain('WEBHOOK_ALLOW_PRIVATE_HOSTS');
      expect(message).toContain(`"${entry.toLowerCase()}"`);
      expect(message).not.toContain('\n');
    },
  );
});

describe('starting with a bad value', () => {
  it('stops before listening, exit code 1, with one stderr line naming the variable', () => {
    const result = spawnSync(process.execPath, [SERVICE_MAIN], {
      cwd: root,
      env: { PATH: process.env.PATH ?? '', PORT: 'not-a-port' },
      encoding: 'utf8',
      timeout: 15_000,
    });
    expect(result.status).toBe(1);
    const lines = result.stderr.trim().split('\n');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('PORT');
    expect(result.stdout).not.toContain('listening');
  });
});

describe('the development sign-in (docs/operators/identity-provider.md "Where the development sign-in is allowed")', () => {
  const owner = (env: Record<string, string>) => parseConfig(env).owner;

  it('is open without a code on loopback outside production', () => {
    for (const HOST of ['127.0.0.1', '127.0.0.2', '::1', '[::1]', 'localhost', '::ffff:127.0.0.1']) {
      expect(owner({ HOST })).toMatchObject({ mode: 'development', signIn: 'open', exposure: undefined });
    }
    expect(owner({ NODE_ENV: 'development' })).toMatchObject({ exposure: undefined });
  });

  it('is exposed in production or on an address beyond loopback, saying which', () => {
    expect(owner({ NODE_ENV: 'production' })).toMatchObject({ exposure: 'NODE_ENV=production' });
    for (const HOST of ['0.0.0.0', '::', '192.168.1.20', 'raspberrypi.local']) expect(owner({ HOST })).toMatchObject({ exposure: `HOST=${HOST}` });
  });

  it('asks for the one-time code with DEVELOPMENT_SIGN_IN=code, which takes no other value', () => {
    expect(owner({ NODE_ENV: 'production', DEVELOPMENT_SIGN_IN: 'code' })).toMatchObject({ signIn: 'code', exposure: 'NODE_ENV=production' });
    expect(errorOf({ DEVELOPMENT_SIGN_IN: 'allow' })).toMatch(/^invalid configuration: DEVELOPMENT_SIGN_IN /);
  });

  it('refuses DEVELOPMENT_SIGN_IN with an external identity provider', () => {
    expect(errorOf({ DEVELOPMENT_SIGN_IN: 'code', OWNER_JWKS_FILE: '/etc/jwks.json', OWNER_ISSUER: 'https://idp', OWNER_AUDIENCE: 'dfc' })).toContain(
      'DEVELOPMENT_SIGN_IN is for the development identity provider',
    );
  });
});

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey } from 'jose';
import { afterAll, beforeAll } from 'vitest';
import { parseConfig, type Config } from '../../src/config.js';
import type { Clock } from '../../src/domain/context.js';
import { createLogger } from '../../src/logger.js';
import { startService, type RunningService } from '../../src/service.js';
import type { RateLimiter } from '../../src/domain/rate-limits.js';
import type { Db } from '../../src/store/driver.js';
import { client, type Client } from './api.js';

export const TEST_ISSUER = 'https://idp.test.invalid';
export const TEST_AUDIENCE = 'dfc-tests';

export const RELAXED_LIMITS: Record<string, string> = {
  RATE_LIMIT_AGENT_PER_SECOND: '100000',
  RATE_LIMIT_AGENT_BURST: '100000',
  RATE_LIMIT_DEVICE_PER_SECOND: '100000',
  RATE_LIMIT_DEVICE_BURST: '100000',
  RATE_LIMIT_OWNER_PER_SECOND: '100000',
  RATE_LIMIT_OWNER_BURST: '100000',
  AUTH_FAILURES_PER_MINUTE: '100000',
  OAUTH_REGISTRATIONS_PER_HOUR: '100000',
  WORKSPACE_MAX_AGENT_CONNECTIONS: '100000',
  WORKSPACE_MAX_SETUP_TOKENS: '100000',
  WORKSPACE_MAX_GRANTS: '100000',
  WORKSPACE_MAX_OAUTH_CLIENTS: '100000',
  WORKSPACE_MAX_ENROLLMENT_CODES: '100000',
  WORKSPACE_MAX_WEBHOOKS: '100000',
};

export interface TestServer {
  url: string;
  config: Config;
  service: RunningService;
  /** The service's database handle (`service.db`), for tests that look under the API. */
  store: Db;
  /** The clock the service runs on: the one passed in, or the real one. */
  clock: Clock;
  dir: string;
  /** Every log line the server wrote, as text. */
  logs: string[];
  /** Signs an owner session with the test identity provider's key (a real ES256 JWT). */
  ownerToken(subject: string, options?: { workspace?: string; expiresIn?: string; claims?: Record<string, unknown>; notBefore?: string }): Promise<string>;
  /** A key the server does not trust, for forged-token tests. */
  foreignToken(subject: string): Promise<string>;
  close(): Promise<void>;
}

export interface TestServerOptions {
  /** Configuration on top of the test defaults; `DATABASE_URL` here points the service at a libSQL server (`startSqld().url`) instead of its own temp file. */
  env?: Record<string, string>;
  clock?: Clock;
  /** Reuse an existing folder (a restart on the same database). */
  dir?: string;
  /** The service's rate limiter instead of its own (in-memory buckets with smaller bounds, say). */
  rateLimiter?: RateLimiter;
}

async function signer(key: CryptoKey, kid: string) {
  return (subject: string, options: { workspace?: string; expiresIn?: string; claims?: Record<string, unknown>; notBefore?: string } = {}) => {
    const jwt = new SignJWT({ workspace: options.workspace ?? subject, ...options.claims })
      .setProtectedHeader({ alg: 'ES256', kid })
      .setSubject(subject)
      .setIssuer(TEST_ISSUER)
      .setAudience(TEST_AUDIENCE)
      .setIssuedAt()
      .setExpirationTime(options.expiresIn ?? '1h');
    if (options.notBefore) jwt.setNotBefore(options.notBefore);
    return jwt.sign(key);
  };
}

/**
 * Starts the real service on a loopback port with its own temp libSQL file and a JWKS file
 * of a key generated for this test, as an external identity provider would publish it.
 */
export async function startTestServer(options: TestServerOptions = {}): Promise<TestServer> {
  const dir = options.dir ?? fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-test-'));
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const foreign = await generateKeyPair('ES256');
  const kid = `test-${path.basename(dir)}`;
  const jwksFile = path.join(dir, 'jwks.json');
  fs.writeFileSync(jwksFile, JSON.stringify({ keys: [{ ...(await exportJWK(publicKey)), kid, alg: 'ES256', use: 'sig' }] }));

  const config = parseConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
    OWNER_JWKS_FILE: jwksFile,
    OWNER_ISSUER: TEST_ISSUER,
    OWNER_AUDIENCE: TEST_AUDIENCE,
    OWNER_WORKSPACE_CLAIM: 'workspace',
    // Tests drive one credential much harder than a real agent would; rate-limit tests opt
    // back in to the production defaults (or lower) through `env`.
    ...RELAXED_LIMITS,
    ...options.env,
  });
  const logs: string[] = [];
  const log = createLogger('info', (line) => logs.push(line));
  const clock = options.clock ?? { now: () => Date.now() };
  const service = await startService(config, { log, clock, ...(options.rateLimiter ? { rateLimiter: options.rateLimiter } : {}) });
  const sign = await signer(privateKey, kid);
  const signForeign = await signer(foreign.privateKey, kid);
  return {
    url: service.url,
    config,
    service,
    store: service.db,
    clock,
    dir,
    logs,
    ownerToken: sign,
    foreignToken: (subject) => signForeign(subject),
    close: () => service.close(),
  };
}

/** A server started for one test file: the handle is usable once its `beforeAll` has run. */
export type FileServer<S extends TestServer = TestServer> = S & {
  /** A fetch client for this server; safe to keep in a module constant (it reads the URL per call). */
  readonly api: Client;
};

/**
 * Registers `beforeAll` to start a server and `afterAll` to close it, and returns a handle that
 * forwards to it. Hooks a file registers after this call run after the start and before the close
 * (vitest's default "stack" order), so a file's own `beforeAll` can build its world on it.
 */
export function useServer<S extends TestServer>(start: () => Promise<S>): FileServer<S> {
  let started: S | undefined;
  const running = (key: PropertyKey): S => {
    if (!started) throw new Error(`the test server is not started yet: read .${String(key)} inside a hook or a test`);
    return started;
  };
  const api = client(() => running('url').url);
  beforeAll(async () => {
    started = await start();
  });
  afterAll(async () => {
    await started?.close();
  });
  return new Proxy({ api } as FileServer<S>, {
    get: (target, key) => (key === 'api' ? target.api : Reflect.get(running(key), key)),
  });
}

/** `startTestServer(options)` for the test file (or `describe`) that calls it; see `useServer`. */
export function useTestServer(options: TestServerOptions = {}): FileServer {
  return useServer(() => startTestServer(options));
}

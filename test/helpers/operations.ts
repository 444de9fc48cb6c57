import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createAuthenticator } from '../../src/auth/authenticate.js';
import type { OwnerVerifier } from '../../src/auth/owner.js';
import { parseConfig } from '../../src/config.js';
import { SERVICE_NAME } from '../../src/app.js';
import { createArgumentSchemas } from '../../src/domain/argument-schemas.js';
import type { Clock, OperationContext, Credential, CredentialOf, Surface } from '../../src/domain/context.js';
import { createEventHub } from '../../src/domain/event-hub.js';
import { call, invoke, type Answer, type OutputOf } from '../../src/domain/invoke.js';
import type { AnyOperation } from '../../src/domain/operation.js';
import { createLiveStreams } from '../../src/domain/owner-event-stream.js';
import { databaseCheck } from '../../src/domain/readiness.js';
import { createWebhookTransport } from '../../src/http/webhook-transport.js';
import { createLogger } from '../../src/logger.js';
import type { Db } from '../../src/store/driver.js';
import { openDb } from '../../src/store/open.js';
import { workspaceForOwner } from '../../src/store/workspaces.js';

/**
 * Operations called as the surfaces call them, through `invoke` and `call`, without HTTP: a
 * real libSQL file in a temp folder (migrated as at start), the service's own settings from
 * the configuration's defaults, a real event hub, schema cache and webhook transport. The
 * caller is a real credential: an owner's workspace is created as an owner's first sign-in
 * creates it, and an opaque token is resolved by the service's authenticator.
 */
export interface OperationsContext {
  db: Db;
  clock: Clock;
  /** The owner credential of `subject`'s workspace, as a verified owner session resolves to. */
  owner(subject: string): Promise<CredentialOf<'owner'>>;
  /** The credential an agent, setup or device token (or an OAuth access token) resolves to. */
  credentialOf(token: string): Promise<Credential>;
  /** The context a request of `credential` on `surface` runs with. */
  context(credential: Credential | null, surface?: Surface): OperationContext;
  /** `invoke` as `credential`: the operation's output, typed by its descriptor. */
  invoke<O extends AnyOperation>(operation: O, credential: Credential | null, input: unknown): Promise<OutputOf<O>>;
  /** `call` as `credential`: pages, streams and live feeds as the surfaces get them. */
  call<O extends AnyOperation>(operation: O, credential: Credential | null, input: unknown, signal?: AbortSignal): Promise<Answer<OutputOf<O>>>;
  close(): Promise<void>;
}

export async function openOperationsContext(env: Record<string, string> = {}): Promise<OperationsContext> {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-operations-'));
  const config = parseConfig({ DATABASE_URL: `file:${path.join(dir, 'dfc.db')}`, OAUTH_CIMD_ALLOW_LOOPBACK: 'true', ...env });
  const db = await openDb(config.databaseUrl);
  const clock: Clock = { now: () => Date.now() };
  const log = createLogger('silent');
  const settings = {
    serviceName: SERVICE_NAME,
    commit: config.commit,
    authConfigured: false,
    deviceControlsEnabled: config.deviceControlsEnabled,
    publicBaseUrl: config.publicBaseUrl,
    capacity: config.capacity,
    dependencies: [databaseCheck(db)],
    ownerEvents: config.ownerEvents,
  };
  const shared = {
    db,
    clock,
    log,
    settings,
    events: createEventHub(),
    schemas: createArgumentSchemas(),
    streams: createLiveStreams(),
    webhooks: createWebhookTransport({ allowLoopback: true }),
  };
  // Owner sessions are made by `owner()`, not verified from a JWT: this authenticator resolves the opaque tokens.
  const noOwnerSessions: OwnerVerifier = { verify: async () => undefined, plausible: () => false, health: () => ({ provider: 'development', ok: true }) };
  const authenticator = createAuthenticator({ db, owners: noOwnerSessions, now: clock.now, oauthResource: `${config.publicBaseUrl}/mcp` });
  let requests = 0;
  const context = (credential: Credential | null, surface: Surface = 'rest'): OperationContext => ({
    ...shared,
    credential,
    surface,
    requestId: `operations-test-${++requests}`,
  });

  return {
    db,
    clock,
    async owner(subject) {
      const workspace = await workspaceForOwner(db, subject, clock.now());
      return { kind: 'owner', workspaceId: workspace.id, subject };
    },
    async credentialOf(token) {
      const credential = await authenticator.authenticate(token);
      if (!credential) throw new Error('no credential for the token');
      return credential;
    },
    context,
    invoke: (operation, credential, input) => invoke(operation, context(credential), input),
    call: (operation, credential, input, signal) => call(operation, context(credential), input, undefined, signal),
    async close() {
      shared.streams.closeAll();
      await db.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

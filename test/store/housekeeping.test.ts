import { beforeAll, describe, expect, it, vi } from 'vitest';
import { CODE_RETENTION_MS, runHousekeeping } from '../../src/domain/housekeeping.js';
import { hashToken } from '../../src/domain/tokens.js';
import { queue, grant } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { authorizationUrl, decide, ownerCookie, pkce, registerClient, startOAuthTestServer, tokenRequest, useOAuthTestServer } from '../helpers/oauth.js';
import { connectDevice, issueTicket } from '../helpers/ws.js';

/**
 * The housekeeping sweep (src/domain/housekeeping.ts): every kind of row that outlives its
 * purpose is deleted after its deadline and not before, against the real server's database,
 * with rows made through the real endpoints and the manual clock moved past each deadline.
 * Unfinished actions are never deleted (finished ones: test/rest/storage-budgets.test.ts).
 */

const MINUTE = 60_000;
const HOUR = 60 * MINUTE;
const DAY = 24 * HOUR;
const CALLBACK = 'http://127.0.0.1:9/callback';
const clock = manualClock();
const t0 = clock.now();
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };
const tokens: Record<'access1' | 'refresh1' | 'access2' | 'refresh2', string> = { access1: '', refresh1: '', access2: '', refresh2: '' };
let unusedCode = '';
let usedCode = '';
let liveTicket = '';

const sweep = () => runHousekeeping({ db: server.service.db, clock });
const count = async (sql: string, args: (string | number)[] = []) => (await server.service.db.get<{ n: number }>(sql, args))!.n;
const tokenExists = (token: string) => count('SELECT count(*) AS n FROM oauth_tokens WHERE token_hash = ?', [hashToken(token)]);
const codeExists = (code: string) => count('SELECT count(*) AS n FROM oauth_codes WHERE code_hash = ?', [hashToken(code)]);
const ticketExists = (ticket: string) => count('SELECT count(*) AS n FROM event_tickets WHERE ticket_hash = ?', [hashToken(ticket)]);
const actions = () => count('SELECT count(*) AS n FROM actions');

// The timer stays out of the way (one run an hour, real time): these tests call the sweep.
const server = useOAuthTestServer({ clock, env: { HOUSEKEEPING_SWEEP_SECONDS: '3600', EXPIRY_SWEEP_SECONDS: '3600' } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('housekeeping-owner', { expiresIn: '10h' });
  const cookie = await ownerCookie(server.issuer, owner); // a consent session, 8 h
  const oauthClient = (await registerClient(server.issuer, owner, { name: 'Sweep', redirectUris: [CALLBACK], public: true, access: 'act' })).oauth.clientId;
  const approve = async () => {
    const { verifier, challenge } = pkce();
    const back = await decide(authorizationUrl(server.issuer, { client_id: oauthClient, redirect_uri: CALLBACK, code_challenge: challenge }), cookie);
    return { code: back.searchParams.get('code')!, verifier };
  };
  unusedCode = (await approve()).code;
  const flow = await approve();
  usedCode = flow.code;
  const first = await tokenRequest(server.issuer, {
    grant_type: 'authorization_code',
    code: flow.code,
    redirect_uri: CALLBACK,
    code_verifier: flow.verifier,
    client_id: oauthClient,
  });
  tokens.access1 = first.body.access_token;
  tokens.refresh1 = first.body.refresh_token;
  const second = await tokenRequest(server.issuer, { grant_type: 'refresh_token', refresh_token: tokens.refresh1, client_id: oauthClient }); // refresh1 rotated
  tokens.access2 = second.body.access_token;
  tokens.refresh2 = second.body.refresh_token;
  const revoked = await fetch(`${server.url}/oauth/revoke`, {
    method: 'POST',
    headers: { 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ token: tokens.access2, client_id: oauthClient }).toString(),
  });
  expect(revoked.status).toBe(200);

  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  // Issuing a ticket prunes the device's used ones: the live one first, then one used by a socket.
  liveTicket = await issueTicket(api, lamp);
  const socket = await connectDevice(api, server.url, lamp);
  socket.ws.close();
  await socket.closed;
  agent = await createAgent(api, owner, { access: 'act' });
  await grant(api, owner, agent.principal, lamp.id, ['set_power']);
  await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, idempotencyKey: 'early' });
}, 60_000);

describe('housekeeping sweep', () => {
  it('deletes used wake tickets at once and keeps everything still live', async () => {
    const before = { tokens: await count('SELECT count(*) AS n FROM oauth_tokens'), actions: await actions() };
    expect(await count('SELECT count(*) AS n FROM event_tickets WHERE used_at IS NOT NULL')).toBeGreaterThan(0);
    const deleted = await sweep();
    expect(deleted.eventTickets).toBeGreaterThan(0);
    expect(await count('SELECT count(*) AS n FROM event_tickets WHERE used_at IS NOT NULL')).toBe(0);
    expect(await ticketExists(liveTicket)).toBe(1);
    expect(await codeExists(unusedCode)).toBe(1);
    expect(await codeExists(usedCode)).toBe(1);
    expect(await count('SELECT count(*) AS n FROM oauth_tokens')).toBe(before.tokens);
    expect(await count('SELECT count(*) AS n FROM owner_sessions')).toBeGreaterThan(0);
    expect(await count('SELECT count(*) AS n FROM idempotency_keys')).toBe(1);
    expect(await actions()).toBe(before.actions);
  });

  it('deletes a wake ticket past its 30 s', async () => {
    clock.set(t0 + 31_000);
    await sweep();
    expect(await ticketExists(liveTicket)).toBe(0);
  });

  it(`keeps authorization codes for an hour past their 60 s (replay detection), then deletes used and unused ones`, async () => {
    clock.set(t0 + 60_000 + CODE_RETENTION_MS - MINUTE);
    await sweep();
    expect(await codeExists(unusedCode)).toBe(1);
    expect(await codeExists(usedCode)).toBe(1);
    clock.set(t0 + 60_000 + CODE_RETENTION_MS + MINUTE);
    await sweep();
    expect(await codeExists(unusedCode)).toBe(0);
    expect(await codeExists(usedCode)).toBe(0);
  });

  it('deletes access tokens once expired (1 h), revoked ones included, and keeps refresh tokens, rotated ones included', async () => {
    // The previous step is past the access tokens' hour already.
    expect(await tokenExists(tokens.access1)).toBe(0);
    expect(await tokenExists(tokens.access2)).toBe(0);
    expect(await tokenExists(tokens.refresh1)).toBe(1);
    expect(await tokenExists(tokens.refresh2)).toBe(1);
  });

  it('deletes consent sessions once expired (8 h at most)', async () => {
    clock.set(t0 + 8 * HOUR - MINUTE);
    await sweep();
    expect(await count('SELECT count(*) AS n FROM owner_sessions')).toBe(1);
    clock.set(t0 + 8 * HOUR + MINUTE);
    await sweep();
    expect(await count('SELECT count(*) AS n FROM owner_sessions')).toBe(0);
  });

  it('deletes idempotency records older than 24 h and keeps younger ones', async () => {
    clock.set(t0 + DAY - MINUTE);
    await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: false }, idempotencyKey: 'late' });
    await sweep();
    expect(await count('SELECT count(*) AS n FROM idempotency_keys')).toBe(2);
    clock.set(t0 + DAY + MINUTE);
    await sweep();
    const keys = await server.service.db.all<{ key: string }>('SELECT key FROM idempotency_keys');
    expect(keys.map((k) => k.key)).toEqual(['late']);
  });

  it('deletes refresh tokens once expired (30 d), the rotated one and the live one', async () => {
    clock.set(t0 + 30 * DAY - MINUTE);
    await sweep();
    expect(await tokenExists(tokens.refresh2)).toBe(1);
    clock.set(t0 + 30 * DAY + MINUTE);
    await sweep();
    expect(await tokenExists(tokens.refresh1)).toBe(0);
    expect(await tokenExists(tokens.refresh2)).toBe(0);
    expect(await count('SELECT count(*) AS n FROM oauth_tokens')).toBe(0);
  });

  it('deletes OAuth clients nobody approved a day after they registered; approved and pre-registered ones stay', async () => {
    const registeredAt = clock.now();
    const register = async (name: string): Promise<string> => {
      const res = await fetch(`${server.issuer}/oauth/register`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ client_name: name, redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none' }),
      });
      expect(res.status).toBe(201);
      return ((await res.json()) as { client_id: string }).client_id;
    };
    const abandoned = await register('Abandoned');
    const approved = await register('Approved');
    const cookie = await ownerCookie(server.issuer, await server.ownerToken('housekeeping-owner', { expiresIn: '40d' }));
    const back = await decide(authorizationUrl(server.issuer, { client_id: approved, redirect_uri: CALLBACK, code_challenge: pkce().challenge }), cookie);
    expect(back.searchParams.get('code')).toBeTruthy();
    const clientExists = (clientId: string) => count('SELECT count(*) AS n FROM oauth_clients WHERE client_id = ?', [clientId]);
    const registered = () => count("SELECT count(*) AS n FROM oauth_clients WHERE source = 'registered'");
    expect(await registered()).toBe(1);

    clock.set(registeredAt + DAY - MINUTE);
    expect((await sweep()).unapprovedClients).toBe(0);
    expect(await clientExists(abandoned)).toBe(1);

    clock.set(registeredAt + DAY + MINUTE);
    expect((await sweep()).unapprovedClients).toBe(1);
    expect(await clientExists(abandoned)).toBe(0);
    expect(await clientExists(approved)).toBe(1);
    expect(await registered()).toBe(1);
    // The deleted client is now unknown: its next authorization request is refused, not served.
    const again = await fetch(authorizationUrl(server.issuer, { client_id: abandoned, redirect_uri: CALLBACK, code_challenge: pkce().challenge }), {
      redirect: 'manual',
    });
    expect(again.status).toBe(400);
  });

  it('never deletes an unfinished action, however old', async () => {
    expect(await actions()).toBe(2);
    const history = await api.get('/v1/actions', { token: owner });
    expect(history.status).toBe(200);
    expect(history.body.data).toHaveLength(2);
  });

  it('works a backlog off in batches: every due row goes, however many batches it takes', async () => {
    const now = clock.now();
    const device = lamp.id;
    const workspace = (await server.service.db.get<{ id: string }>('SELECT workspace_id AS id FROM devices WHERE id = ?', [device]))!.id;
    for (let i = 0; i < 25; i++) {
      await server.service.db.run('INSERT INTO event_tickets (ticket_hash, workspace_id, device_id, expires_at, created_at) VALUES (?, ?, ?, ?, ?)', [
        `backlog-${i}`,
        workspace,
        device,
        now - 1,
        now - 31_000,
      ]);
    }
    const deleted = await runHousekeeping({ db: server.service.db, clock }, { batchSize: 4 });
    expect(deleted.eventTickets).toBe(25);
    expect(await count('SELECT count(*) AS n FROM event_tickets')).toBe(0);
  });
});

describe('housekeeping timer (HOUSEKEEPING_SWEEP_SECONDS)', () => {
  it('runs in the service on its own, every HOUSEKEEPING_SWEEP_SECONDS', async () => {
    const own = manualClock();
    const other = await startOAuthTestServer({ clock: own, env: { HOUSEKEEPING_SWEEP_SECONDS: '1' } });
    try {
      const ownerToken = await other.ownerToken('timer-owner');
      await ownerCookie(other.issuer, ownerToken);
      const sessions = () => other.service.db.get<{ n: number }>('SELECT count(*) AS n FROM owner_sessions');
      expect((await sessions())!.n).toBe(1);
      own.advance(8 * HOUR + MINUTE);
      await vi.waitFor(async () => expect((await sessions())!.n).toBe(0), { timeout: 5_000, interval: 100 });
    } finally {
      await other.close();
    }
  });
});

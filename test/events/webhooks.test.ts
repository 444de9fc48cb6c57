import { createHmac, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { runHousekeeping } from '../../src/domain/housekeeping.js';
import { EmbeddedDb } from '../../src/store/embedded.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { claimDueDeliveries } from '../../src/store/webhook-claims.js';
import { passOverDispatch, readDispatchState } from '../../src/store/webhooks.js';
import { EVENT_TYPES } from '../../src/domain/event-catalogue.js';
import { client, type Client } from '../helpers/api.js';
import { grant, queue } from '../helpers/actions.js';
import { startChildService, testIdentity } from '../helpers/child-service.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { journalIdOf } from '../helpers/event-ids.js';
import { startTestServer, useTestServer, type TestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

// Webhooks (docs/owners/webhooks.md): registered by the owner, delivered to a real HTTP receiver this
// test starts on a loopback port. The test-only OAUTH_CIMD_ALLOW_LOOPBACK admits it; a second
// server without that switch shows what the SSRF guard refuses.

const WEBHOOK_ENV = {
  OAUTH_CIMD_ALLOW_LOOPBACK: 'true',
  WEBHOOK_POLL_SECONDS: '0.05',
  WEBHOOK_TIMEOUT_SECONDS: '0.5',
  // Three retries, fast: four attempts in all.
  WEBHOOK_RETRY_SECONDS: '0.05,0.05,0.05',
};

interface Received {
  headers: http.IncomingHttpHeaders;
  body: string;
}

/** A webhook endpoint: each path answers a script of statuses (`slow`: answers after the attempt's deadline), then 200. */
class Receiver {
  readonly received = new Map<string, Received[]>();
  readonly scripts = new Map<string, (number | 'slow')[]>();
  readonly server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const path = request.url ?? '/';
      const list = this.received.get(path) ?? [];
      list.push({ headers: request.headers, body: Buffer.concat(chunks).toString('utf8') });
      this.received.set(path, list);
      const next = this.scripts.get(path)?.shift() ?? 200;
      if (next === 'slow') setTimeout(() => response.writeHead(200).end(), 1500);
      else response.writeHead(next).end();
    });
  });
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  at(path: string): Received[] {
    return this.received.get(path) ?? [];
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

/** An endpoint that takes every request and never answers, as a dead server behind a live proxy does. */
class HangingReceiver {
  /** Requests whose connection is still open, the most there ever were at once, and how many have ended. */
  open = 0;
  mostOpen = 0;
  ended = 0;
  readonly server = http.createServer((request, response) => {
    request.resume();
    this.open++;
    this.mostOpen = Math.max(this.mostOpen, this.open);
    response.on('close', () => {
      this.open--;
      this.ended++;
    });
  });
  url = '';

  async start(): Promise<void> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    this.url = `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/hang`;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const receiver = new Receiver();

const server = useTestServer({ env: WEBHOOK_ENV });
const api = server.api;

beforeAll(async () => {
  await receiver.start();
});
afterAll(async () => {
  await receiver.close();
});

interface Registered {
  id: string;
  secret: string;
  url: string;
}

async function register(owner: string, path: string, events: string[], target: Client = api): Promise<Registered> {
  return registerAt(`${receiver.url}${path}`, owner, events, target);
}

async function registerAt(url: string, owner: string, events: string[], target: Client): Promise<Registered> {
  const res = await target.post('/v1/webhooks', { token: owner, body: { url, events } });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.data as Registered;
}

/** The signature a receiver computes from the secret shown once, as the Standard Webhooks libraries do. */
function expectedSignature(secret: string, received: Received): string {
  const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
  const signed = `${String(received.headers['webhook-id'])}.${String(received.headers['webhook-timestamp'])}.${received.body}`;
  return `v1,${createHmac('sha256', key).update(signed).digest('base64')}`;
}

const signaturesOf = (received: Received) => String(received.headers['webhook-signature']).split(' ');

async function deliveries(owner: string, webhookId: string, target: Client = api) {
  const res = await target.get(`/v1/webhooks/${webhookId}/deliveries`, { token: owner });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  return res.body.data as {
    id: string;
    eventId: string;
    eventType: string;
    status: string;
    attempts: number;
    lastStatusCode: number | null;
    lastError: string | null;
  }[];
}

async function workspace(name: string): Promise<{ owner: string; lamp: AttachedDevice }> {
  const owner = await server.ownerToken(name);
  return { owner, lamp: await attachDevice(api, owner) };
}

const waitFor = <T>(check: () => Promise<T> | T) => vi.waitFor(check, { timeout: 15_000, interval: 50 });

describe('POST /v1/webhooks', () => {
  it('registers an endpoint and shows its secret once, in the Standard Webhooks form', async () => {
    const owner = await server.ownerToken('webhooks-register');
    const res = await api.post('/v1/webhooks', {
      token: owner,
      body: { url: `${receiver.url}/register`, events: ['approval.requested', 'action.created'], description: 'phone' },
    });
    expect(res.status).toBe(201);
    const created = res.body.data;
    expect(created).toMatchObject({ url: `${receiver.url}/register`, events: ['approval.requested', 'action.created'], description: 'phone', revoked: false });
    expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(created.secret.slice(6), 'base64')).toHaveLength(32);

    const shown = await api.get(`/v1/webhooks/${created.id}`, { token: owner });
    expect(shown.status).toBe(200);
    expect(shown.body.data).not.toHaveProperty('secret');
    const listed = await api.get('/v1/webhooks', { token: owner });
    expect(listed.body.data.map((w: { id: string }) => w.id)).toEqual([created.id]);
    expect(listed.body.data[0]).not.toHaveProperty('secret');
  });

  it('accepts every type of the event catalogue, approval.requested among them', async () => {
    const owner = await server.ownerToken('webhooks-all-types');
    const all = Object.keys(EVENT_TYPES);
    expect(all).toContain('approval.requested');
    expect((await register(owner, '/all-types', all)) as unknown).toMatchObject({ events: all });
  });

  it('refuses an unknown event type, naming its place in the list', async () => {
    const owner = await server.ownerToken('webhooks-bad-type');
    const res = await api.post('/v1/webhooks', { token: owner, body: { url: `${receiver.url}/x`, events: ['action.created', 'action.exploded'] } });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toEqual(['events.1']);
  });

  it('answers 404 for another workspace’s webhook', async () => {
    const owner = await server.ownerToken('webhooks-owner-a');
    const other = await server.ownerToken('webhooks-owner-b');
    const { id } = await register(owner, '/mine', ['grant.created']);
    for (const path of [`/v1/webhooks/${id}`, `/v1/webhooks/${id}/deliveries`]) expect((await api.get(path, { token: other })).status).toBe(404);
    for (const path of [`/v1/webhooks/${id}/rotate-secret`, `/v1/webhooks/${id}/revoke`]) expect((await api.post(path, { token: other })).status).toBe(404);
    expect((await api.get(`/v1/webhooks/${id}`, { token: owner })).body.data.revoked).toBe(false);
  });
});

describe('webhook URLs outside tests (the SSRF guard of OAuth metadata fetching)', () => {
  const guarded = useTestServer({ env: { WORKSPACE_MAX_WEBHOOKS: '2' } });
  const guardedApi = guarded.api;

  it('refuses loopback, private, link-local and http targets at registration', async () => {
    const owner = await guarded.ownerToken('webhooks-guarded');
    for (const url of [
      `${receiver.url}/hook`,
      'https://127.0.0.1/hook',
      'https://10.0.0.1/hook',
      'https://192.168.1.20/hook',
      'https://169.254.169.254/latest',
      'https://[::1]/hook',
      'https://[::ffff:7f00:1]/hook',
      // Other spellings of loopback and private addresses: hex and single-number IPv4, NAT64, 6to4.
      'https://0x7f.1/hook',
      'https://2130706433/hook',
      'https://[64:ff9b::a00:1]/hook',
      'https://[2002:c0a8:0101::1]/hook',
      'https://[fd00::1]/hook',
      'https://localhost/hook',
      'http://93.184.216.34/hook',
    ]) {
      const res = await guardedApi.post('/v1/webhooks', { token: owner, body: { url, events: ['approval.requested'] } });
      expect(res.status, url).toBe(400);
      expect(res.body.error.issues, url).toEqual([expect.objectContaining({ path: 'url' })]);
    }
    expect((await guardedApi.get('/v1/webhooks', { token: owner })).body.data).toEqual([]);
  });

  it('refuses a URL that carries a user name and password', async () => {
    const owner = await guarded.ownerToken('webhooks-userinfo');
    const res = await guardedApi.post('/v1/webhooks', { token: owner, body: { url: 'https://user:pass@93.184.216.34/hook', events: ['grant.created'] } });
    expect(res.status).toBe(400);
    expect(res.body.error.issues[0].path).toBe('url');
  });

  it('holds a workspace to WORKSPACE_MAX_WEBHOOKS live webhooks; a revoked one frees its place', async () => {
    const owner = await guarded.ownerToken('webhooks-cap');
    // A public address given literally: registering resolves nothing and sends nothing.
    const body = { url: 'https://93.184.216.34/hook', events: ['device.revoked'] };
    const first = await guardedApi.post('/v1/webhooks', { token: owner, body });
    expect(first.status).toBe(201);
    expect((await guardedApi.post('/v1/webhooks', { token: owner, body })).status).toBe(201);
    const refused = await guardedApi.post('/v1/webhooks', { token: owner, body });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('capacity_exceeded');
    expect((await guardedApi.post(`/v1/webhooks/${first.body.data.id}/revoke`, { token: owner })).status).toBe(200);
    expect((await guardedApi.post('/v1/webhooks', { token: owner, body })).status).toBe(201);
  });
});

describe('webhook delivery', () => {
  it('POSTs the event, signed with the secret shown once, with the Standard Webhooks headers', async () => {
    const { owner, lamp } = await workspace('webhooks-signed');
    const hook = await register(owner, '/signed', ['grant.created']);
    const [given] = await grant(api, owner, 'agent:signed', lamp.id, ['set_power']);

    await waitFor(() => expect(receiver.at('/signed')).toHaveLength(1));
    const [received] = receiver.at('/signed');
    expect(received!.headers['content-type']).toBe('application/json');
    expect(signaturesOf(received!)).toEqual([expectedSignature(hook.secret, received!)]);
    expect(Math.abs(Number(received!.headers['webhook-timestamp']) - Date.now() / 1000)).toBeLessThan(300);
    const event = JSON.parse(received!.body);
    expect(event).toMatchObject({ type: 'grant.created', data: { grant: { id: given!.id, principal: 'agent:signed', capability: 'set_power' } } });

    await waitFor(async () => expect((await deliveries(owner, hook.id))[0]).toMatchObject({ status: 'delivered' }));
    const [delivery] = await deliveries(owner, hook.id);
    expect(delivery).toMatchObject({ id: received!.headers['webhook-id'], eventId: event.id, eventType: 'grant.created', attempts: 1, lastStatusCode: 200 });
  });

  it('tells an owner who is not looking that an action waits for their approval, with the action', async () => {
    const { owner, lamp } = await workspace('webhooks-approval');
    const hook = await register(owner, '/approval', ['approval.requested']);
    const agent = await createAgent(api, owner);
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(action.status).toBe('awaiting_approval');

    await waitFor(() => expect(receiver.at('/approval')).toHaveLength(1));
    const [received] = receiver.at('/approval');
    expect(signaturesOf(received!)).toEqual([expectedSignature(hook.secret, received!)]);
    expect(JSON.parse(received!.body)).toMatchObject({
      type: 'approval.requested',
      data: { action: { id: action.id, status: 'awaiting_approval', principal: agent.principal, capability: 'set_power', arguments: { on: true } } },
    });
  });

  it("carries a grant's conditions on grant.created, and the old and new ones on grant.updated", async () => {
    const { owner, lamp } = await workspace('webhooks-conditions');
    await register(owner, '/conditions', ['grant.created', 'grant.updated']);
    const conditions = {
      schedule: { timeZone: 'Europe/Berlin', windows: [{ days: ['sat'], from: '09:00', to: '12:00' }] },
      budget: { max: 5, perSeconds: 3600 },
    };
    const given = await api.post('/v1/grants', {
      token: owner,
      body: { principal: 'agent:bounded', deviceId: lamp.id, capabilities: ['set_power'], conditions },
    });
    expect(given.status, JSON.stringify(given.body)).toBe(201);
    const tightened = { budget: { max: 2, perSeconds: 3600 } };
    const changed = await api.post(`/v1/grants/${given.body.data[0].id}/update`, { token: owner, body: { conditions: tightened } });
    expect(changed.status, JSON.stringify(changed.body)).toBe(200);

    await waitFor(() => expect(receiver.at('/conditions')).toHaveLength(2));
    const events = receiver.at('/conditions').map((r) => JSON.parse(r.body));
    expect(events.find((e) => e.type === 'grant.created').data.grant.conditions).toEqual(conditions);
    const updated = events.find((e) => e.type === 'grant.updated').data.grant;
    expect(updated.conditions).toEqual(tightened);
    expect(updated.previous.conditions).toEqual(conditions);
  });

  it('sends only the event types the webhook asked for', async () => {
    const { owner, lamp } = await workspace('webhooks-filtered');
    const revokedOnly = await register(owner, '/filtered', ['grant.revoked']);
    const everything = await register(owner, '/filtered-all', ['grant.created', 'grant.revoked']);
    const [given] = await grant(api, owner, 'agent:filtered', lamp.id, ['set_power']);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: given!.id } })).status).toBe(200);

    await waitFor(() => expect(receiver.at('/filtered-all')).toHaveLength(2));
    await waitFor(() => expect(receiver.at('/filtered')).toHaveLength(1));
    expect(JSON.parse(receiver.at('/filtered')[0]!.body).type).toBe('grant.revoked');
    expect((await deliveries(owner, revokedOnly.id)).map((d) => d.eventType)).toEqual(['grant.revoked']);
    expect((await deliveries(owner, everything.id)).map((d) => d.eventType).sort()).toEqual(['grant.created', 'grant.revoked']);
  });

  it('retries after 500s with the same id and body until a 2xx, recording each attempt', async () => {
    const { owner, lamp } = await workspace('webhooks-retries');
    receiver.scripts.set('/retries', [500, 500]);
    const hook = await register(owner, '/retries', ['grant.created']);
    await grant(api, owner, 'agent:retries', lamp.id, ['set_power']);

    await waitFor(async () => expect((await deliveries(owner, hook.id))[0]).toMatchObject({ status: 'delivered', attempts: 3, lastStatusCode: 200 }));
    const attempts = receiver.at('/retries');
    expect(attempts).toHaveLength(3);
    expect(new Set(attempts.map((a) => a.headers['webhook-id'])).size).toBe(1);
    expect(new Set(attempts.map((a) => a.body)).size).toBe(1);
    for (const attempt of attempts) expect(signaturesOf(attempt)).toEqual([expectedSignature(hook.secret, attempt)]);
  });

  it('marks a delivery failed once every retry of the schedule failed', async () => {
    const { owner, lamp } = await workspace('webhooks-gives-up');
    receiver.scripts.set('/gives-up', [503, 503, 503, 503, 503, 503]);
    const hook = await register(owner, '/gives-up', ['grant.created']);
    await grant(api, owner, 'agent:gives-up', lamp.id, ['set_power']);

    await waitFor(async () =>
      expect((await deliveries(owner, hook.id))[0]).toMatchObject({ status: 'failed', attempts: 4, lastStatusCode: 503, lastError: 'HTTP 503' }),
    );
    expect(receiver.at('/gives-up')).toHaveLength(4);
  });

  it('times out an attempt to a slow receiver and retries it', async () => {
    const { owner, lamp } = await workspace('webhooks-slow');
    receiver.scripts.set('/slow', ['slow']);
    const hook = await register(owner, '/slow', ['grant.created']);
    await grant(api, owner, 'agent:slow', lamp.id, ['set_power']);

    await waitFor(async () => expect((await deliveries(owner, hook.id))[0]).toMatchObject({ status: 'delivered', attempts: 2, lastStatusCode: 200 }));
    expect(receiver.at('/slow')).toHaveLength(2);
  });

  it('signs with the new secret after a rotation, and with the previous one beside it for a day', async () => {
    const { owner, lamp } = await workspace('webhooks-rotate');
    const hook = await register(owner, '/rotate', ['grant.created']);
    const rotated = await api.post(`/v1/webhooks/${hook.id}/rotate-secret`, { token: owner });
    expect(rotated.status).toBe(200);
    const secret = rotated.body.data.secret as string;
    expect(secret).toMatch(/^whsec_/);
    expect(secret).not.toBe(hook.secret);
    expect(rotated.body.data.previousSecretValidUntil).toBeGreaterThan(Date.now() + 23 * 3_600_000);
    await grant(api, owner, 'agent:rotate', lamp.id, ['set_power']);

    await waitFor(() => expect(receiver.at('/rotate')).toHaveLength(1));
    const [received] = receiver.at('/rotate');
    expect(signaturesOf(received!)).toEqual([expectedSignature(secret, received!), expectedSignature(hook.secret, received!)]);
  });

  it('sends nothing more to a revoked webhook', async () => {
    const { owner, lamp } = await workspace('webhooks-revoke');
    const hook = await register(owner, '/revoked', ['grant.created']);
    const witness = await register(owner, '/revoked-witness', ['grant.created']);
    const revoked = await api.post(`/v1/webhooks/${hook.id}/revoke`, { token: owner });
    expect(revoked.status).toBe(200);
    expect(revoked.body.data).toMatchObject({ revoked: true });
    expect((await api.post(`/v1/webhooks/${hook.id}/rotate-secret`, { token: owner })).status).toBe(409);
    await grant(api, owner, 'agent:revoke', lamp.id, ['set_power']);

    // The witness got the event, so it was dispatched: the revoked webhook was passed over.
    await waitFor(() => expect(receiver.at('/revoked-witness')).toHaveLength(1));
    expect(receiver.at('/revoked')).toEqual([]);
    expect(await deliveries(owner, hook.id)).toEqual([]);
    expect(await deliveries(owner, witness.id)).toHaveLength(1);
  });

  it("never delivers another workspace's events", async () => {
    const a = await workspace('webhooks-tenant-a');
    const b = await workspace('webhooks-tenant-b');
    await register(a.owner, '/tenant-a', ['grant.created']);
    await register(b.owner, '/tenant-b', ['grant.created']);
    await grant(api, b.owner, 'agent:tenant', b.lamp.id, ['set_power']);

    await waitFor(() => expect(receiver.at('/tenant-b')).toHaveLength(1));
    expect(receiver.at('/tenant-a')).toEqual([]);
  });

  it('never delivers events from before the webhook was registered', async () => {
    const { owner, lamp } = await workspace('webhooks-earlier');
    await grant(api, owner, 'agent:earlier', lamp.id, ['set_power']);
    const hook = await register(owner, '/earlier', ['grant.created']);
    await grant(api, owner, 'agent:later', lamp.id, ['set_power']);

    await waitFor(() => expect(receiver.at('/earlier')).toHaveLength(1));
    expect(JSON.parse(receiver.at('/earlier')[0]!.body).data.grant.principal).toBe('agent:later');
    expect(await deliveries(owner, hook.id)).toHaveLength(1);
  });
});

describe('webhook retries an hour apart (WEBHOOK_RETRY_SECONDS=3600)', () => {
  const hourly = useTestServer({ env: { ...WEBHOOK_ENV, WEBHOOK_RETRY_SECONDS: '3600' } });
  const hourlyApi = hourly.api;

  async function failedOnce(name: string) {
    const owner = await hourly.ownerToken(name);
    const lamp = await attachDevice(hourlyApi, owner);
    receiver.scripts.set(`/${name}`, [500]);
    const hook = await register(owner, `/${name}`, ['grant.created'], hourlyApi);
    await grant(hourlyApi, owner, `agent:${name}`, lamp.id, ['set_power']);
    const list = async () => (await hourlyApi.get(`/v1/webhooks/${hook.id}/deliveries`, { token: owner })).body.data;
    await waitFor(async () => expect((await list())[0]).toMatchObject({ status: 'pending', attempts: 1, lastStatusCode: 500 }));
    return { owner, lamp, hook, list };
  }

  it('shows a failed attempt pending with its next attempt after the delay, plus up to 20% jitter', async () => {
    const { list } = await failedOnce('hourly-pending');
    const [delivery] = await list();
    expect(delivery.nextAttemptAt - delivery.lastAttemptAt).toBeGreaterThanOrEqual(3_600_000);
    expect(delivery.nextAttemptAt - delivery.lastAttemptAt).toBeLessThanOrEqual(4_320_000);
    expect(delivery).toMatchObject({ lastError: 'HTTP 500', finishedAt: null });
  });

  it('does not pause an endpoint for one failure: its next delivery goes at once and ends the streak', async () => {
    const { owner, lamp, hook, list } = await failedOnce('hourly-once');
    await waitFor(async () => expect((await hourlyApi.get(`/v1/webhooks/${hook.id}`, { token: owner })).body.data.consecutiveFailures).toBe(1));
    await grant(hourlyApi, owner, 'agent:hourly-once-later', lamp.id, ['set_power']);
    await waitFor(() => expect(receiver.at('/hourly-once')).toHaveLength(2));
    await waitFor(async () => expect((await list())[0]).toMatchObject({ status: 'delivered', attempts: 1 }));
    const shown = (await hourlyApi.get(`/v1/webhooks/${hook.id}`, { token: owner })).body.data;
    expect(shown).toMatchObject({ consecutiveFailures: 0, backedOffUntil: null });
  });

  it('backs an endpoint off as a whole after three failures in a row: its next delivery waits out the delay too, shown on the webhook', async () => {
    const name = 'hourly-backoff';
    const owner = await hourly.ownerToken(name);
    const lamp = await attachDevice(hourlyApi, owner);
    receiver.scripts.set(`/${name}`, [500, 500, 500]);
    const hook = await register(owner, `/${name}`, ['grant.created'], hourlyApi);
    const list = async () => (await hourlyApi.get(`/v1/webhooks/${hook.id}/deliveries`, { token: owner })).body.data;
    const shown = async () => (await hourlyApi.get(`/v1/webhooks/${hook.id}`, { token: owner })).body.data;
    // Three events, each delivery failing once: the first two leave the endpoint running.
    for (let failed = 1; failed <= 3; failed++) {
      await grant(hourlyApi, owner, `agent:${name}-${failed}`, lamp.id, ['set_power']);
      // The streak is written just after the attempt: wait for it, so the next event finds it.
      await waitFor(async () => expect((await shown()).consecutiveFailures).toBe(failed));
      if (failed < 3) expect((await shown()).backedOffUntil).toBeNull();
    }
    const witness = await register(owner, `/${name}-witness`, ['grant.created'], hourlyApi);
    await grant(hourlyApi, owner, `agent:${name}-later`, lamp.id, ['set_power']);

    // The witness got the later event: it was dispatched and claims ran since, passing the backed-off endpoint by.
    await waitFor(() => expect(receiver.at(`/${name}-witness`)).toHaveLength(1));
    await waitFor(async () => expect(await list()).toHaveLength(4));
    const [later, third] = await list();
    expect(later).toMatchObject({ status: 'pending', attempts: 0 });
    expect(receiver.at(`/${name}`)).toHaveLength(3);
    const webhook = await shown();
    expect(webhook).toMatchObject({ disabled: false, consecutiveFailures: 3 });
    expect(webhook.backedOffUntil - third.lastAttemptAt).toBeGreaterThanOrEqual(3_600_000);
    expect((await hourlyApi.get(`/v1/webhooks/${witness.id}`, { token: owner })).body.data).toMatchObject({ consecutiveFailures: 0, backedOffUntil: null });
  });

  it('sends the same bytes on a retry after the journal has been pruned', async () => {
    const { hook, list } = await failedOnce('hourly-pruned');
    const [delivery] = await list();
    await runHousekeeping({ db: hourly.service.db, clock: { now: () => Date.now() + 60_000 } }, { eventsRetentionMs: 1 });
    expect(await hourly.service.db.get("SELECT count(*) AS n FROM workspace_events WHERE id = ? AND workspace_id <> ''", [Number(delivery.eventId)])).toEqual({
      n: 0,
    });
    // The hour has passed: the delivery and its endpoint are due again.
    await hourly.service.db.run('UPDATE webhook_deliveries SET next_attempt_at = 0 WHERE id = ?', [delivery.id]);
    await hourly.service.db.run('UPDATE webhooks SET paused_until = NULL WHERE id = ?', [hook.id]);

    await waitFor(async () => expect((await list())[0]).toMatchObject({ status: 'delivered', attempts: 2 }));
    const [before, after] = receiver.at('/hourly-pruned');
    expect(after!.body).toBe(before!.body);
    expect(after!.headers['webhook-id']).toBe(before!.headers['webhook-id']);
  });

  it('cancels the pending deliveries of a webhook when it is revoked', async () => {
    const { owner, hook, list } = await failedOnce('hourly-cancel');
    expect((await hourlyApi.post(`/v1/webhooks/${hook.id}/revoke`, { token: owner })).status).toBe(200);
    expect((await list())[0]).toMatchObject({ status: 'cancelled', nextAttemptAt: null });
  });

  it('lets housekeeping delete deliveries a week after they finished, and the revoked webhook with them', async () => {
    const { owner, hook } = await failedOnce('hourly-housekeeping');
    expect((await hourlyApi.post(`/v1/webhooks/${hook.id}/revoke`, { token: owner })).status).toBe(200);
    const inAWeek = { now: () => Date.now() + 7 * 24 * 3_600_000 + 60_000 };
    const deleted = await runHousekeeping({ db: hourly.service.db, clock: inAWeek });
    expect(deleted.webhookDeliveries).toBeGreaterThanOrEqual(1);
    expect(deleted.revokedWebhooks).toBeGreaterThanOrEqual(1);
    expect((await hourlyApi.get(`/v1/webhooks/${hook.id}`, { token: owner })).status).toBe(404);
  });
});

describe('the dispatcher while no webhook is live', () => {
  const quiet = useTestServer({ env: WEBHOOK_ENV });
  const quietApi = quiet.api;

  it('moves its cursor past the journal without writing a delivery', async () => {
    const owner = await quiet.ownerToken('webhooks-none-live');
    const lamp = await attachDevice(quietApi, owner);
    for (const principal of ['agent:none-1', 'agent:none-2', 'agent:none-3']) await grant(quietApi, owner, principal, lamp.id, ['set_power']);

    await waitFor(async () => {
      const state = await readDispatchState(quiet.service.db);
      expect(state.newest).toBeGreaterThan(0);
      expect(state.cursor).toBe(state.newest);
    });
    expect(await quiet.service.db.get('SELECT count(*) AS n FROM webhook_deliveries')).toEqual({ n: 0 });
  });

  it('keeps its cursor when a webhook went live after the poll read that none was, and delivers what follows', async () => {
    const owner = await quiet.ownerToken('webhooks-went-live');
    const lamp = await attachDevice(quietApi, owner);
    const before = await readDispatchState(quiet.service.db);
    expect(before.anyLive).toBe(0);
    const hook = await register(owner, '/went-live', ['grant.created'], quietApi);
    await grant(quietApi, owner, 'agent:went-live', lamp.id, ['set_power']);

    // The poll's read said no webhook was live; its move, made now, must not skip the new grant.
    const stale = await readDispatchState(quiet.service.db);
    const [moved] = await quiet.service.db.batch([passOverDispatch(stale.cursor, stale.newest)]);
    expect(moved!.changes).toBe(0);

    await waitFor(() => expect(receiver.at('/went-live')).toHaveLength(1));
    expect(JSON.parse(receiver.at('/went-live')[0]!.body).data.grant.principal).toBe('agent:went-live');
    expect(await deliveries(owner, hook.id, quietApi)).toHaveLength(1);
  });
});

describe('webhook delivery with two instances on one database', () => {
  it('sends each event once', async () => {
    // The second instance is a process of its own, as instances are: one embedded connection
    // per process (docs/operators/deploy.md, "Volumes"). Two in one process would hold each other up, since a
    // commit group keeps the write lock until the end of its event-loop turn while the other
    // connection's BEGIN waits synchronously on that same loop.
    const identity = await testIdentity(server.dir);
    const second = await startChildService({ ...WEBHOOK_ENV, ...identity.env, PORT: '0', DATABASE_URL: server.config.databaseUrl });
    try {
      const { owner, lamp } = await workspace('webhooks-two-instances');
      const hook = await register(owner, '/two', ['grant.created']);
      const principals = Array.from({ length: 12 }, (_, i) => `agent:two-${i}`);
      for (const principal of principals) await grant(api, owner, principal, lamp.id, ['set_power']);

      await waitFor(async () => {
        const listed = await deliveries(owner, hook.id);
        expect(listed).toHaveLength(principals.length);
        expect(listed.every((d) => d.status === 'delivered')).toBe(true);
      });
      const received = receiver.at('/two');
      expect(received).toHaveLength(principals.length);
      expect(new Set(received.map((r) => r.headers['webhook-id'])).size).toBe(principals.length);
      expect(received.map((r) => JSON.parse(r.body).data.grant.principal).sort()).toEqual([...principals].sort());
    } finally {
      second.process.kill('SIGTERM');
      await second.exited;
    }
  });
});

const METRICS_TOKEN = 'metrics-secret-for-webhook-tests-0123';

describe('an endpoint that keeps failing is disabled, until its owner enables it', () => {
  const strict = useTestServer({
    env: {
      ...WEBHOOK_ENV,
      WEBHOOK_RETRY_SECONDS: '0.05,0.05,0.05,0.05,0.05',
      WEBHOOK_DISABLE_AFTER_FAILURES: '3',
      WEBHOOK_DISABLE_AFTER_HOURS: '0',
      METRICS_TOKEN,
    },
  });
  const strictApi = strict.api;

  it('disables it after WEBHOOK_DISABLE_AFTER_FAILURES failed attempts, with the reason shown and a webhook.disabled event', async () => {
    const owner = await strict.ownerToken('webhooks-disabled');
    const lamp = await attachDevice(strictApi, owner);
    receiver.scripts.set('/disabled', [500, 500, 500]);
    const hook = await register(owner, '/disabled', ['grant.created'], strictApi);
    const watcher = await register(owner, '/disabled-watcher', ['webhook.disabled'], strictApi);
    await register(owner, '/disabled-witness', ['grant.created'], strictApi);
    await grant(strictApi, owner, 'agent:disabled-1', lamp.id, ['set_power']);

    await waitFor(() => expect(receiver.at('/disabled-watcher')).toHaveLength(1));
    const [event] = receiver.at('/disabled-watcher');
    expect(signaturesOf(event!)).toEqual([expectedSignature(watcher.secret, event!)]);
    const disabled = JSON.parse(event!.body);
    expect(disabled).toMatchObject({
      type: 'webhook.disabled',
      data: {
        webhook: {
          id: hook.id,
          origin: new URL(hook.url).origin,
          events: ['grant.created'],
          disabledAt: expect.any(Number),
          disabledReason: expect.stringContaining('HTTP 500'),
        },
      },
    });
    expect(JSON.stringify(disabled)).not.toContain(hook.secret);
    // The other receivers learn where it pointed, not its path: a hook URL's path may be a credential.
    expect(JSON.stringify(disabled)).not.toContain(new URL(hook.url).pathname);
    const shown = (await strictApi.get(`/v1/webhooks/${hook.id}`, { token: owner })).body.data;
    expect(shown).toMatchObject({ disabled: true, disabledAt: disabled.data.webhook.disabledAt, consecutiveFailures: 3 });
    expect(shown.disabledReason).toMatch(/^Every attempt failed since \S+ \(3 in a row\); the last: HTTP 500$/);
    expect(receiver.at('/disabled')).toHaveLength(3);

    // Nothing is sent to it while it is disabled, though the witness beside it hears the event.
    await grant(strictApi, owner, 'agent:disabled-2', lamp.id, ['set_power']);
    await waitFor(() => expect(receiver.at('/disabled-witness')).toHaveLength(2));
    expect(receiver.at('/disabled')).toHaveLength(3);
    expect(await deliveries(owner, hook.id, strictApi)).toEqual([expect.objectContaining({ status: 'pending', attempts: 3 })]);

    const metrics = await (await fetch(`${strict.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
    expect(metrics).toContain('dfc_webhooks_disabled_total 1');
    expect(metrics).toContain('dfc_webhook_attempts_total{outcome="pending"} 3');
  });

  it('sends again once the owner enables it: its pending delivery, then the events from then on', async () => {
    const owner = await strict.ownerToken('webhooks-enabled');
    const lamp = await attachDevice(strictApi, owner);
    receiver.scripts.set('/enabled', [500, 500, 500]);
    const hook = await register(owner, '/enabled', ['grant.created'], strictApi);
    await grant(strictApi, owner, 'agent:enabled-1', lamp.id, ['set_power']);
    await waitFor(async () => expect((await strictApi.get(`/v1/webhooks/${hook.id}`, { token: owner })).body.data.disabled).toBe(true));
    await grant(strictApi, owner, 'agent:enabled-while-disabled', lamp.id, ['set_power']);

    const enabled = await strictApi.post(`/v1/webhooks/${hook.id}/enable`, { token: owner });
    expect(enabled.status).toBe(200);
    expect(enabled.body.data).toMatchObject({ disabled: false, disabledAt: null, disabledReason: null, consecutiveFailures: 0, failingSince: null });
    await grant(strictApi, owner, 'agent:enabled-2', lamp.id, ['set_power']);

    await waitFor(() => expect(receiver.at('/enabled')).toHaveLength(5));
    const principals = receiver.at('/enabled').map((received) => JSON.parse(received.body).data.grant.principal);
    // The pending delivery's fourth attempt and the later event may go out together, in either order.
    expect(principals.slice(0, 3)).toEqual(['agent:enabled-1', 'agent:enabled-1', 'agent:enabled-1']);
    expect(principals.slice(3).sort()).toEqual(['agent:enabled-1', 'agent:enabled-2']);
    await waitFor(async () =>
      expect((await deliveries(owner, hook.id, strictApi)).map((d) => [d.status, d.attempts])).toEqual([
        ['delivered', 1],
        ['delivered', 4],
      ]),
    );
  });

  it('writes the same webhook.disabled event when its owner disables it, naming the owner, once', async () => {
    const owner = await strict.ownerToken('webhooks-disabled-by-hand');
    const hook = await register(owner, '/disabled-by-hand', ['grant.created'], strictApi);
    await register(owner, '/disabled-by-hand-watcher', ['webhook.disabled'], strictApi);
    expect((await strictApi.post(`/v1/webhooks/${hook.id}/disable`, { token: owner })).status).toBe(200);
    expect((await strictApi.post(`/v1/webhooks/${hook.id}/disable`, { token: owner })).status).toBe(200);

    await waitFor(() => expect(receiver.at('/disabled-by-hand-watcher')).toHaveLength(1));
    expect(JSON.parse(receiver.at('/disabled-by-hand-watcher')[0]!.body)).toMatchObject({
      type: 'webhook.disabled',
      data: { webhook: { id: hook.id, disabledAt: expect.any(Number), disabledReason: 'Disabled by webhooks-disabled-by-hand.' } },
    });
    const journal = await strict.service.db.all<{ type: string }>("SELECT type FROM workspace_events WHERE subject_id = ? AND type = 'webhook.disabled'", [
      hook.id,
    ]);
    expect(journal).toHaveLength(1);
  });

  it('changes nothing when enabling an enabled webhook, and answers 409 for a revoked one', async () => {
    const owner = await strict.ownerToken('webhooks-enable-twice');
    const hook = await register(owner, '/enable-twice', ['grant.created'], strictApi);
    const again = await strictApi.post(`/v1/webhooks/${hook.id}/enable`, { token: owner });
    expect(again.status).toBe(200);
    expect(again.body.data).toMatchObject({ id: hook.id, disabled: false, consecutiveFailures: 0 });
    expect((await strictApi.post(`/v1/webhooks/${hook.id}/revoke`, { token: owner })).status).toBe(200);
    const revoked = await strictApi.post(`/v1/webhooks/${hook.id}/enable`, { token: owner });
    expect(revoked.status).toBe(409);
    expect(revoked.body.error.code).toBe('conflict');
  });
});

/** A workspace of `count` webhooks pointed at the hanging endpoint, and events of its own for them. */
async function hangingWorkspace(instance: TestServer, target: Client, hanging: HangingReceiver, count: number, events = 2) {
  const owner = await instance.ownerToken('webhooks-hanging');
  const lamp = await attachDevice(target, owner);
  for (let i = 0; i < count; i++) await registerAt(hanging.url, owner, ['grant.created'], target);
  for (let i = 0; i < events; i++) await grant(target, owner, `agent:hanging-${i}`, lamp.id, ['set_power']);
}

/**
 * A fresh workspace's one delivery to the live receiver arrives while every hanging attempt
 * still holds its slot: none had ended (they end only at WEBHOOK_TIMEOUT_SECONDS), so the
 * delivery waited for none of them, however slowly the machine runs. The wait is bounded
 * below that timeout and within the test's own.
 */
async function arrivesWhileOthersHang(instance: TestServer, target: Client, path: string, hanging: HangingReceiver): Promise<void> {
  const owner = await instance.ownerToken(`webhooks-${path.slice(1)}`);
  const lamp = await attachDevice(target, owner);
  await register(owner, path, ['grant.created'], target);
  await grant(target, owner, `agent:${path.slice(1)}`, lamp.id, ['set_power']);
  await vi.waitFor(() => expect(receiver.at(path)).toHaveLength(1), { timeout: HANGING_FOR_MS - 10_000, interval: 50 });
  expect(hanging.ended, 'a hanging attempt had ended before the delivery arrived').toBe(0);
}

/** How long a hanging attempt holds its slot (WEBHOOK_TIMEOUT_SECONDS below). */
const HANGING_FOR_MS = 60_000;
/** A test of fair delivery sets up a hanging workspace first (on sqld, two instances): more than the default on a loaded machine. */
const FAIR_TEST_TIMEOUT_MS = 90_000;

describe('fair delivery: a workspace whose endpoints hang holds only its share of the slots', () => {
  // Attempts wait a minute for an answer: each hanging one holds its slot that long.
  const HANGING_ENV = { ...WEBHOOK_ENV, WEBHOOK_TIMEOUT_SECONDS: String(HANGING_FOR_MS / 1000) };

  it(
    'delivers another workspace’s event while 19 webhooks of one hang, waiting for none of them (one instance)',
    async () => {
      const hanging = new HangingReceiver();
      await hanging.start();
      const fair = await startTestServer({ env: HANGING_ENV });
      try {
        const fairApi = client(fair.url);
        await hangingWorkspace(fair, fairApi, hanging, 19);
        await waitFor(() => expect(hanging.open).toBe(4));

        await arrivesWhileOthersHang(fair, fairApi, '/fair-one-instance', hanging);
        // WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE (4) of the instance's 16 slots, never more.
        expect(hanging.mostOpen).toBe(4);
      } finally {
        await fair.close();
        await hanging.close();
      }
    },
    FAIR_TEST_TIMEOUT_MS,
  );

  it(
    'holds one webhook to WEBHOOK_MAX_IN_FLIGHT_PER_WEBHOOK attempts at once, however many of its deliveries are due',
    async () => {
      const hanging = new HangingReceiver();
      await hanging.start();
      const fair = await startTestServer({ env: HANGING_ENV });
      try {
        const fairApi = client(fair.url);
        await hangingWorkspace(fair, fairApi, hanging, 1, 6);
        await waitFor(() => expect(hanging.open).toBe(2));

        await arrivesWhileOthersHang(fair, fairApi, '/fair-one-webhook', hanging);
        expect(hanging.mostOpen).toBe(2);
      } finally {
        await fair.close();
        await hanging.close();
      }
    },
    FAIR_TEST_TIMEOUT_MS,
  );

  describe('with two instances on one libSQL server', () => {
    let sqld: TestSqld;
    beforeAll(async () => {
      sqld = await startSqld();
    }, 30_000);
    afterAll(() => sqld?.stop());

    it(
      'delivers another workspace’s event while the hanging workspace, held to its share across both, waits',
      async () => {
        const hanging = new HangingReceiver();
        await hanging.start();
        const env = { ...HANGING_ENV, DATABASE_URL: sqld.url };
        // One after another: the first brings the schema up to date.
        const first = await startTestServer({ env });
        const second = await startTestServer({ env });
        try {
          const firstApi = client(first.url);
          await hangingWorkspace(first, firstApi, hanging, 19);
          await waitFor(() => expect(hanging.open).toBe(4));

          await arrivesWhileOthersHang(first, firstApi, '/fair-two-instances', hanging);
          expect(hanging.mostOpen).toBe(4);
        } finally {
          await Promise.all([first.close(), second.close()]);
          await hanging.close();
        }
      },
      FAIR_TEST_TIMEOUT_MS,
    );
  });
});

describe('an event stored once for all its deliveries', () => {
  const noteManifest = {
    capabilities: [
      {
        name: 'write_note',
        kind: 'control',
        arguments: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
      },
    ],
  };

  const sized = useTestServer({ env: WEBHOOK_ENV });
  const sizedApi = sized.api;

  /** Bytes in use by the database file (pages in use times the page size). */
  async function bytesInUse(): Promise<number> {
    const row = await sized.service.db.get<{ bytes: number }>(
      'SELECT (p.page_count - f.freelist_count) * s.page_size AS bytes FROM pragma_page_count() p, pragma_freelist_count() f, pragma_page_size() s',
    );
    return row!.bytes;
  }

  /** How much one action with 14 KB of arguments adds to the database with `webhooks` webhooks, once dispatched. */
  async function growthOfOneAction(name: string, webhooks: number): Promise<{ bytes: number; eventIds: number[] }> {
    const owner = await sized.ownerToken(name);
    const { device, agent } = await grantedDevice(sizedApi, owner, { device: { manifest: noteManifest }, capabilities: ['write_note'] });
    for (let i = 0; i < webhooks; i++) await register(owner, `/${name}`, Object.keys(EVENT_TYPES), sizedApi);
    await waitFor(async () => {
      const state = await readDispatchState(sized.service.db);
      expect(state.cursor).toBe(state.newest);
    });

    const before = await bytesInUse();
    const newestBefore = (await readDispatchState(sized.service.db)).newest;
    await queue(sizedApi, agent.token, device.id, { capability: 'write_note', arguments: { text: 'x'.repeat(14_000) } });
    await waitFor(async () => {
      const state = await readDispatchState(sized.service.db);
      expect(state.newest).toBeGreaterThan(newestBefore);
      expect(state.cursor).toBe(state.newest);
    });
    const events = await sized.service.db.all<{ id: number }>('SELECT id FROM workspace_events WHERE id > ? ORDER BY id', [newestBefore]);
    return { bytes: (await bytesInUse()) - before, eventIds: events.map((event) => event.id) };
  }

  it('grows the database by about the same for one action with 20 webhooks as with none, one payload per event', async () => {
    const without = await growthOfOneAction('webhooks-size-none', 0);
    const with20 = await growthOfOneAction('webhooks-size-twenty', 20);

    const placeholders = with20.eventIds.map(() => '?').join(', ');
    const deliveryRows = await sized.service.db.get<{ n: number }>(
      `SELECT count(*) AS n FROM webhook_deliveries WHERE event_id IN (${placeholders})`,
      with20.eventIds,
    );
    expect(deliveryRows!.n).toBe(20 * with20.eventIds.length);
    const payloads = await sized.service.db.all<{ bytes: number }>(
      `SELECT length(payload) AS bytes FROM webhook_payloads WHERE event_id IN (${placeholders})`,
      with20.eventIds,
    );
    expect(payloads).toHaveLength(with20.eventIds.length);
    for (const payload of payloads) expect(payload.bytes).toBeLessThan(2 * 14_000);
    // A copy of the 14 KB per webhook would be 20 times that.
    expect(with20.bytes - without.bytes).toBeLessThan(with20.eventIds.length * 3 * 14_000);
  });

  it('lets housekeeping delete a payload once none of its deliveries is pending, and keep one that still is', async () => {
    const owner = await sized.ownerToken('webhooks-payload-retention');
    const lamp = await attachDevice(sizedApi, owner);
    receiver.scripts.set(
      '/payload-pending',
      Array.from({ length: 20 }, () => 500),
    );
    const done = await register(owner, '/payload-done', ['grant.created'], sizedApi);
    await register(owner, '/payload-pending', ['grant.revoked'], sizedApi);
    const [given] = await grant(sizedApi, owner, 'agent:payload', lamp.id, ['set_power']);
    expect((await sizedApi.post('/v1/grants/revoke', { token: owner, body: { grantId: given!.id } })).status).toBe(200);
    await waitFor(async () => expect((await deliveries(owner, done.id, sizedApi))[0]).toMatchObject({ status: 'delivered' }));
    await waitFor(() => expect(receiver.at('/payload-pending').length).toBeGreaterThan(0));
    const [created] = await deliveries(owner, done.id, sizedApi);
    // Payloads are keyed by journal id; owners are shown encrypted ids (docs/reference/event-ids.md).
    const payloadOf = async (shown: string) =>
      sized.service.db.get('SELECT event_id FROM webhook_payloads WHERE event_id = ?', [await journalIdOf(sized, lamp.workspace, shown)]);
    const revokedEvent = JSON.parse(receiver.at('/payload-pending')[0]!.body).id as string;
    expect(await payloadOf(created!.eventId)).toBeDefined();

    await runHousekeeping({ db: sized.service.db, clock: { now: () => Date.now() } });
    expect(await payloadOf(created!.eventId)).toBeUndefined();
    expect(await payloadOf(revokedEvent)).toBeDefined();
  });
});

describe('deliveries pending across migration 0023', () => {
  it('sends a delivery written before the migration with the payload it was written with', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-webhooks-0023-'));
    const db = new EmbeddedDb(path.join(dir, 'service.db'));
    await migrate(
      db,
      loadMigrations().filter((migration) => migration.version < 23),
    );
    const payload = JSON.stringify({ id: '7', type: 'grant.created', createdAt: 1, data: { grant: { id: 'before-the-migration' } } });
    await db.run(
      `INSERT INTO webhooks (id, workspace_id, url, events, secret, after_event_id, created_by, created_at)
       VALUES ('9f0c8d0e-0000-4000-8000-000000000023', 'ws-0023', ?, '["grant.created"]', ?, 0, 'owner', 1)`,
      [`${receiver.url}/migrated`, 'whsec_' + Buffer.alloc(32, 7).toString('base64')],
    );
    for (const [id, status] of [
      ['9f0c8d0e-0000-4000-8000-000000000001', 'pending'],
      ['9f0c8d0e-0000-4000-8000-000000000002', 'delivered'],
    ] as const) {
      await db.run(
        `INSERT INTO webhook_deliveries (id, webhook_id, workspace_id, event_id, event_type, payload, status, next_attempt_at, created_at)
         VALUES (?, '9f0c8d0e-0000-4000-8000-000000000023', 'ws-0023', ?, 'grant.created', ?, ?, 0, 1)`,
        [id, status === 'pending' ? 7 : 6, status === 'pending' ? payload : '{}', status],
      );
    }
    await db.close();

    const migrated = await startTestServer({ dir, env: WEBHOOK_ENV });
    try {
      await waitFor(() => expect(receiver.at('/migrated')).toHaveLength(1));
      expect(receiver.at('/migrated')[0]!.body).toBe(payload);
      expect(await migrated.service.db.all('SELECT event_id AS eventId FROM webhook_payloads')).toEqual([{ eventId: 7 }]);
    } finally {
      await migrated.close();
    }
  });
});

describe('a freed delivery slot is filled at once, not at the next poll', () => {
  // One attempt at a time for the workspace, and a poll only every 8 s: the first poll
  // claims one delivery, and only completions can claim the other four before the next.
  const slow = useTestServer({ env: { ...WEBHOOK_ENV, WEBHOOK_POLL_SECONDS: '8', WEBHOOK_MAX_IN_FLIGHT_PER_WORKSPACE: '1' } });
  const slowApi = slow.api;

  it('delivers five events to one endpoint within one poll interval', async () => {
    const owner = await slow.ownerToken('webhooks-refill');
    const lamp = await attachDevice(slowApi, owner);
    await register(owner, '/refill', ['grant.created'], slowApi);
    for (let i = 0; i < 5; i++) await grant(slowApi, owner, `agent:refill-${i}`, lamp.id, ['set_power']);
    await vi.waitFor(() => expect(receiver.at('/refill')).toHaveLength(5), { timeout: 14_000, interval: 100 });
  }, 60_000);
});

describe('claims go round the workspaces', () => {
  it('claims every workspace’s oldest due delivery before any workspace’s second, whatever their age', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-webhooks-claims-'));
    const db = new EmbeddedDb(path.join(dir, 'service.db'));
    try {
      await migrate(db);
      const deliveriesOf = async (workspaceId: string, count: number, dueFrom: number) => {
        const webhookId = randomUUID();
        await db.run(
          `INSERT INTO webhooks (id, workspace_id, url, events, secret, after_event_id, created_by, created_at)
           VALUES (?, ?, 'https://hooks.test.invalid/', '["grant.created"]', 'whsec_', 0, 'owner', 0)`,
          [webhookId, workspaceId],
        );
        for (let i = 0; i < count; i++) {
          const eventId = dueFrom + i;
          await db.run('INSERT INTO webhook_payloads (event_id, payload) VALUES (?, ?) ON CONFLICT DO NOTHING', [eventId, `{"id":"${eventId}"}`]);
          await db.run(
            `INSERT INTO webhook_deliveries (id, webhook_id, workspace_id, event_id, event_type, next_attempt_at, created_at)
             VALUES (?, ?, ?, ?, 'grant.created', ?, 0)`,
            [randomUUID(), webhookId, workspaceId, eventId, eventId],
          );
        }
      };
      // The busy workspace's ten deliveries to each of its three webhooks are all older than the others'.
      for (let i = 0; i < 3; i++) await deliveriesOf('busy', 10, 1 + i * 10);
      await deliveriesOf('quiet-a', 1, 100);
      await deliveriesOf('quiet-b', 1, 101);

      const caps = { perWebhook: 10, perWorkspace: 10 };
      const claimed = await claimDueDeliveries(db, 'lease', 1_000, 60_000, 3, caps);
      expect(claimed.map((delivery) => delivery.workspaceId).sort()).toEqual(['busy', 'quiet-a', 'quiet-b']);
      expect(claimed.find((delivery) => delivery.workspaceId === 'busy')!.payload).toBe('{"id":"1"}');
    } finally {
      await db.close();
    }
  });
});

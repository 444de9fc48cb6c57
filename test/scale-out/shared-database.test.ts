import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from '../helpers/api.js';
import { grant, next } from '../helpers/actions.js';
import { startChildService, testIdentity, type ChildService } from '../helpers/child-service.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Several instances on one libSQL server (docs/operators/scale-out.md "Scaling out"): the database is what they
 * share, and its guarded statements keep the hand-out exactly-once however the requests are
 * spread, and whichever instance dies. Agent and device credentials live in the database, so
 * any instance accepts them. Owners' sessions are checked against each instance's identity
 * provider: where the instances are given one (as a deployment is), an owner may reach any
 * instance; elsewhere each has its own key and owners talk to the first instance only.
 */

let sqld: TestSqld;
beforeAll(async () => {
  sqld = await startSqld();
}, 30_000);
afterAll(() => sqld?.stop());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

describe('POST /v1/device/{deviceId}/next with pollers on three instances of one database', () => {
  const ACTIONS = 150;
  const POLLERS_PER_INSTANCE = 3;
  const instances: TestServer[] = [];
  afterAll(() => Promise.all(instances.map((instance) => instance.close())));

  it(`hands each of ${ACTIONS} actions, requested through every instance, to exactly one poll`, async () => {
    const env = { DATABASE_URL: sqld.url, DEVICE_QUEUE_PER_PRINCIPAL: String(ACTIONS), EXPIRY_SWEEP_SECONDS: '3600' };
    // One after another: the first brings the schema up to date, the others find it so.
    for (let i = 0; i < 3; i++) instances.push(await startTestServer({ env }));
    const apis = instances.map((instance) => client(instance.url));
    const owner = await instances[0]!.ownerToken('instances-owner');
    const agent = await createAgent(apis[0]!, owner, { access: 'act' });
    const lamp = await attachDevice(apis[0]!, owner);
    await grant(apis[0]!, owner, agent.principal, lamp.id, ['set_brightness']);

    const queued: string[] = [];
    for (let batch = 0; batch < ACTIONS / 15; batch++) {
      const answers = await Promise.all(
        Array.from({ length: 15 }, (_, i) =>
          apis[i % 3]!.post(`/v1/devices/${lamp.id}/actions`, {
            token: agent.token,
            body: { capability: 'set_brightness', arguments: { level: (batch * 15 + i) % 101 }, ttlSeconds: 300 },
          }),
        ),
      );
      for (const res of answers) {
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        queued.push(res.body.data.id);
      }
    }

    const delivered: string[] = [];
    const poller = async (api: Client) => {
      for (;;) {
        const res = await next(api, lamp);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        if (res.body.data === null) return;
        delivered.push(res.body.data.id);
      }
    };
    await Promise.all(apis.flatMap((api) => Array.from({ length: POLLERS_PER_INSTANCE }, () => poller(api))));

    expect(new Set(delivered).size).toBe(delivered.length);
    expect([...delivered].sort()).toEqual([...queued].sort());
  }, 90_000);
});

describe('an instance killed (SIGKILL) under load, its clients moving to the other', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-instances-'));
  const children: ChildService[] = [];
  afterAll(async () => {
    for (const child of children) {
      if (child.process.exitCode === null && child.process.signalCode === null) {
        child.process.kill('SIGKILL');
        await child.exited;
      }
    }
  });

  it('loses no acknowledged action, doubles none, and hands none out twice', async () => {
    // Both instances trust the same identity provider, as instances of one deployment do.
    const identity = await testIdentity(dir);
    const env = { ...identity.env, DATABASE_URL: sqld.url, PORT: '0', DEVICE_QUEUE_PER_PRINCIPAL: '100000', WORKSPACE_MAX_QUEUED_ACTIONS: '100000' };
    // One after the other, as a rolling deploy starts them (concurrent starts are fine too, only slower: their migrations queue on the write lock).
    children.push(await startChildService(env));
    children.push(await startChildService(env));
    const [survivor, victim] = children as [ChildService, ChildService];
    let victimAlive = true;
    // What a load balancer does: send to the victim while it lives, then to the survivor.
    const pick = (n: number) => client(victimAlive && n % 2 === 1 ? victim.url : survivor.url);

    const owner = await identity.ownerToken('sigkill-owner');
    const agent = await createAgent(client(survivor.url), owner, { access: 'act' });
    const lamp = await attachDevice(client(survivor.url), owner);
    await grant(client(survivor.url), owner, agent.principal, lamp.id, ['set_brightness']);

    const acknowledged = new Map<string, string>(); // idempotency key → action id
    const delivered = new Map<string, number>(); // action id → times handed out
    const resultsAcknowledged = new Set<string>();
    let running = true;

    /** An agent: each request retried with its idempotency key until acknowledged. */
    const agentLoop = async (worker: number) => {
      for (let n = 0; running; n++) {
        const key = `w${worker}-${n}`;
        for (let attempt = 0; ; attempt++) {
          try {
            const res = await pick(n + attempt).post(`/v1/devices/${lamp.id}/actions`, {
              token: agent.token,
              body: { capability: 'set_brightness', arguments: { level: n % 101 }, ttlSeconds: 60, idempotencyKey: key },
            });
            if (res.status === 201) {
              const previous = acknowledged.get(key);
              if (previous !== undefined) expect(res.body.data.id).toBe(previous);
              acknowledged.set(key, res.body.data.id);
              break;
            }
            expect(res.status, JSON.stringify(res.body)).toBeLessThan(500);
          } catch {
            // The instance died under this request: retry, with the same key, elsewhere.
          }
          await sleep(10);
        }
      }
    };

    /** A device polling one instance after the other, reporting success for what it gets. */
    const deviceLoop = async (worker: number) => {
      for (let n = worker; running; n++) {
        try {
          const api = pick(n);
          const res = await next(api, lamp);
          const command = res.status === 200 ? res.body.data : null;
          if (!command) {
            await sleep(10);
            continue;
          }
          delivered.set(command.id, (delivered.get(command.id) ?? 0) + 1);
          const done = await api.post(`/v1/device/${lamp.id}/result`, { token: lamp.token, body: { actionId: command.id, ok: true, result: { level: 1 } } });
          if (done.status === 200) resultsAcknowledged.add(command.id);
        } catch {
          await sleep(10);
        }
      }
    };

    const load = [agentLoop(0), agentLoop(1), agentLoop(2), deviceLoop(0), deviceLoop(1)];
    // Until both instances have served some of the load, then the kill lands mid-load.
    while (acknowledged.size < 10 || delivered.size < 3) await sleep(50);
    victim.process.kill('SIGKILL');
    await victim.exited;
    victimAlive = false;
    const atKill = acknowledged.size;
    while (acknowledged.size < atKill + 10) await sleep(50);
    running = false;
    await Promise.all(load);

    // Whatever a result was lost for is still `received`; it will expire. The rest is checked now.
    const actions = (await client(survivor.url).get('/v1/actions/export', { token: owner })).body.data.actions as { id: string; status: string }[];
    const ids = actions.map((a) => a.id);
    const byId = new Map(actions.map((a) => [a.id, a]));
    expect(new Set(ids).size).toBe(ids.length);
    // Exactly one action per key: every acknowledged one exists, no retry made a second.
    expect(new Set(acknowledged.values()).size).toBe(acknowledged.size);
    for (const id of acknowledged.values()) expect(byId.has(id), `acknowledged action ${id} is missing`).toBe(true);
    expect(ids.length).toBe(acknowledged.size);
    expect([...delivered].filter(([, times]) => times > 1)).toEqual([]);
    for (const id of resultsAcknowledged) expect(byId.get(id)?.status, id).toBe('succeeded');
  }, 90_000);
});

describe('a workspace created on one instance', () => {
  const instances: TestServer[] = [];
  let identityDir: string;
  let identity: Awaited<ReturnType<typeof testIdentity>>;
  let first: Client;
  let second: Client;
  beforeAll(async () => {
    // One identity provider for both, as a deployment has: an owner may reach either instance.
    identityDir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-identity-'));
    identity = await testIdentity(identityDir);
    const env = { DATABASE_URL: sqld.url, ...identity.env };
    for (let i = 0; i < 2; i++) instances.push(await startTestServer({ env }));
    [first, second] = instances.map((instance) => client(instance.url)) as [Client, Client];
  }, 30_000);
  afterAll(async () => {
    await Promise.all(instances.map((instance) => instance.close()));
    if (identityDir) fs.rmSync(identityDir, { recursive: true, force: true });
  });

  it('is one workspace when the first requests of its owner reach two instances at once', async () => {
    for (let round = 0; round < 5; round++) {
      const owner = await identity.ownerToken(`racing-owner-${round}-${Date.now()}`);
      const answers = await Promise.all([first.get('/v1/account', { token: owner }), second.get('/v1/account', { token: owner })]);
      for (const res of answers) expect(res.status, JSON.stringify(res.body)).toBe(200);
      expect(answers[0].body.data.workspaceId).toBe(answers[1].body.data.workspaceId);
    }
  });

  it('is usable through another instance at once, by its owner, its devices and its agents', async () => {
    const owner = await identity.ownerToken(`new-workspace-${Date.now()}`);

    // The owner's first request, on the first instance, creates the workspace.
    const agent = await createAgent(first, owner, { access: 'act' });
    const listed = await second.get('/v1/agent-connections', { token: owner });
    expect(listed.status, JSON.stringify(listed.body)).toBe(200);
    expect(listed.body.data.map((connection: { id: string }) => connection.id)).toEqual([agent.id]);

    const lamp = await attachDevice(second, owner);
    await grant(second, owner, agent.principal, lamp.id, ['set_brightness']);
    const queued = await first.post(`/v1/devices/${lamp.id}/actions`, {
      token: agent.token,
      body: { capability: 'set_brightness', arguments: { level: 40 } },
    });
    expect(queued.status, JSON.stringify(queued.body)).toBe(201);
    const handed = await next(second, lamp);
    expect(handed.body.data?.id).toBe(queued.body.data.id);
    const reported = await second.post(`/v1/device/${lamp.id}/result`, {
      token: lamp.token,
      body: { actionId: queued.body.data.id, ok: true, result: { level: 40 } },
    });
    expect(reported.status, JSON.stringify(reported.body)).toBe(200);
    const read = await first.get(`/v1/actions/${queued.body.data.id}`, { token: agent.token });
    expect(read.body.data.status).toBe('succeeded');
  }, 60_000);
});

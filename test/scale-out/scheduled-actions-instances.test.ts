import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant, next, requestAction } from '../helpers/actions.js';
import { client, type Client } from '../helpers/api.js';
import { startChildService, testIdentity, type ChildService } from '../helpers/child-service.js';
import { attachDevice, createAgent, type Agent, type AttachedDevice } from '../helpers/fixtures.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * Scheduled actions (docs/agents/actions.md "Scheduling") with two instances on one libSQL
 * server and no shared bus: each instance learns what the other scheduled from its slow read of
 * the earliest due time, both try to move each due action, and the guarded move lets one win.
 * An action becomes due once, within 1 s of its notBefore, even when the instance that
 * scheduled it was killed before then.
 */

/** How far ahead the actions are scheduled: past the other instance's next read of the earliest due time (every 5 s). */
const AHEAD_MS = 7_000;

let sqld: TestSqld;
beforeAll(async () => {
  sqld = await startSqld();
}, 30_000);
afterAll(() => sqld?.stop());

/** The moves the instance's scheduler logged: how many scheduled actions it made due. */
const movedIn = (lines: string[]) =>
  lines.filter((line) => line.includes('"scheduled actions due"')).reduce((sum, line) => sum + (JSON.parse(line) as { moved: number }).moved, 0);

/**
 * Polls each action until it leaves `scheduled`; answers, per action, how long after its
 * notBefore it was seen queued (an upper bound: one poll round later at most).
 */
async function lateness(api: Client, token: string, ids: string[], due: number): Promise<number[]> {
  const seen = new Map<string, number>();
  const deadline = due + 10_000;
  while (seen.size < ids.length && Date.now() < deadline) {
    for (const id of ids) {
      if (seen.has(id)) continue;
      const res = await api.get(`/v1/actions/${id}`, { token });
      if (res.body.data.status !== 'scheduled') {
        expect(res.body.data.status).toBe('queued');
        seen.set(id, Date.now() - due);
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  expect(seen.size, 'every action became due').toBe(ids.length);
  return ids.map((id) => seen.get(id)!);
}

/** Everything the device is handed, until nothing is left. */
async function drain(api: Client, lamp: AttachedDevice): Promise<string[]> {
  const handed: string[] = [];
  for (;;) {
    const res = await next(api, lamp);
    if (!res.body.data) return handed;
    handed.push(res.body.data.id as string);
  }
}

async function schedule(api: Client, agent: Agent, lamp: AttachedDevice, due: number, level: number): Promise<string> {
  const res = await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level }, notBefore: due, ttlSeconds: 60 });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  expect(res.body.data.status).toBe('scheduled');
  return res.body.data.id as string;
}

describe('scheduled actions on two instances of one database', () => {
  const instances: TestServer[] = [];
  afterAll(() => Promise.all(instances.map((instance) => instance.close())));

  it('makes each due exactly once, within 1 s of notBefore, whichever instance scheduled it', async () => {
    // One after another: the first brings the schema up to date, the other finds it so.
    for (let i = 0; i < 2; i++) instances.push(await startTestServer({ env: { DATABASE_URL: sqld.url } }));
    const apis = instances.map((instance) => client(instance.url));
    const owner = await instances[0]!.ownerToken('scheduled-instances-owner');
    const agent = await createAgent(apis[0]!, owner);
    const lamp = await attachDevice(apis[0]!, owner);
    await grant(apis[0]!, owner, agent.principal, lamp.id, ['set_brightness']);

    const due = Date.now() + AHEAD_MS;
    const ids: string[] = [];
    for (let i = 0; i < 10; i++) ids.push(await schedule(apis[i % 2]!, agent, lamp, due, i));

    const late = await lateness(apis[1]!, agent.token, ids, due);
    expect(Math.max(...late), `ms after notBefore: ${late.join(', ')}`).toBeLessThan(1000);
    // Both instances tried; the guarded move let exactly one move each action.
    expect(movedIn(instances[0]!.logs) + movedIn(instances[1]!.logs)).toBe(ids.length);
    expect((await drain(apis[0]!, lamp)).sort()).toEqual([...ids].sort());
  }, 90_000);
});

describe('the instance that scheduled them is killed before they are due', () => {
  let dir: string;
  let child: ChildService | undefined;
  let other: TestServer | undefined;
  beforeAll(() => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-scheduled-kill-'));
  });
  afterAll(async () => {
    if (child && child.process.exitCode === null && child.process.signalCode === null) {
      child.process.kill('SIGKILL');
      await child.exited;
    }
    await other?.close();
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('the other instance makes them due, within 1 s of notBefore', async () => {
    other = await startTestServer({ env: { DATABASE_URL: sqld.url } });
    const identity = await testIdentity(dir);
    child = await startChildService({ ...identity.env, DATABASE_URL: sqld.url, PORT: '0' });
    const otherApi = client(other.url);
    const owner = await other.ownerToken('scheduled-kill-owner');
    const agent = await createAgent(otherApi, owner);
    const lamp = await attachDevice(otherApi, owner);
    await grant(otherApi, owner, agent.principal, lamp.id, ['set_brightness']);

    const due = Date.now() + AHEAD_MS;
    const childApi = client(child.url);
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await schedule(childApi, agent, lamp, due, i));
    child.process.kill('SIGKILL');
    expect((await child.exited).signal).toBe('SIGKILL');

    const late = await lateness(otherApi, agent.token, ids, due);
    expect(Math.max(...late), `ms after notBefore: ${late.join(', ')}`).toBeLessThan(1000);
    expect(movedIn(other.logs)).toBe(ids.length);
    expect((await drain(otherApi, lamp)).sort()).toEqual([...ids].sort());
  }, 90_000);
});

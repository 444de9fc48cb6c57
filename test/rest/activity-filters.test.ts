import { beforeAll, describe, expect, it } from 'vitest';
import { grant, queue } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { RELAXED_LIMITS, useTestServer } from '../helpers/server.js';

/**
 * The owner's history list, `GET /v1/actions` (docs/owners/activity-log.md): its filters (device,
 * agent, function, status, creation time range) narrow the whole history in the database, and
 * its pages are cut after the filter, so a narrow filter still reaches old matches.
 */

const clock = manualClock(Date.UTC(2026, 10, 1));
let owner: string;
let lamp: AttachedDevice;
let fan: AttachedDevice;
let alice: { token: string; principal: string };
let bob: { token: string; principal: string };
/** When the second half of the history began: every action from then on is newer. */
let secondHalf: number;

type Listed = { id: string; deviceId: string; principal: string; capability: string; status: string; createdAt: number };

async function list(query: string): Promise<{ data: Listed[]; next: string | null }> {
  const res = await api.get(`/v1/actions?${query}`, { token: owner });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
  const link = res.headers.get('link');
  const next = link ? new URL(/<([^>]+)>/.exec(link)![1]!, server.url).searchParams.get('cursor') : null;
  return { data: res.body.data, next };
}

const server = useTestServer({ clock, env: { ...RELAXED_LIMITS, DEVICE_QUEUE_PER_PRINCIPAL: '1000' } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('activity-owner');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  fan = await attachDevice(api, owner, { name: 'Fan' });
  alice = await createAgent(api, owner, { name: 'Alice' });
  bob = await createAgent(api, owner, { name: 'Bob' });
  for (const agent of [alice, bob]) for (const device of [lamp, fan]) await grant(api, owner, agent.principal, device.id, ['get_state', 'set_power']);
  // 120 actions, one a second: alice on the lamp for most of them, one of bob's on the fan every tenth.
  for (let i = 0; i < 120; i++) {
    if (i === 60) secondHalf = clock.now();
    const [agent, device] = i % 10 === 0 ? [bob, fan] : [alice, lamp];
    await queue(api, agent.token, device.id, i % 2 === 0 ? { capability: 'get_state', arguments: {} } : { capability: 'set_power', arguments: { on: true } });
    clock.advance(1000);
  }
});

describe('GET /v1/actions filters the whole history, not one page of it', () => {
  it('keeps only the device, agent and function asked for, newest first, reaching past the newest 100 actions', async () => {
    const { data, next } = await list(`deviceId=${fan.id}&principal=${encodeURIComponent(bob.principal)}&capability=get_state`);
    expect(data).toHaveLength(12);
    expect(next).toBeNull();
    expect(data.every((a) => a.deviceId === fan.id && a.principal === bob.principal && a.capability === 'get_state')).toBe(true);
    expect(data.map((a) => a.createdAt)).toEqual([...data.map((a) => a.createdAt)].sort((x, y) => y - x));
  });

  it('keeps a creation time range, since included and until excluded', async () => {
    const { data } = await list(`since=${secondHalf}&until=${secondHalf + 10_000}`);
    expect(data.map((a) => a.createdAt)).toEqual(Array.from({ length: 10 }, (_, i) => secondHalf + (9 - i) * 1000));
  });

  it('keeps a status together with the other filters', async () => {
    // The deadlines of the older ones (30 s) have passed: some are expired, the newest still queued.
    const all = (await list(`deviceId=${lamp.id}&capability=set_power`)).data;
    expect(all).toHaveLength(60);
    const { data } = await list(`status=queued&deviceId=${lamp.id}&capability=set_power`);
    expect(data.length).toBeGreaterThan(0);
    expect(data.map((a) => a.id)).toEqual(all.filter((a) => a.status === 'queued').map((a) => a.id));
  });
});

describe('GET /v1/actions pages through filtered results with its cursor', () => {
  it('walks every match once, in order, a page at a time', async () => {
    const seen: Listed[] = [];
    let query = `principal=${encodeURIComponent(alice.principal)}&limit=25`;
    for (;;) {
      const { data, next } = await list(query);
      seen.push(...data);
      if (!next) break;
      query = `principal=${encodeURIComponent(alice.principal)}&limit=25&cursor=${encodeURIComponent(next)}`;
    }
    expect(seen).toHaveLength(108);
    expect(new Set(seen.map((a) => a.id)).size).toBe(108);
    expect(seen.every((a) => a.principal === alice.principal)).toBe(true);
  });

  it('still answers the most recent 100 actions without a filter', async () => {
    const { data, next } = await list('');
    expect(data).toHaveLength(100);
    expect(next).not.toBeNull();
  });
});

describe('GET /v1/actions refuses bad filters with 400 at the field', () => {
  it.each([
    ['deviceId=lamp', 'deviceId'],
    ['capability=Not%20a%20function', 'capability'],
    ['since=yesterday', 'since'],
    ['since=', 'since'],
    ['since=1e3', 'since'],
    ['until=0x10', 'until'],
    ['until=-5', 'until'],
    ['since=2000&until=1000', 'until'],
    ['status=done', 'status'],
    ['colour=red', 'colour'],
  ])('%s', async (query, field) => {
    const res = await api.get(`/v1/actions?${query}`, { token: owner });
    expect(res.status).toBe(400);
    expect(res.body.error.issues.map((issue: { path: string }) => issue.path)).toContain(field);
  });
});

describe('the OpenAPI document names the history filters', () => {
  it('lists each filter as a query parameter of GET /v1/actions', async () => {
    const res = await api.get('/openapi.json');
    const names = (res.body.paths['/v1/actions'].get.parameters as { name: string; in: string }[]).filter((p) => p.in === 'query').map((p) => p.name);
    expect(names).toEqual(expect.arrayContaining(['status', 'deviceId', 'principal', 'capability', 'since', 'until', 'limit', 'cursor']));
  });
});

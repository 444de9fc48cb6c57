import { describe, expect, it } from 'vitest';
import { grant, next, queue, report } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

const clock = manualClock();
let agent: { token: string; principal: string };

const server = useTestServer({ clock });
const api = server.api;

/** A fresh workspace with one granted lamp, so each test sees only its own history. */
async function workspace(name: string): Promise<{ owner: string; lamp: AttachedDevice }> {
  const owner = await server.ownerToken(name);
  const lamp = await attachDevice(api, owner);
  agent = await createAgent(api, owner, { access: 'act' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_brightness']);
  return { owner, lamp };
}

async function drain(lamp: AttachedDevice) {
  while ((await next(api, lamp)).body.data !== null);
}

describe('GET /v1/actions', () => {
  it('returns the newest 100 of 105 actions, newest first', async () => {
    const { owner, lamp } = await workspace('history-100');
    const ids: string[] = [];
    for (let i = 0; i < 105; i++) {
      ids.push((await queue(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: i % 100 } })).id);
      if (i % 2 === 0) clock.advance(1); // some share a millisecond: order must still hold
      if (i % 20 === 19) await drain(lamp); // a principal holds at most 20 queued actions per device
    }
    const res = await api.get('/v1/actions', { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.data).toHaveLength(100);
    expect(res.body.data.map((a: any) => a.id)).toEqual(ids.slice(5).reverse());
    expect(res.body.data[0].arguments).toEqual({ level: 4 });
    // The older five are the next page, linked from this one.
    const link = /^<([^>]+)>; rel="next"$/.exec(res.headers.get('link') ?? '');
    expect(link).not.toBeNull();
    const rest = await api.get(link![1]!, { token: owner });
    expect(rest.body.data.map((a: any) => a.id)).toEqual(ids.slice(0, 5).reverse());
    expect(rest.headers.get('link')).toBeNull();
  });

  it('shows the current status, with expired deadlines brought up to date', async () => {
    const { owner, lamp } = await workspace('history-status');
    const done = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    await next(api, lamp);
    await report(api, lamp, { actionId: done.id, ok: true, result: { on: true } });
    const stale = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 1 });
    clock.advance(1000);
    const list = (await api.get('/v1/actions', { token: owner })).body.data;
    expect(list.map((a: any) => [a.id, a.status])).toEqual([
      [stale.id, 'expired'],
      [done.id, 'succeeded'],
    ]);
    expect(list[1].result).toEqual({ on: true });
  });

  it('answers 403 to an agent token and 400 to unknown query parameters', async () => {
    const { owner } = await workspace('history-access');
    expect((await api.get('/v1/actions', { token: agent.token })).status).toBe(403);
    expect((await api.get('/v1/actions?offset=5', { token: owner })).status).toBe(400);
  });
});

describe('GET /v1/actions/export', () => {
  it('exports every action oldest first with generatedAt and count', async () => {
    const { owner, lamp } = await workspace('export-all');
    const ids: string[] = [];
    for (let i = 0; i < 105; i++) {
      ids.push((await queue(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: i % 100 } })).id);
      if (i % 20 === 19) await drain(lamp); // a principal holds at most 20 queued actions per device
    }
    const res = await api.get('/v1/actions/export', { token: owner });
    expect(res.status).toBe(200);
    expect(res.body.data.generatedAt).toBe(clock.now());
    expect(res.body.data.count).toBe(105);
    expect(res.body.data.actions.map((a: any) => a.id)).toEqual(ids);
  });

  it('filters by creation time: since is inclusive, until exclusive (Unix ms)', async () => {
    const { owner, lamp } = await workspace('export-window');
    const t0 = clock.now();
    const a = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    clock.advance(10);
    const b = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    clock.advance(10);
    const c = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const ids = async (query: string) => {
      const res = await api.get(`/v1/actions/export${query}`, { token: owner });
      expect(res.status, query).toBe(200);
      expect(res.body.data.count).toBe(res.body.data.actions.length);
      return res.body.data.actions.map((x: any) => x.id);
    };
    expect(await ids(`?since=${t0 + 10}`)).toEqual([b.id, c.id]);
    expect(await ids(`?until=${t0 + 20}`)).toEqual([a.id, b.id]);
    expect(await ids(`?since=${t0 + 10}&until=${t0 + 20}`)).toEqual([b.id]);
    expect(await ids(`?since=${t0 + 21}`)).toEqual([]);
    expect(await ids(`?since=${t0}&until=${t0}`)).toEqual([]);
  });

  it('streams the same document as NDJSON: the other fields first, one action a line, the count last', async () => {
    const { owner, lamp } = await workspace('export-ndjson');
    const t0 = clock.now();
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) {
      ids.push((await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} })).id);
      clock.advance(5);
    }
    const json = await api.get(`/v1/actions/export?since=${t0 + 5}`, { token: owner });
    expect(json.headers.get('content-type')).toMatch(/^application\/json/);
    const res = await fetch(`${server.url}/v1/actions/export?since=${t0 + 5}`, {
      headers: { authorization: `Bearer ${owner}`, accept: 'application/x-ndjson' },
    });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toBe('application/x-ndjson');
    const text = await res.text();
    expect(text.endsWith('\n')).toBe(true);
    const lines = text
      .trimEnd()
      .split('\n')
      .map((line) => JSON.parse(line));
    expect(lines[0]).toEqual({ generatedAt: json.body.data.generatedAt });
    expect(lines.slice(1, -1)).toEqual(json.body.data.actions);
    expect(lines.slice(1, -1).map((a: any) => a.id)).toEqual(ids.slice(1));
    expect(lines.at(-1)).toEqual({ count: 3 });
    expect(json.body.data.count).toBe(3);
  });

  it('answers an empty history as an empty, valid document', async () => {
    const { owner } = await workspace('export-empty');
    const res = await api.get('/v1/actions/export', { token: owner });
    expect(res.body).toEqual({ data: { generatedAt: clock.now(), count: 0, actions: [] } });
  });

  it('answers 400 for a since or until that is not a non-negative integer, and 403 to an agent', async () => {
    const { owner } = await workspace('export-bad');
    for (const query of ['?since=yesterday', '?until=-1', '?since=1.5']) {
      const res = await api.get(`/v1/actions/export${query}`, { token: owner });
      expect(res.status, query).toBe(400);
    }
    expect((await api.get('/v1/actions/export', { token: agent.token })).status).toBe(403);
  });
});

import { describe, expect, it } from 'vitest';
import { grant, queue } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, createSetupToken } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

const clock = manualClock();

const server = useTestServer({ clock });
const api = server.api;

/** The path and query of a `Link: <…>; rel="next"` header, or null. */
function nextOf(link: string | null): string | null {
  if (link === null) return null;
  const match = /^<([^>]+)>; rel="next"$/.exec(link);
  expect(match, link).not.toBeNull();
  return match![1]!;
}

/** Follows the next links from `first`, calling `between` after each page; every page's ids, in order. */
async function walk(token: string, first: string, idOf: (item: any) => string, between: () => Promise<void> = async () => {}): Promise<string[][]> {
  const pages: string[][] = [];
  let path: string | null = first;
  while (path !== null) {
    const res = await api.get(path, { token });
    expect(res.status, JSON.stringify(res.body)).toBe(200);
    pages.push(res.body.data.map(idOf));
    path = nextOf(res.headers.get('link'));
    await between();
  }
  return pages;
}

const CALLBACK = 'https://client.example/callback';

describe('list paging', () => {
  it('pages every list endpoint: each item exactly once, in the order of one large page, no link on the last page', async () => {
    const owner = await server.ownerToken('paging-all');
    const devices = [];
    for (let i = 0; i < 3; i++) devices.push(await attachDevice(api, owner, { name: `Lamp ${i}` }));
    const agent = await createAgent(api, owner, { access: 'act' });
    await createAgent(api, owner, { access: 'read' });
    for (const d of devices) await grant(api, owner, agent.principal, d.id, ['get_state', 'set_brightness']);
    for (let i = 0; i < 3; i++) {
      const res = await api.post('/v1/oauth-clients', { token: owner, body: { name: `c${i}`, redirectUris: [CALLBACK], public: true } });
      expect(res.status).toBe(201);
    }
    for (let i = 0; i < 5; i++) await queue(api, agent.token, devices[i % 3]!.id, { capability: 'get_state', arguments: {} });

    const lists: [string, string, (item: any) => string][] = [
      ['/v1/device-setup-tokens', owner, (x) => x.id],
      ['/v1/sdk-tokens', owner, (x) => x.id],
      ['/v1/agent-connections', owner, (x) => x.id],
      ['/v1/oauth-clients', owner, (x) => x.id],
      ['/v1/devices', owner, (x) => x.id],
      ['/v1/devices', agent.token, (x) => x.id],
      ['/v1/grants', owner, (x) => x.id],
      [`/v1/grants?principal=${encodeURIComponent(agent.principal)}`, owner, (x) => x.id],
      ['/v1/functions', owner, (x) => `${x.deviceId}/${x.capability}`],
      ['/v1/functions', agent.token, (x) => `${x.deviceId}/${x.capability}`],
      ['/v1/actions', owner, (x) => x.id],
    ];
    for (const [path, token, idOf] of lists) {
      const whole = await api.get(`${path}${path.includes('?') ? '&' : '?'}limit=1000`, { token });
      expect(whole.status, path).toBe(200);
      expect(whole.headers.get('link'), path).toBeNull();
      const all = whole.body.data.map(idOf);
      expect(all.length, path).toBeGreaterThanOrEqual(3);
      const pages = await walk(token, `${path}${path.includes('?') ? '&' : '?'}limit=2`, idOf);
      expect(pages.flat(), path).toEqual(all);
      expect(pages.every((page) => page.length > 0 && page.length <= 2)).toBe(true);
      // The link keeps the request's own path (a legacy alias links to itself) and its other parameters.
      const first = await api.get(`${path}${path.includes('?') ? '&' : '?'}limit=2`, { token });
      const next = nextOf(first.headers.get('link'))!;
      expect(next.startsWith(`${path.split('?')[0]}?`), path).toBe(true);
      expect(new URL(next, server.url).searchParams.get('limit')).toBe('2');
    }
  });

  it('stays stable under inserts between pages: every earlier item once, newer ones never shift a page', async () => {
    const owner = await server.ownerToken('paging-inserts');
    const before = [];
    for (let i = 0; i < 6; i++) {
      before.push((await createSetupToken(api, owner, { name: `t${i}` })).id);
      clock.advance(1);
    }
    let inserted = 0;
    const pages = await walk(
      owner,
      '/v1/device-setup-tokens?limit=2',
      (x) => x.id,
      async () => {
        // Newest first: a token created now sorts before every cursor, so it belongs to no later page.
        await createSetupToken(api, owner, { name: `late${inserted++}` });
      },
    );
    expect(pages.flat()).toEqual([...before].reverse());
  });

  it('takes limit 1 to 1000, 100 by default; refuses an invalid cursor and one of another list or workspace', async () => {
    const owner = await server.ownerToken('paging-limits');
    const other = await server.ownerToken('paging-limits-other');
    for (let i = 0; i < 3; i++) await createSetupToken(api, owner, { name: `t${i}` });
    await createSetupToken(api, other, { name: 'theirs' });
    await createSetupToken(api, other, { name: 'theirs too' });

    for (const limit of ['0', '1001', '-1', '2.5', 'x']) {
      const res = await api.get(`/v1/device-setup-tokens?limit=${limit}`, { token: owner });
      expect(res.status, limit).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.issues.map((i: any) => i.path)).toEqual(['limit']);
    }
    expect((await api.get('/v1/device-setup-tokens?limit=1', { token: owner })).body.data).toHaveLength(1);
    expect((await api.get('/v1/device-setup-tokens?limit=1000', { token: owner })).body.data).toHaveLength(3);
    expect((await api.get('/v1/device-setup-tokens', { token: owner })).headers.get('link')).toBeNull();

    const theirs = nextOf((await api.get('/v1/device-setup-tokens?limit=1', { token: other })).headers.get('link'))!;
    const theirCursor = new URL(theirs, server.url).searchParams.get('cursor')!;
    const mine = nextOf((await api.get('/v1/device-setup-tokens?limit=1', { token: owner })).headers.get('link'))!;
    const myCursor = new URL(mine, server.url).searchParams.get('cursor')!;
    const forged = Buffer.from(JSON.stringify(['setupTokens.list', 'x', 'not a number', 1])).toString('base64url');
    for (const [path, why] of [
      [`/v1/device-setup-tokens?cursor=${theirCursor}`, 'another workspace'],
      [`/v1/agent-connections?cursor=${myCursor}`, 'another list'],
      ['/v1/device-setup-tokens?cursor=not-base64!', 'garbage'],
      [`/v1/device-setup-tokens?cursor=${forged}`, 'forged'],
      [`/v1/actions?cursor=${myCursor}`, 'another list'],
    ] as const) {
      const res = await api.get(path, { token: owner });
      expect(res.status, why).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(
        res.body.error.issues.map((i: any) => i.path),
        why,
      ).toEqual(['cursor']);
      expect(JSON.stringify(res.body), why).not.toContain('theirs');
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { FairCache } from '../../src/domain/fair-cache.js';
import { createMemoryRateLimiter } from '../../src/domain/rate-limits.js';
import { TOOLS_LIST_BOUNDS } from '../../src/mcp/tools-list-cache.js';
import { createAgent } from '../helpers/fixtures.js';
import { rawMcp } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * No tenant's load evicts another tenant's remembered state (docs/operators/security.md
 * "Memory every tenant shares"): the in-memory rate-limit buckets are bounded per workspace,
 * a workspace over its bound loses its own least recently used buckets, and over the total
 * the largest workspace loses first, never one under its fair share.
 *
 * The rate limits: the service runs with the production bucket logic and small bounds (8 per workspace, 32 in
 * all), on a clock that stands still so that a drained bucket stays drained: a bystander's
 * drained bucket that came back full would be the sign of its eviction.
 */

const now = 1_800_000_000_000;
const METRICS_TOKEN = 'metrics-secret-for-tenant-caches-0123';
const server = useTestServer({
  clock: { now: () => now },
  env: { RATE_LIMIT_AGENT_PER_SECOND: '1', RATE_LIMIT_AGENT_BURST: '3', METRICS_TOKEN },
  rateLimiter: createMemoryRateLimiter({ bounds: { perPartition: 8, total: 32 } }),
});
const http = server.api;

let bystander: string;
const read = (token: string) => http.get('/v1/functions', { token });

beforeAll(async () => {
  const owner = await server.ownerToken('bystander');
  bystander = (await createAgent(http, owner, { access: 'read' })).token;
  for (let i = 0; i < 3; i++) expect((await read(bystander)).status).toBe(200);
  expect((await read(bystander)).status).toBe(429);
});

/** A workspace of `agents` agent connections, each of which makes one request (one bucket each). */
async function flood(workspace: string, agents: number) {
  const owner = await server.ownerToken(workspace);
  for (let i = 0; i < agents; i++) {
    const agent = await createAgent(http, owner, { name: `flood-${i}`, access: 'read' });
    expect((await read(agent.token)).status).toBe(200);
  }
}

describe('rate-limit buckets under another tenant’s load', () => {
  it('one workspace making more buckets than its bound evicts only its own: a bystander’s drained bucket stays drained', async () => {
    await flood('flooder', 40);
    expect((await read(bystander)).status).toBe(429);
  });

  it('many workspaces together over the total evict from the largest first, never a bystander under its fair share', async () => {
    for (let w = 0; w < 8; w++) await flood(`crowd-${w}`, 8);
    expect((await read(bystander)).status).toBe(429);
  });
});

/** How many tools/list answers came from the cache so far (`dfc_mcp_messages_total`). */
async function cachedLists(): Promise<number> {
  const text = await (await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();
  const line = text.split('\n').find((l) => l.startsWith('dfc_mcp_messages_total{') && l.includes('method="tools/list"') && l.includes('answered_by="cache"'));
  return line ? Number(line.split(' ').at(-1)) : 0;
}

const listTools = async (token: string) => {
  const res = await rawMcp(server.url, { token, method: 'tools/list' });
  expect(res.status, res.text).toBe(200);
};

describe('the cached tools/list under another tenant’s load', () => {
  it('one workspace listing as more callers than the whole cache holds evicts only its own lists: a bystander’s next list is still a hit', async () => {
    const owner = await server.ownerToken('lister');
    const agent = await createAgent(http, owner, { name: 'lister', access: 'read' });
    await listTools(agent.token);
    const before = await cachedLists();
    await listTools(agent.token);
    expect(await cachedLists()).toBe(before + 1);
    // More callers than the whole cache holds, all in one other workspace (the production bounds).
    const flooder = await server.ownerToken('list-flooder');
    const callers = Array.from({ length: TOOLS_LIST_BOUNDS.total + 1 }, (_, i) => i);
    for (let i = 0; i < callers.length; i += 20) {
      await Promise.all(
        callers.slice(i, i + 20).map(async (n) => listTools((await createAgent(http, flooder, { name: `lister-${n}`, access: 'read' })).token)),
      );
    }
    const afterFlood = await cachedLists();
    await listTools(agent.token);
    expect(await cachedLists()).toBe(afterFlood + 1);
  }, 180_000);
});

describe('FairCache', () => {
  it('a partition over its bound loses its own least recently used entry, nobody else’s', () => {
    const cache = new FairCache<number>({ perPartition: 2, total: 100 });
    cache.set('bystander', 'b', 1);
    cache.set('flood', 'x1', 1);
    cache.set('flood', 'x2', 1);
    cache.get('flood', 'x1');
    cache.set('flood', 'x3', 1);
    expect([cache.peek('flood', 'x1'), cache.peek('flood', 'x2'), cache.peek('flood', 'x3')]).toEqual([1, undefined, 1]);
    expect(cache.peek('bystander', 'b')).toBe(1);
  });

  it('over the total, the heaviest partition loses first, and one under its fair share never does', () => {
    const cache = new FairCache<number>({ perPartition: 50, total: 12 }, (value) => value);
    cache.set('bystander', 'b', 2);
    for (let i = 0; i < 30; i++) cache.set(`flood-${i % 3}`, `k${i}`, 1 + (i % 2));
    expect(cache.weight).toBeLessThanOrEqual(12);
    expect(cache.peek('bystander', 'b')).toBe(2);
    // The three flooding partitions share what is left about evenly.
    const shares = [0, 1, 2].map((i) => cache.partitionWeight(`flood-${i}`));
    expect(Math.max(...shares) - Math.min(...shares)).toBeLessThanOrEqual(2);
  });

  it('an entry heavier than a partition’s bound is not kept and costs no other entry', () => {
    const cache = new FairCache<number>({ perPartition: 5, total: 10 }, (value) => value);
    cache.set('a', 'small', 3);
    cache.set('a', 'huge', 6);
    expect(cache.peek('a', 'huge')).toBeUndefined();
    expect(cache.peek('a', 'small')).toBe(3);
    expect(cache.size).toBe(1);
  });
});

import v8 from 'node:v8';
import vm from 'node:vm';
import { beforeAll, describe, expect, it } from 'vitest';
import { MAX_ARGUMENT_ISSUES, VALIDATOR_CACHE_SIZE } from '../../src/domain/argument-schemas.js';
import { client, type ApiResponse, type Client } from '../helpers/api.js';
import { grant, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { startTestServer, useTestServer } from '../helpers/server.js';

/**
 * Device argument schemas are untrusted input: refused at publish when they
 * could escape the schema, run asynchronously or cost more than the budget; patterns run on a
 * linear-time engine; each schema is compiled on its own. Every hostile case has a normal one
 * beside it, against a real server.
 */
let owner: string;
let agent: { token: string; principal: string };

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('schemas-owner');
  agent = await createAgent(api, owner, { access: 'act' });
});

const fn = (args: Record<string, unknown>, name = 'run') => ({ capabilities: [{ name, kind: 'control', arguments: args }] });

async function publish(device: AttachedDevice, args: Record<string, unknown>, a: Client = api): Promise<ApiResponse> {
  return a.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: fn(args) });
}

/** A device whose one function `run` takes `args`, granted to the agent. */
async function deviceWith(args: Record<string, unknown>): Promise<AttachedDevice> {
  const device = await attachDevice(api, owner, { manifest: fn(args) });
  await grant(api, owner, agent.principal, device.id, ['run']);
  return device;
}

const call = (device: AttachedDevice, args: unknown, a: Client = api, token = agent.token) =>
  requestAction(a, token, device.id, { capability: 'run', arguments: args });

function expectRefused(res: ApiResponse, path: string) {
  expect(res.status, JSON.stringify(res.body)).toBe(400);
  expect(res.body.error.code).toBe('validation_failed');
  expect(res.body.error.issues.map((i: { path: string }) => i.path)).toContain(path);
}

/** `depth` levels of anyOf, two branches each, around a string rule. */
function nestedAnyOf(depth: number): Record<string, unknown> {
  return depth === 0 ? { type: 'string', minLength: 3 } : { anyOf: [nestedAnyOf(depth - 1), nestedAnyOf(depth - 1)] };
}

describe('argument schemas: dialects', () => {
  it('validates with JSON Schema 2020-12 by default and draft-07 when $schema names it', async () => {
    const modern = await deviceWith({
      type: 'object',
      properties: { xy: { type: 'array', prefixItems: [{ type: 'number' }, { type: 'number' }], items: false } },
    });
    expect((await call(modern, { xy: [1, 2] })).status).toBe(201);
    expectRefused(await call(modern, { xy: [1, 2, 3] }), 'arguments.xy');

    const draft07 = await deviceWith({
      $schema: 'http://json-schema.org/draft-07/schema#',
      type: 'object',
      properties: { xy: { type: 'array', items: [{ type: 'number' }, { type: 'number' }], additionalItems: false } },
    });
    expect((await call(draft07, { xy: [1, 2] })).status).toBe(201);
    expectRefused(await call(draft07, { xy: [1, 2, 3] }), 'arguments.xy');
  });

  it('refuses a $schema it does not run', async () => {
    const device = await attachDevice(api, owner, { manifest: null });
    expectRefused(await publish(device, { $schema: 'http://json-schema.org/draft-04/schema#', type: 'object' }), 'capabilities.0.arguments.$schema');
  });
});

describe('argument schemas: refused at publish', () => {
  const cases: [string, Record<string, unknown>, string][] = [
    ['$async', { $async: true, type: 'object' }, '$async'],
    ['a remote $ref', { type: 'object', properties: { x: { $ref: 'https://example.com/schema.json' } } }, 'properties.x.$ref'],
    ['a relative-file $ref', { type: 'object', properties: { x: { $ref: 'other.json#/a' } } }, 'properties.x.$ref'],
    ['a $ref naming nothing', { type: 'object', properties: { x: { $ref: '#/$defs/missing' } } }, 'properties.x.$ref'],
    ['an $id inside the schema', { type: 'object', properties: { x: { $id: 'https://example.com/x', type: 'string' } } }, 'properties.x.$id'],
    ['an $anchor that reads as a URI', { type: 'object', properties: { x: { $anchor: 'https://example.com/a', type: 'string' } } }, 'properties.x.$anchor'],
    ['a $dynamicRef', { type: 'object', properties: { x: { $dynamicRef: '#meta' } } }, 'properties.x.$dynamicRef'],
    ['a pattern RE2 cannot run', { type: 'object', properties: { x: { type: 'string', pattern: '^(a)\\1$' } } }, 'properties.x.pattern'],
    ['a lookahead in patternProperties', { type: 'object', patternProperties: { '^(?=a)': { type: 'string' } } }, 'patternProperties.^(?=a)'],
    ['an enum over 256 entries', { type: 'object', properties: { x: { enum: Array.from({ length: 257 }, (_, i) => i) } } }, 'properties.x.enum'],
    ['uniqueItems without a small maxItems', { type: 'object', properties: { x: { type: 'array', uniqueItems: true } } }, 'properties.x.uniqueItems'],
    ['a $ref cycle', { type: 'object', properties: { x: { $ref: '#' } } }, ''],
  ];
  it.each(cases)('%s', async (_, args, path) => {
    const device = await attachDevice(api, owner, { manifest: null });
    expectRefused(await publish(device, args), ['capabilities.0.arguments', path].filter(Boolean).join('.'));
  });

  it('refuses a $ref into default, examples or const, which no per-keyword rule walked', async () => {
    const device = await attachDevice(api, owner, { manifest: null });
    const intoDefault = { type: 'object', default: { type: 'array', uniqueItems: true }, properties: { a: { $ref: '#/default' } } };
    expectRefused(await publish(device, intoDefault), 'capabilities.0.arguments.properties.a.$ref');
    const intoExamples = { type: 'object', examples: [{ pattern: '^(a)\\1$' }], properties: { a: { $ref: '#/examples/0' } } };
    expectRefused(await publish(device, intoExamples), 'capabilities.0.arguments.properties.a.$ref');
    const intoConst = { type: 'object', properties: { c: { const: { $async: true } }, a: { $ref: '#/properties/c/const' } } };
    expectRefused(await publish(device, intoConst), 'capabilities.0.arguments.properties.a.$ref');
    // The same rules where a subschema sits, `$defs` or `properties`, still work.
    const ok = await deviceWith({
      type: 'object',
      $defs: { list: { type: 'array', uniqueItems: true, maxItems: 4 } },
      properties: { a: { $ref: '#/$defs/list' }, b: { $ref: '#/properties/a' } },
    });
    expect((await call(ok, { a: [1, 2], b: [3] })).status).toBe(201);
    expectRefused(await call(ok, { b: [1, 1] }), 'arguments.b');
  });

  it('accepts local $refs, plain anchors, a root $id and uniqueItems with maxItems', async () => {
    const device = await deviceWith({
      $id: 'urn:example:lamp',
      type: 'object',
      $defs: { level: { $anchor: 'level', type: 'integer', minimum: 0, maximum: 100 } },
      properties: { a: { $ref: '#/$defs/level' }, b: { $ref: '#level' }, tags: { type: 'array', uniqueItems: true, maxItems: 10 } },
    });
    expect((await call(device, { a: 1, b: 2, tags: ['x', 'y'] })).status).toBe(201);
    expectRefused(await call(device, { a: 1, b: 101 }), 'arguments.b');
    expectRefused(await call(device, { tags: ['x', 'x'] }), 'arguments.tags');
  });
});

describe('argument schemas: $async, which once ended the process', () => {
  it('is refused at publish, so no call runs asynchronously or ends the process', async () => {
    // Before: the schema compiled to an async validator, every call passed (the returned promise
    // was truthy) and an invalid one ended the process through an unhandled rejection.
    const device = await attachDevice(api, owner, { manifest: null });
    const args = { $async: true, type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] };
    expectRefused(await publish(device, args), 'capabilities.0.arguments.$async');
    const nested = { type: 'object', properties: { x: { $async: true, type: 'string' } } };
    expectRefused(await publish(device, nested), 'capabilities.0.arguments.properties.x.$async');
    expect((await api.get('/healthz')).status).toBe(200);
  });
});

describe('argument schemas: bombs', () => {
  it('refuses the 1.4 KiB nested anyOf that made one call take 2.8 s and 315,000 issues', async () => {
    const bomb = { type: 'object', properties: { x: { type: 'array', items: nestedAnyOf(5) } } };
    expect(JSON.stringify(bomb).length).toBeGreaterThan(1300);
    const device = await attachDevice(api, owner, { manifest: null });
    const res = await publish(device, bomb);
    expectRefused(res, 'capabilities.0.arguments.properties.x.items.anyOf.0.anyOf.0.anyOf.0.anyOf.0.anyOf.0');
    expect(res.body.error.issues.length).toBeLessThanOrEqual(MAX_ARGUMENT_ISSUES);
  });

  it('validates the same nesting within the budget, with at most 20 issues', async () => {
    // 31 subschemas under `items` need a `maxItems` (31 × 2,000 checks fit the work budget).
    const device = await deviceWith({ type: 'object', properties: { x: { type: 'array', maxItems: 2000, items: nestedAnyOf(4) } } });
    const args = { x: Array.from({ length: 2000 }, () => 1) };
    const res = await call(device, args);
    expectRefused(res, 'arguments.x.0');
    expect(res.body.error.issues.length).toBeLessThanOrEqual(MAX_ARGUMENT_ISSUES);
    expect((await call(device, { x: Array.from({ length: 2000 }, () => 'abc') })).status).toBe(201);
  });

  it('refuses the 5.5 KiB flat anyOf of 900 branches under items that stalled the server 1.4 s', async () => {
    const branches = [...Array<boolean>(900).fill(false), { type: 'number' }];
    const bomb = { type: 'object', properties: { a: { type: 'array', items: { anyOf: branches } } } };
    const device = await attachDevice(api, owner, { manifest: null });
    expectRefused(await publish(device, bomb), 'capabilities.0.arguments.properties.a.items.anyOf');
    // 16 branches are allowed, but not under an unbounded `items`: 16 × 8,192 elements is over the work budget.
    const sixteen = { type: 'object', properties: { a: { type: 'array', items: { anyOf: branches.slice(-16) } } } };
    expectRefused(await publish(device, sixteen), 'capabilities.0.arguments');
    const bounded = { type: 'object', properties: { a: { type: 'array', maxItems: 1000, items: { anyOf: branches.slice(-16) } } } };
    expect((await publish(device, bounded)).status).toBe(200);
  });

  it('validates a 16 KiB worst case against a schema just inside the work budget', async () => {
    // 7 subschemas under an unbounded `items`: 7 × 8,192 checks plus the root's 2 fit 65,536.
    const branches = [{ type: 'object', required: ['k'] }, { type: 'string' }, { type: 'boolean' }, { type: 'null' }, { type: 'number' }];
    const device = await deviceWith({ type: 'object', properties: { a: { type: 'array', items: { anyOf: branches } } } });
    const args = { a: Array.from({ length: 8160 }, () => 0) };
    // As many numbers as fit the 16 KiB request body around them.
    expect(JSON.stringify(args).length).toBeGreaterThan(16_300);
    const res = await call(device, args);
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const oneMore = { type: 'object', properties: { a: { type: 'array', items: { anyOf: [...branches, { type: 'integer' }] } } } };
    expectRefused(await publish(device, oneMore), 'capabilities.0.arguments');
  });

  it('refuses $defs that refer to one another into millions of subschemas', async () => {
    const $defs: Record<string, unknown> = { d0: { type: 'string' } };
    for (let i = 1; i <= 20; i++) $defs[`d${i}`] = { allOf: [{ $ref: `#/$defs/d${i - 1}` }, { $ref: `#/$defs/d${i - 1}` }] };
    const device = await attachDevice(api, owner, { manifest: null });
    const res = await publish(device, { type: 'object', $defs, properties: { x: { $ref: '#/$defs/d20' } } });
    expectRefused(res, 'capabilities.0.arguments');
  });

  it('runs a backtracking pattern in linear time: a 15,000-character input is answered at all', async () => {
    // Before: `^(a+)+$` on 27 a's and a "!" took 1.8 s on the process-wide RegExp, and each
    // further character doubled it; a backtracking engine would never answer the long input
    // below, so the test's own timeout is the bound (speed figures belong to the bench).
    const device = await deviceWith({ type: 'object', properties: { s: { type: 'string', pattern: '^(a+)+$' } } });
    expectRefused(await call(device, { s: `${'a'.repeat(27)}!` }), 'arguments.s');
    expect((await call(device, { s: 'aaaa' })).status).toBe(201);
    expectRefused(await call(device, { s: `${'a'.repeat(15_000)}!` }), 'arguments.s');
  });
});

describe('argument schemas: isolation', () => {
  it("one workspace's $id neither blocks nor changes another's manifests", async () => {
    const otherOwner = await server.ownerToken('schemas-other-owner');
    const otherAgent = await createAgent(api, otherOwner, { access: 'act' });
    const mine = await deviceWith({ $id: 'urn:example:shared', type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] });
    const theirs = await attachDevice(api, otherOwner, {
      manifest: fn({ $id: 'urn:example:shared', type: 'object', properties: { n: { type: 'string' } }, required: ['n'] }),
    });
    await grant(api, otherOwner, otherAgent.principal, theirs.id, ['run']);
    expect((await call(mine, { n: 1 })).status).toBe(201);
    expectRefused(await call(mine, { n: 'one' }), 'arguments.n');
    expect((await call(theirs, { n: 'one' }, api, otherAgent.token)).status).toBe(201);
    expectRefused(await call(theirs, { n: 1 }, api, otherAgent.token), 'arguments.n');
    // Republishing the same $id again in either workspace still works.
    expect((await publish(theirs, { $id: 'urn:example:shared', type: 'object' })).status).toBe(200);
    expect((await publish(mine, { $id: 'urn:example:shared', type: 'object', properties: { n: { type: 'integer' } }, required: ['n'] })).status).toBe(200);
  });

  it('1,000 publishes of distinct schemas keep the heap bounded; an evicted schema is compiled again on use', async () => {
    const early = await deviceWith({ type: 'object', properties: { level: { type: 'integer', maximum: 10 } } });
    v8.setFlagsFromString('--expose-gc');
    const gc = vm.runInNewContext('gc') as () => void;
    const device = await attachDevice(api, owner, { manifest: null });
    for (let i = 0; i < 50; i++)
      expect((await publish(device, { type: 'object', properties: { [`warm${i}`]: { type: 'string', pattern: `^w${i}$` } } })).status).toBe(200);
    gc();
    const before = process.memoryUsage().heapUsed;
    for (let i = 0; i < 1000; i++) {
      const res = await publish(device, { type: 'object', properties: { [`p${i}`]: { type: 'string', pattern: `^v${i}[a-z]*$` } }, required: [`p${i}`] });
      expect(res.status).toBe(200);
    }
    gc();
    const grownMiB = (process.memoryUsage().heapUsed - before) / 2 ** 20;
    if (process.env.SCHEMA_STATS) console.log(`heap growth after 1,000 distinct publishes: ${grownMiB.toFixed(1)} MiB (cache ${VALIDATOR_CACHE_SIZE})`);
    // Measured 4.9 MiB: the LRU keeps 256 validators; the unbounded cache before kept every one.
    expect(grownMiB).toBeLessThan(32);
    // `early` was pushed out of the LRU by the 1,000 others: its next call compiles it again.
    expect((await call(early, { level: 3 })).status).toBe(201);
    expectRefused(await call(early, { level: 11 }), 'arguments.level');
  }, 120_000);
});

describe('argument schemas: restart', () => {
  it('after a restart, actions on a published function still validate (no 500)', async () => {
    const first = await startTestServer();
    const a = client(first.url);
    const o = await first.ownerToken('schemas-restart-owner');
    const ag = await createAgent(a, o, { access: 'act' });
    const device = await attachDevice(a, o, {
      manifest: fn({
        $id: 'urn:example:restart',
        type: 'object',
        $defs: { on: { type: 'boolean' } },
        properties: { on: { $ref: '#/$defs/on' } },
        required: ['on'],
      }),
    });
    await grant(a, o, ag.principal, device.id, ['run']);
    expect((await call(device, { on: true }, a, ag.token)).status).toBe(201);
    await first.close();

    const second = await startTestServer({ dir: first.dir });
    try {
      const b = client(second.url);
      expect((await call(device, { on: false }, b, ag.token)).status).toBe(201);
      expectRefused(await call(device, { on: 'yes' }, b, ag.token), 'arguments.on');
      expect((await b.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: fn({ $id: 'urn:example:restart', type: 'object' }) })).status).toBe(
        200,
      );
    } finally {
      await second.close();
    }
  });
});

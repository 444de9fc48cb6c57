import { randomUUID } from 'node:crypto';
import { fc, test } from '@fast-check/vitest';
import { z } from 'zod';
import { beforeAll, describe, expect, it } from 'vitest';
import type { CredentialKind } from '../../src/domain/context.js';
import { routes, type Route } from '../../src/rest/routes.js';
import { grant, hubManifest, queue } from './actions.js';
import { manualClock } from './clock.js';
import { attachDevice, createAgent, createSetupToken, type AttachedDevice } from './fixtures.js';
import { expectWellFormed, fingerprint, fingerprinter, jsonText, malformedBodies, nastyHeaderValue, nastySegments, nastyValue, RawJson } from './hostile.js';
import { useTestServer } from './server.js';

/**
 * Property-based hostile input for every route of the REST table: from each
 * operation's input schema, a valid request is built and then broken — wrong types,
 * out-of-range and unrepresentable numbers, overlong strings, extra and missing fields,
 * nulls, arrays for objects, deep nesting, lone surrogates and NUL, path traversal and SQL
 * metacharacters in the body, the path, the query and the headers — and sent with a valid
 * credential of a kind the route accepts. Every answer must be below 500; every non-2xx must
 * be the error envelope (validation failures with issues); and a rejected request must leave
 * every table of the database as it was.
 *
 * The routes are read from src/rest/routes.ts, so a new route is fuzzed without an edit here,
 * and dealt across the test/hostile/fuzz-<n>.test.ts files.
 */

/**
 * At least this many generated cases over the whole table (10,000 cases, the hostile-input
 * suite's floor).
 */
export const TOTAL_CASES = 10_200;
export const RUNS_PER_ROUTE = Math.ceil(TOTAL_CASES / routes.length);
/**
 * The files the routes are dealt across, round-robin (test/hostile/fuzz-<n>.test.ts, n from 1):
 * one file held a quarter of the suite's time, and a run can be no shorter than its longest file.
 */
export const FUZZ_FILES = 4;

/** The routes file `n` (1 to FUZZ_FILES) fuzzes. */
export function fuzzedRoutes(n: number): Route[] {
  return routes.filter((_, index) => index % FUZZ_FILES === n - 1);
}

/**
 * The tests of fuzz file `n`: its own server, fixtures and fingerprint, for the routes
 * `fuzzedRoutes(n)` deals it. Everything a run keeps lives in this call, not in the module, since
 * a worker shares this module between the fuzz files it runs.
 */
export function fuzzRoutes(n: number): void {
  const shardRoutes = fuzzedRoutes(n);
  // Frozen: nothing expires during the run, so the only writer is the request under test.
  const clock = manualClock();
  let lastFingerprint: string;
  let currentFingerprint: () => Promise<string>;
  let executed = 0;
  /** Answers by route and status, printed at the end to show what the cases reached. */
  const statuses = new Map<string, Map<number, number>>();

  type JsonSchema = {
    type?: string | string[];
    properties?: Record<string, JsonSchema>;
    required?: string[];
    items?: JsonSchema;
    enum?: unknown[];
    anyOf?: JsonSchema[];
    format?: string;
    pattern?: string;
    minLength?: number;
    minimum?: number;
    minItems?: number;
    default?: unknown;
  };

  interface Fixtures {
    owner: string;
    agent: { token: string; principal: string };
    setup: string;
    lamp: AttachedDevice;
    manifestDevice: AttachedDevice;
    gatewayId: string;
    actionIds: string[];
  }
  let fx: Fixtures;

  const server = useTestServer({ clock, env: { EXPIRY_SWEEP_SECONDS: '3600' } });
  const api = server.api;

  beforeAll(async () => {
    const owner = await server.ownerToken('fuzz-owner');
    const agent = await createAgent(api, owner, { access: 'act', principal: 'agent:fuzz' });
    const setup = (await createSetupToken(api, owner, { name: 'fuzz', deviceLimit: 20 })).token;
    const lamp = await attachDevice(api, owner, { name: 'Lamp' });
    const manifestDevice = await attachDevice(api, owner, { name: 'Manifest target' });
    const gateway = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power', 'set_brightness']);
    const actionIds = [];
    for (let i = 0; i < 3; i++)
      actionIds.push((await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 })).id);
    fx = { owner, agent, setup, lamp, manifestDevice, gatewayId: gateway.id, actionIds };
    currentFingerprint = fingerprinter(server.service.db);
    lastFingerprint = await currentFingerprint();
  }, 60_000);

  /** The credential a route is called with, for each kind it accepts. */
  function credentialFor(kind: CredentialKind | 'public', route: Route): string | undefined {
    switch (kind) {
      case 'public':
        return undefined;
      case 'owner':
        return fx.owner;
      case 'agent':
        return fx.agent.token;
      case 'setup':
        return fx.setup;
      case 'device':
        return route.path.endsWith('/manifest') ? fx.manifestDevice.token : fx.lamp.token;
    }
  }

  /** A value for a path parameter that names something real where the route would use it. */
  function pathValue(route: Route, name: string): fc.Arbitrary<string> {
    const random = fc.uuid({ version: 4 });
    if (route.path.endsWith('/revoke')) return random; // never revoke the fuzzer's own credentials
    if (name === 'deviceId') {
      if (route.path.startsWith('/v1/device/')) return fc.constant(route.path.endsWith('/manifest') ? fx.manifestDevice.id : fx.lamp.id);
      if (route.path.endsWith('/gateway-grants')) return fc.constant(fx.gatewayId);
      return fc.oneof(fc.constant(fx.lamp.id), random);
    }
    if (name === 'actionId') return fc.oneof(fc.constantFrom(...fx.actionIds), random);
    return random;
  }

  /** A plausible valid value for a field, from its name and schema. */
  function validValue(name: string, schema: JsonSchema): fc.Arbitrary<unknown> {
    switch (name) {
      case 'deviceId':
        return fc.constant(fx.lamp.id);
      case 'deviceIds':
        return fc.constant([fx.lamp.id]);
      case 'capability':
        return fc.constantFrom('get_state', 'set_power');
      case 'principal':
        return fc.constant(fx.agent.principal);
      case 'workspace':
        return fc.constant(fx.lamp.workspace);
      case 'arguments':
        return fc.constantFrom({}, { on: true });
      case 'idempotencyKey':
        return fc.uuid().map((u) => `fuzz-${u}`);
    }
    return fromSchema(schema);
  }

  function fromSchema(schema: JsonSchema): fc.Arbitrary<unknown> {
    if (schema.anyOf) return fromSchema(schema.anyOf[0]!);
    if (schema.enum) return fc.constantFrom(...schema.enum);
    const type = Array.isArray(schema.type) ? schema.type[0] : schema.type;
    switch (type) {
      case 'string':
        if (schema.format === 'uuid') return fc.uuid({ version: 4 });
        if (schema.pattern?.includes('a-z][a-z0-9')) return fc.constant('get_state');
        if (schema.pattern) return fc.constant('key-1');
        return fc.constant('f'.repeat(Math.max(1, schema.minLength ?? 1)));
      case 'integer':
      case 'number':
        return fc.constant(schema.minimum ?? 1);
      case 'boolean':
        return fc.boolean();
      case 'array':
        return schema.items ? fc.array(fromSchema(schema.items), { minLength: Math.max(1, schema.minItems ?? 0), maxLength: 2 }) : fc.constant([]);
      case 'object':
        return objectFromSchema(schema);
      default:
        return fc.constant({ any: 'thing' });
    }
  }

  function objectFromSchema(schema: JsonSchema, skip: Set<string> = new Set()): fc.Arbitrary<Record<string, unknown>> {
    const entries = Object.entries(schema.properties ?? {}).filter(([key]) => !skip.has(key));
    const required = new Set(schema.required ?? []);
    const model: Record<string, fc.Arbitrary<unknown>> = {};
    for (const [key, sub] of entries) model[key] = validValue(key, sub);
    return fc.record(model, { requiredKeys: entries.map(([key]) => key).filter((key) => required.has(key)) }) as fc.Arbitrary<Record<string, unknown>>;
  }

  type Mutation =
    | { kind: 'set'; key: string; value: unknown }
    | { kind: 'delete'; key: string }
    | { kind: 'nested'; key: string; value: unknown }
    | { kind: 'replaceBody'; value: unknown }
    | { kind: 'rawBody'; body: string | Uint8Array }
    | { kind: 'param'; name: string; segment: string }
    | { kind: 'query'; key: string; value: string }
    | { kind: 'header'; name: string; value: string };

  interface FuzzCase {
    credential: CredentialKind | 'public';
    params: Record<string, string>;
    body: Record<string, unknown> | undefined;
    query: Record<string, string>;
    headers: Record<string, string>;
    mutations: Mutation[];
  }

  /** encodeURIComponent, except for strings it refuses (lone surrogates): those go as raw bytes. */
  function encode(value: string): string {
    try {
      return encodeURIComponent(value);
    } catch {
      return '%ED%A0%80';
    }
  }

  function caseArbitrary(route: Route): fc.Arbitrary<FuzzCase> {
    const schema = z.toJSONSchema(route.operation.input, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
    const paramNames = [...route.path.matchAll(/\{(\w+)\}/g)].map((m) => m[1]!);
    const headerFields = new Map(Object.entries(route.headers ?? {}).map(([header, field]) => [field, header]));
    const skip = new Set([...paramNames, ...headerFields.keys()]);
    // A union input (grants.revoke) is one of its branches; its fields are all fair game.
    const branches = schema.anyOf ?? [schema];
    const fieldNames = [...new Set(branches.flatMap((b) => Object.keys(b.properties ?? {})))].filter((key) => !skip.has(key));
    const isPost = route.method === 'POST';

    const params = fc.record(Object.fromEntries(paramNames.map((name) => [name, pathValue(route, name)])) as Record<string, fc.Arbitrary<string>>);
    const body = isPost ? fc.oneof(...branches.map((b) => objectFromSchema(b, skip))) : fc.constant(undefined);
    const query =
      route.method === 'GET' && fieldNames.length > 0
        ? fc
            .subarray(fieldNames)
            .chain((keys) =>
              fc.record(
                Object.fromEntries(
                  keys.map((k) => [k, k === 'since' || k === 'until' ? fc.nat().map(String) : fc.constant(k === 'deviceId' ? fx.lamp.id : fx.agent.principal)]),
                ),
              ),
            )
        : fc.constant({});
    const headers = fc.constant(Object.fromEntries([...headerFields].map(([field, header]) => [header, field === 'workspace' ? fx.lamp.workspace : 'x'])));

    const key = fc.oneof(
      { weight: 3, arbitrary: fc.constantFrom(...(fieldNames.length ? fieldNames : ['name'])) },
      { weight: 1, arbitrary: fc.constantFrom('extra', '__proto__', 'constructor', '', 'a'.repeat(300), 'deviceId', 'workspaceId', 'principal') },
    );
    const mutations: fc.Arbitrary<Mutation>[] = [
      fc.record({
        kind: fc.constant('query' as const),
        key: fc.oneof(key, fc.constantFrom('since', 'until', 'ticket', 'token', '%00', '..')),
        value: nastyValue.map((v) => (typeof v === 'string' ? encode(v) : encode(jsonText(v)))),
      }),
      fc.record({
        kind: fc.constant('header' as const),
        name: fc.constantFrom(
          ...headerFields.values(),
          'x-service-workspace',
          'x-request-id',
          'content-type',
          'accept',
          'x-forwarded-for',
          'content-encoding',
          'origin',
        ),
        value: nastyHeaderValue,
      }),
    ];
    if (paramNames.length > 0) {
      mutations.push(
        fc.record({
          kind: fc.constant('param' as const),
          name: fc.constantFrom(...paramNames),
          segment: fc.oneof(
            fc.constantFrom(...nastySegments),
            nastyValue.map((v) => encode(typeof v === 'string' ? v : jsonText(v))),
          ),
        }),
      );
    }
    if (isPost) {
      mutations.push(
        fc.record({ kind: fc.constant('set' as const), key, value: nastyValue }),
        fc.record({ kind: fc.constant('delete' as const), key }),
        fc.record({ kind: fc.constant('nested' as const), key, value: nastyValue }),
        fc.record({ kind: fc.constant('replaceBody' as const), value: nastyValue }),
        fc.record({ kind: fc.constant('rawBody' as const), body: fc.constantFrom(...malformedBodies) }),
      );
    }
    const kinds = route.operation.credentials as readonly (CredentialKind | 'public')[];
    return fc.record({
      credential: fc.constantFrom(...kinds),
      params,
      body,
      query,
      headers,
      mutations: fc.array(fc.oneof(...mutations), { minLength: 1, maxLength: 3 }),
    });
  }

  /** Sets `value` one level inside the field: in its first element or under a new key. */
  function nest(target: unknown, value: unknown): unknown {
    if (Array.isArray(target)) return target.length ? [nest(target[0], value), ...target.slice(1)] : [value];
    if (target !== null && typeof target === 'object') return { ...(target as object), name: value, extra: value };
    return { value };
  }

  async function send(route: Route, c: FuzzCase): Promise<{ status: number; body: unknown; text: string; described: string }> {
    const params = { ...c.params };
    const query: [string, string][] = Object.entries(c.query).map(([k, v]) => [encode(k), encode(v)]);
    const headers: Record<string, string> = { ...c.headers };
    let body: Record<string, unknown> | unknown = c.body === undefined ? undefined : { ...c.body };
    let raw: string | Uint8Array | undefined;
    for (const m of c.mutations) {
      switch (m.kind) {
        case 'set':
          if (body !== null && typeof body === 'object' && !Array.isArray(body) && !(body instanceof RawJson))
            (body as Record<string, unknown>)[m.key] = m.value;
          break;
        case 'delete':
          if (body !== null && typeof body === 'object') delete (body as Record<string, unknown>)[m.key];
          break;
        case 'nested':
          if (body !== null && typeof body === 'object' && !(body instanceof RawJson)) {
            (body as Record<string, unknown>)[m.key] = nest((body as Record<string, unknown>)[m.key], m.value);
          }
          break;
        case 'replaceBody':
          body = m.value;
          break;
        case 'rawBody':
          raw = m.body;
          break;
        case 'param':
          params[m.name] = m.segment;
          break;
        case 'query':
          query.push([encode(m.key), m.value]);
          break;
        case 'header':
          headers[m.name] = m.value;
          break;
      }
    }
    const token = credentialFor(c.credential, route);
    if (token !== undefined) headers.authorization = `Bearer ${token}`;
    const path = route.path.replace(/\{(\w+)\}/g, (_, name: string) => params[name] ?? '');
    const url = `${server.url}${path}${query.length ? `?${query.map(([k, v]) => `${k}=${v}`).join('&')}` : ''}`;
    let payload: string | Uint8Array | undefined;
    if (route.method === 'POST') {
      payload = raw ?? (body === undefined ? undefined : jsonText(body));
      headers['content-type'] ??= 'application/json';
    }
    const response = await fetch(url, { method: route.method, headers, ...(payload !== undefined ? { body: payload } : {}) });
    // An accepted live feed (GET /v1/events) never ends by itself: its answer is the status and
    // the content type; hanging up frees its stream slot for the next case.
    if (response.ok && response.headers.get('content-type')?.startsWith('text/event-stream')) {
      await response.body?.cancel();
      return {
        status: response.status,
        body: undefined,
        text: '',
        described: `${route.method} ${url.slice(0, 300)} as ${c.credential} → ${response.status} (event stream)`,
      };
    }
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = JSON.parse(text);
    } catch {
      // Left as text: expectWellFormed reports it.
    }
    const shown = typeof payload === 'string' ? payload.slice(0, 300) : payload ? `<${payload.byteLength} bytes>` : '';
    return {
      status: response.status,
      body: parsed,
      text,
      described: `${route.method} ${url.slice(0, 300)} as ${c.credential} ${JSON.stringify(headers).slice(0, 300)} body=${shown} → ${response.status} ${text.slice(0, 300)}`,
    };
  }

  describe.each(shardRoutes.map((route) => ({ route, name: `${route.method} ${route.path}` })))('hostile input: $name', ({ route }) => {
    test.prop([fc.constant(route).chain(caseArbitrary)], { numRuns: RUNS_PER_ROUTE })(
      'answers below 500, in the envelope, and writes nothing when it refuses',
      async (c) => {
        executed++;
        const res = await send(route, c);
        const byStatus = statuses.get(`${route.method} ${route.path}`) ?? new Map<number, number>();
        statuses.set(`${route.method} ${route.path}`, byStatus.set(res.status, (byStatus.get(res.status) ?? 0) + 1));
        expectWellFormed(res.status, res.body, res.described);
        const after = await currentFingerprint();
        if (res.status >= 300) expect(after, `a refused request changed the database: ${res.described}`).toBe(lastFingerprint);
        lastFingerprint = after;
        // A case may pause device control for the fuzzer's workspace; every other route's cases
        // expect it running, as they expect their own credentials unrevoked.
        if (route.path === '/v1/device-controls' && res.status < 300) {
          expect((await api.post('/v1/device-controls', { token: fx.owner, body: { paused: false } })).status).toBe(200);
          lastFingerprint = await currentFingerprint();
        }
      },
      120_000,
    );
  });

  describe('hostile input: coverage', () => {
    it(`generated ${RUNS_PER_ROUTE} cases for each of its ${shardRoutes.length} routes`, () => {
      // With `-t` filtering only some routes run; the count is meaningful for the full file.
      if (executed < RUNS_PER_ROUTE * shardRoutes.length) return;
      expect(executed).toBe(RUNS_PER_ROUTE * shardRoutes.length);
      const table = [...statuses].map(
        ([name, counts]) =>
          `${name}: ${[...counts]
            .sort(([a], [b]) => a - b)
            .map(([s, n]) => `${s}×${n}`)
            .join(' ')}`,
      );
      // FUZZ_STATS=1 prints what the cases reached, route by route (kept out of plain runs).
      if (process.env.FUZZ_STATS) console.info(`fuzz ${n}/${FUZZ_FILES}: ${executed} cases over ${shardRoutes.length} routes\n${table.join('\n')}`);
    });
  });

  // The fingerprint must see a write, or "nothing changed" proves nothing.
  describe('hostile input: the database fingerprint', () => {
    it('changes when a request writes', async () => {
      const before = await fingerprint(server.service.db);
      const res = await api.post('/v1/device-setup-tokens', { token: fx.owner, body: { name: `fp-${randomUUID()}` } });
      expect(res.status).toBe(201);
      expect(await fingerprint(server.service.db)).not.toBe(before);
      expect(await currentFingerprint()).toBe(await fingerprint(server.service.db));
      lastFingerprint = await currentFingerprint();
    });
  });
}

import http from 'node:http';
import { fc, test } from '@fast-check/vitest';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { grant, next, queue, report } from '../helpers/actions.js';
import { attachDevice, createAgent, createSetupToken, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { expectWellFormed, fingerprinter, jsonText, nastyValue, RawJson, sqlMeta, traversal } from '../helpers/hostile.js';
import { collectAnswer } from '../helpers/raw-http.js';
import { envelope, MODERN } from '../helpers/mcp-client.js';
import { manualClock } from '../helpers/clock.js';
import { useTestServer } from '../helpers/server.js';

/**
 * Hand-written hostile input: bodies at 16 KiB ± 1 byte, a body trickled over a
 * second, nesting far past any parser's comfort, numbers JSON cannot hold, Unicode in names,
 * and path traversal and SQL metacharacters in every string field of the main create
 * endpoints — stored and returned verbatim, never interpreted. Then POST /mcp with JSON-RPC
 * bodies whose params are broken.
 */
const LIMIT = 16 * 1024;

let owner: string;
let agent: { token: string; principal: string };
let lamp: AttachedDevice;

/** A manifest with a free-text argument, so strings can travel through an action. */
const labelManifest = {
  capabilities: [
    ...lampManifest.capabilities,
    {
      name: 'set_label',
      kind: 'control',
      description: 'Shows a text on the lamp.',
      arguments: { type: 'object', properties: { label: { type: 'string', maxLength: 4000 } }, required: ['label'], additionalProperties: false },
    },
  ],
};

// Frozen, as in the route fuzz: nothing expires and no device goes quiet for 60 s during the run,
// however slowly a loaded machine runs it, so the only writer is the request under test.
const server = useTestServer({ clock: manualClock() });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('hostile-owner');
  agent = await createAgent(api, owner, { access: 'act' });
  lamp = await attachDevice(api, owner, { manifest: labelManifest });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power', 'set_label']);
});

/** `{"name":"…"}`-style JSON of exactly `size` bytes: `fields` padded with spaces before the last brace. */
function sized(fields: Record<string, unknown>, size: number): string {
  const core = JSON.stringify(fields).slice(0, -1);
  return `${core}${' '.repeat(size - Buffer.byteLength(core) - 1)}}`;
}

/** POSTs raw bytes on a fresh connection (a pooled one the server closed after a 413 could hang). */
function post(path: string, token: string | undefined, body: string | Buffer, headers: Record<string, string> = {}): Promise<{ status: number; body: any }> {
  return new Promise((resolve, reject) => {
    const req = http.request(
      `${server.url}${path}`,
      {
        method: 'POST',
        agent: false,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(body),
          ...(token ? { authorization: `Bearer ${token}` } : {}),
          ...headers,
        },
      },
      (res) => void collectAnswer(res).then(resolve),
    );
    // The server may answer 413 and close before the whole body is written.
    req.on('error', (error: NodeJS.ErrnoException) => (error.code === 'EPIPE' || error.code === 'ECONNRESET' ? undefined : reject(error)));
    req.end(body);
  });
}

describe('request bodies at their limit: 16 KiB, a manifest 64 KiB', () => {
  const cases: { name: string; path: () => string; token: () => string; fields: () => Record<string, unknown>; ok: number; limit?: number }[] = [
    { name: 'POST /v1/device-setup-tokens', path: () => '/v1/device-setup-tokens', token: () => owner, fields: () => ({ name: 'sized' }), ok: 201 },
    { name: 'POST /v1/agent-connections', path: () => '/v1/agent-connections', token: () => owner, fields: () => ({ name: 'sized' }), ok: 201 },
    {
      name: 'POST /v1/devices/{deviceId}/actions',
      path: () => `/v1/devices/${lamp.id}/actions`,
      token: () => agent.token,
      fields: () => ({ capability: 'get_state', arguments: {} }),
      ok: 201,
    },
    {
      name: 'POST /v1/device/{deviceId}/manifest',
      path: () => `/v1/device/${lamp.id}/manifest`,
      token: () => lamp.token,
      fields: () => labelManifest,
      ok: 200,
      // A gateway describes every device behind it (docs/decisions/0003-manifest-body-limit.md).
      limit: 64 * 1024,
    },
    {
      name: 'POST /v1/grants',
      path: () => '/v1/grants',
      token: () => owner,
      fields: () => ({ principal: agent.principal, deviceId: lamp.id, capabilities: ['get_state'] }),
      ok: 201,
    },
  ];

  it.each(cases)('$name accepts its limit - 1 and exactly its limit, and answers 413 to its limit + 1', async ({ path, token, fields, ok, limit = LIMIT }) => {
    for (const size of [limit - 1, limit]) {
      const res = await post(path(), token(), sized(fields(), size));
      expect(res.status, `${size} bytes: ${JSON.stringify(res.body)}`).toBe(ok);
    }
    const over = await post(path(), token(), sized(fields(), limit + 1));
    expect(over.status).toBe(413);
    expectWellFormed(over.status, over.body, 'over the limit');
    expect(over.body.error.code).toBe('payload_too_large');
  });

  it('counts bytes, not characters: 16 KiB + 1 of two-byte characters is 413', async () => {
    const name = 'é'.repeat(8193);
    const res = await post('/v1/device-setup-tokens', owner, `{"name":"${name}"}`);
    expect(res.status).toBe(413);
  });
});

describe('a body trickled over a second', () => {
  it('is read to the end and answered like any other', async () => {
    const body = Buffer.from(JSON.stringify({ name: 'slow but steady', deviceLimit: 3 }));
    const res = await new Promise<{ status: number; body: any }>((resolve, reject) => {
      const req = http.request(`${server.url}/v1/device-setup-tokens`, {
        method: 'POST',
        agent: false,
        headers: { authorization: `Bearer ${owner}`, 'content-type': 'application/json' },
      });
      req.on('response', (r) => {
        let text = '';
        r.on('data', (chunk) => (text += chunk));
        r.on('end', () => resolve({ status: r.statusCode!, body: JSON.parse(text) }));
      });
      req.on('error', reject);
      // Chunked, no Content-Length: ~20 pieces, 50 ms apart.
      const pieces = Math.ceil(body.length / 20);
      let offset = 0;
      const tick = () => {
        if (offset >= body.length) return req.end();
        req.write(body.subarray(offset, (offset += pieces)));
        setTimeout(tick, 50);
      };
      tick();
    });
    expect(res.status).toBe(201);
    expect(res.body.data).toMatchObject({ name: 'slow but steady', deviceLimit: 3 });
  });
});

describe('deep JSON nesting', () => {
  it('answers 413 to 100,000 levels of [ (past the size limit before any parsing)', async () => {
    const res = await post('/v1/device-setup-tokens', owner, '['.repeat(100_000));
    expect(res.status).toBe(413);
    expectWellFormed(res.status, res.body, 'deep');
  });

  it.each([
    ['8,000 unclosed [', '['.repeat(8000)],
    ['8,000 closed [ ]', `${'['.repeat(8000)}${']'.repeat(8000)}`],
    ['a name nested 2,000 objects deep', `{"name":${'{"a":'.repeat(2000)}1${'}'.repeat(2000)}}`],
  ])('answers 400 to %s', async (_label, body) => {
    const res = await post('/v1/device-setup-tokens', owner, body);
    expect(res.status).toBe(400);
    expectWellFormed(res.status, res.body, 'deep');
  });

  // JSON.stringify, storing a result, overflowed the stack at ~5,000 levels and answered
  // 500; input is now limited to 64 levels (src/domain/input-limits.ts).
  it('refuses arguments and results nested past 64 levels with 400, and stores 60 levels intact', async () => {
    const deep = (n: number) => `${'['.repeat(n)}${']'.repeat(n)}`;
    const action = await post(`/v1/devices/${lamp.id}/actions`, agent.token, `{"capability":"set_label","arguments":{"label":${deep(5000)}}}`);
    expect(action.status).toBe(400);
    const fresh = await attachDevice(api, owner, { name: 'Deep' });
    await grant(api, owner, agent.principal, fresh.id, ['get_state']);
    for (const depth of [7000, 5000, 64]) {
      const queued = await queue(api, agent.token, fresh.id, { capability: 'get_state', arguments: {} });
      expect((await next(api, fresh)).body.data.id).toBe(queued.id);
      const refused = await post(`/v1/device/${fresh.id}/result`, fresh.token, `{"actionId":"${queued.id}","ok":true,"result":${deep(depth)}}`);
      expect(refused.status).toBe(400);
      expect(refused.body.error.issues[0].message).toContain('deeper than 64');
      const kept = await post(`/v1/device/${fresh.id}/result`, fresh.token, `{"actionId":"${queued.id}","ok":true,"result":${deep(60)}}`);
      expect(kept.status).toBe(200);
      expect(JSON.stringify(kept.body.data.result)).toBe(deep(60));
    }
  });
});

describe('numbers JSON cannot hold or the schema does not allow', () => {
  it.each(['1e308', '1e400', '-1e400', '-0', '9007199254740993', '60.5', '123456789012345678901234567890'])(
    'ttlSeconds: %s is a 400 with issues, and nothing is created',
    async (raw) => {
      const fp = fingerprinter(server.service.db);
      const before = await fp();
      const res = await post('/v1/device-setup-tokens', owner, `{"name":"n","ttlSeconds":${raw}}`);
      expect(res.status).toBe(400);
      expect(res.body.error.code).toBe('validation_failed');
      expect(res.body.error.issues[0].path).toBe('ttlSeconds');
      expect(await fp()).toBe(before);
    },
  );

  it('accepts 60.0 and 6e1 as the integer 60 (the same JSON number)', async () => {
    for (const raw of ['60.0', '6e1']) {
      const res = await post('/v1/device-setup-tokens', owner, `{"name":"n","ttlSeconds":${raw}}`);
      expect(res.status).toBe(201);
    }
  });

  it.each(['1e308', '-1', '9007199254740993', '1.5', 'abc', '%00', ''])(
    'export ?since=%s is refused with 400 or read as a filter, never a 5xx',
    async (raw) => {
      const res = await api.get(`/v1/actions/export?since=${raw}`, { token: owner });
      expectWellFormed(res.status, res.body, raw);
      if (['1e308', '-1', '9007199254740993', '1.5', 'abc', '%00'].includes(raw)) expect(res.status).toBe(400);
    },
  );

  it('-0 in an action argument is stored as 0 (JSON has one zero)', async () => {
    const res = await post(
      `/v1/devices/${lamp.id}/actions`,
      agent.token,
      `{"capability":"set_power","arguments":{"on":true},"ttlSeconds":30,"idempotencyKey":"neg-zero"}`,
    );
    expect(res.status).toBe(201);
  });
});

/** Names a user might really type, and some they would not. */
const unicodeNames = [
  'Küche – Lampe',
  '客厅灯',
  'غرفة المعيشة',
  '🛋️ Sofa 💡',
  'e\u0301\u0302 combining',
  '\u202eRTL override',
  'zero\u200bwidth',
  '𝕬𝖘𝖙𝖗𝖆𝖑',
  '\u{10FFFF}',
];

describe('Unicode in names', () => {
  // A principal names an identity and is normalised to NFC (test/rest/contract-rules.test.ts); names are kept as sent.
  it.each(unicodeNames)('a setup token, an agent connection and a device named %j keep their name exactly, the principal in NFC', async (name) => {
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name, deviceLimit: 2 } });
    expect(setup.status).toBe(201);
    expect(setup.body.data.name).toBe(name);
    const connection = await api.post('/v1/agent-connections', { token: owner, body: { name, principal: `agent:${name}` } });
    expect(connection.status).toBe(201);
    expect(connection.body.data).toMatchObject({ name, principal: `agent:${name.normalize('NFC')}` });
    const device = await api.post('/v1/sdk/devices', { token: setup.body.data.token, body: { name } });
    expect(device.status).toBe(201);
    expect(device.body.data.device.name).toBe(name);

    const listed = (await api.get('/v1/devices', { token: owner })).body.data.find((d: { id: string }) => d.id === device.body.data.device.id);
    expect(listed.name).toBe(name);
    const agents = (await api.get('/v1/agent-connections', { token: owner })).body.data.find((c: { id: string }) => c.id === connection.body.data.id);
    expect(agents).toMatchObject({ name, principal: `agent:${name.normalize('NFC')}` });
  });

  // The store would keep `a\u0000b` as `a` and a lone surrogate as U+FFFD: refused instead.
  it.each(['"a\\u0000b"', '"\\u0000"', '"\\ud800"', '"x\\udc00y"', '"\\udfff\\ud800"'])(
    'a name with NUL or a lone surrogate (%s) is refused with 400, not stored altered',
    async (raw) => {
      const fp = fingerprinter(server.service.db);
      const before = await fp();
      const res = await post('/v1/device-setup-tokens', owner, `{"name":${raw}}`);
      expect(res.status).toBe(400);
      expectWellFormed(res.status, res.body, raw);
      expect(await fp()).toBe(before);
    },
  );
});

/** Strings that must be data, never a path, a query or markup. */
const verbatim = [...traversal, ...sqlMeta, '%00', "Robert'); DROP TABLE devices;--", '<img src=x onerror=alert(1)>'];

describe('path traversal and SQL metacharacters in every string field', () => {
  it.each(verbatim)('are stored and returned verbatim by the create endpoints: %j', async (text) => {
    const name = text.slice(0, 64) || 'x';
    const setup = await api.post('/v1/device-setup-tokens', { token: owner, body: { name, deviceLimit: 1 } });
    expect(setup.status, JSON.stringify(setup.body)).toBe(201);
    expect(setup.body.data.name).toBe(name);

    const principal = `agent:${text}`.slice(0, 128);
    const connection = await api.post('/v1/agent-connections', { token: owner, body: { name, access: 'act', principal } });
    expect(connection.status).toBe(201);
    expect(connection.body.data).toMatchObject({ name, principal });

    const attached = await api.post('/v1/sdk/devices', { token: setup.body.data.token, body: { name } });
    expect(attached.status).toBe(201);
    const device: AttachedDevice = { id: attached.body.data.device.id, token: attached.body.data.token, workspace: attached.body.data.workspace };
    const manifest = {
      capabilities: [{ ...labelManifest.capabilities[3]!, description: text }],
    };
    const published = await api.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: manifest });
    expect(published.status).toBe(200);
    expect(published.body.data.device.capabilities[0].description).toBe(text);

    const granted = await grant(api, owner, principal, device.id, ['set_label']);
    expect(granted).toHaveLength(1);
    const gatewayFree = await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}`, { token: owner });
    expect(gatewayFree.status).toBe(200);
    expect(gatewayFree.body.data.map((g: { principal: string }) => g.principal)).toEqual([principal]);

    const action = await api.post(`/v1/devices/${device.id}/actions`, {
      token: connection.body.data.token,
      body: { capability: 'set_label', arguments: { label: text }, idempotencyKey: text || 'empty' },
    });
    expect(action.status).toBe(201);
    expect(action.body.data.arguments).toEqual({ label: text });
    const delivered = await next(api, device);
    expect(delivered.body.data.args).toEqual({ label: text });
    const done = await report(api, device, { actionId: action.body.data.id, ok: false, error: { code: text.slice(0, 64) || 'x', message: text } });
    expect(done.status).toBe(200);
    expect(done.body.data.error).toEqual({ code: text.slice(0, 64) || 'x', message: text });

    // Read back through the owner's views: the same bytes, and the tables still there.
    const stored = await api.get(`/v1/actions/${action.body.data.id}`, { token: owner });
    expect(stored.body.data).toMatchObject({ arguments: { label: text }, principal, error: { message: text } });
    const devices = (await api.get('/v1/devices', { token: owner })).body.data as { id: string; name: string }[];
    expect(devices.find((d) => d.id === device.id)!.name).toBe(name);
    expect(devices.length).toBeGreaterThan(1);
  });

  it('are refused, not interpreted, where they stand for an id: path and query', async () => {
    for (const text of verbatim) {
      const encoded = encodeURIComponent(text);
      for (const path of [`/v1/actions/${encoded}`, `/v1/devices/${encoded}/revoke`, `/v1/grants?deviceId=${encoded}`]) {
        const res = await api.request(path.endsWith('/revoke') ? 'POST' : 'GET', path, { token: owner });
        expectWellFormed(res.status, res.body, path);
        expect([400, 404]).toContain(res.status);
      }
    }
    expect((await api.get('/v1/devices', { token: owner })).status).toBe(200);
  });
});

describe('POST /mcp with broken JSON-RPC params', () => {
  const methods = [
    'tools/call',
    'tools/list',
    'resources/read',
    'resources/list',
    'resources/templates/list',
    'prompts/get',
    'prompts/list',
    'server/discover',
    'ping',
    'initialize',
    'completion/complete',
    'logging/setLevel',
    'nope/nothing',
  ];
  const tools = [
    'list_devices',
    'list_functions',
    'get_action',
    'cancel_action',
    'broadcast',
    'get_state__000000000000',
    'set_label',
    '../../etc/passwd',
    "' OR 1=1 --",
    '',
  ];

  let checked = 0;
  const outcomes = new Map<string, number>();
  let fingerprintNow: () => Promise<string>;
  let lastFingerprint = '';
  beforeAll(async () => {
    fingerprintNow = fingerprinter(server.service.db);
    lastFingerprint = await fingerprintNow();
  });
  afterAll(() => {
    if (process.env.FUZZ_STATS) console.info(`mcp fuzz: ${checked} cases`, Object.fromEntries(outcomes));
    // eslint-style guard against a silently empty property: the run below must have happened.
    if (checked > 0) expect(checked).toBeGreaterThanOrEqual(300);
  });

  test.prop(
    [
      fc.record({
        method: fc.constantFrom(...methods),
        tool: fc.oneof(fc.constantFrom(...tools), fc.constant('__device__')),
        arguments: fc.oneof(
          nastyValue,
          fc.dictionary(fc.constantFrom('actionId', 'deviceIds', 'capability', 'arguments', 'idempotencyKey', 'label', 'on', 'extra'), nastyValue, {
            maxKeys: 4,
          }),
        ),
        extraParams: fc.dictionary(fc.constantFrom('uri', 'name', 'cursor', 'level', 'ref', 'argument', 'protocolVersion', 'capabilities'), nastyValue, {
          maxKeys: 3,
        }),
        id: fc.oneof({ weight: 8, arbitrary: fc.integer() }, { weight: 2, arbitrary: fc.string({ maxLength: 10 }) }, { weight: 1, arbitrary: nastyValue }),
        mangle: fc.oneof(
          { weight: 6, arbitrary: fc.constant('none') },
          { weight: 1, arbitrary: fc.constantFrom('params-not-object', 'no-meta', 'meta-not-object', 'no-jsonrpc', 'batch') },
        ),
      }),
    ],
    { numRuns: 300 },
  )(
    'answers below 500, and a refused call (HTTP error, JSON-RPC error or isError) writes nothing',
    async (c) => {
      checked++;
      const deviceTool = `set_label__${lamp.id.replace(/-/g, '').slice(0, 12)}`;
      const name = c.tool === '__device__' ? deviceTool : c.tool;
      // No waiting for a device: a queued action answers at once (dfc/waitSeconds 0).
      const meta = envelope({ 'dfc/waitSeconds': 0 });
      let params: unknown = { ...c.extraParams, name, arguments: c.arguments, _meta: meta };
      if (c.mangle === 'params-not-object') params = c.arguments;
      if (c.mangle === 'no-meta') params = { name, arguments: c.arguments };
      if (c.mangle === 'meta-not-object') params = { name, arguments: c.arguments, _meta: c.arguments };
      const message: Record<string, unknown> = { jsonrpc: '2.0', id: c.id, method: c.method, params };
      if (c.mangle === 'no-jsonrpc') delete message.jsonrpc;
      const body = c.mangle === 'batch' ? jsonText([message, message]) : jsonText(message);
      const headers: Record<string, string> = {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': c.method,
        'mcp-name': name.replace(/[^\x20-\x7e]/g, '?'),
      };
      const res = await post('/mcp', agent.token, body, headers);
      const shown = `${body.slice(0, 400)} → ${res.status} ${JSON.stringify(res.body).slice(0, 400)}`;
      expect(res.status, shown).toBeLessThan(500);
      // The contract's own statuses on /mcp carry the service envelope (docs/reference/rules.md "MCP").
      if ([401, 403, 413].includes(res.status)) expectWellFormed(res.status, res.body, body.slice(0, 200));
      // An answer of an event stream is its last JSON-RPC message.
      const answer =
        typeof res.body === 'string' && res.body.includes('data:')
          ? JSON.parse(
              res.body
                .split('\n')
                .filter((l: string) => l.startsWith('data:'))
                .at(-1)!
                .slice(5),
            )
          : res.body;
      const refused =
        res.status >= 300 || answer?.error !== undefined || answer?.result?.isError === true || (Array.isArray(answer) && answer.every((m) => m.error));
      const outcome = `${res.status} ${answer?.error ? `rpc ${answer.error.code}` : answer?.result?.isError ? 'isError' : Array.isArray(answer) ? 'batch' : 'ok'}`;
      outcomes.set(outcome, (outcomes.get(outcome) ?? 0) + 1);
      const after = await fingerprintNow();
      if (refused) expect(after, `a refused MCP call changed the database: ${shown}`).toBe(lastFingerprint);
      lastFingerprint = after;
    },
    120_000,
  );

  it('a JSON-RPC body carrying RawJson numbers and lone surrogates is not a 5xx', async () => {
    for (const raw of ['-0', '1e400', '"\\ud800"', `${'['.repeat(4000)}${']'.repeat(4000)}`]) {
      const body = jsonText({
        jsonrpc: '2.0',
        id: 1,
        method: 'tools/call',
        params: { name: 'get_action', arguments: { actionId: new RawJson(raw) }, _meta: envelope() },
      });
      const res = await post('/mcp', agent.token, body, {
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/call',
        'mcp-name': 'get_action',
      });
      expect(res.status, raw.slice(0, 20)).toBeLessThan(500);
    }
  });
});

describe('a setup token used after the hostile traffic', () => {
  it('still works: nothing above broke the service', async () => {
    const setup = await createSetupToken(api, owner, { name: 'after' });
    expect((await api.post('/v1/sdk/devices', { token: setup.token, body: { name: 'after' } })).status).toBe(201);
  });
});

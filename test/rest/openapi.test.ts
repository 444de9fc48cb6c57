import http from 'node:http';
import zlib from 'node:zlib';
import { Validator } from '@seriousme/openapi-schema-validator';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { describe, expect, it } from 'vitest';
import { routes } from '../../src/rest/routes.js';
import { client } from '../helpers/api.js';
import { startTestServer, useTestServer } from '../helpers/server.js';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  /** The body as it came over the wire (still compressed if it was). */
  bytes: Buffer;
}

/** A request with headers fetch will not send (Host) and no automatic decompression. */
function get(url: string, path: string, headers: Record<string, string> = {}, method = 'GET'): Promise<Answer> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request({ host: hostname, port, path, method, headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, bytes: Buffer.concat(chunks) }));
    });
    req.on('error', reject);
    req.end();
  });
}

async function serverOf(url: string, headers: Record<string, string>): Promise<string> {
  const answer = await get(url, '/openapi.json', headers);
  return (JSON.parse(answer.bytes.toString('utf8')) as { servers: { url: string }[] }).servers[0]!.url;
}

const server = useTestServer();

describe('GET /openapi.json', () => {
  it('is a valid OpenAPI 3.1 document', async () => {
    const res = await client(server.url).get('/openapi.json');
    expect(res.status).toBe(200);
    const result = await new Validator().validate(res.body);
    expect(result.errors ?? []).toEqual([]);
    expect(result.valid).toBe(true);
    expect(res.body.openapi).toBe('3.1.0');
  });

  it('documents every route of the route table with its operation id and error statuses', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    for (const route of routes) {
      const op = body.paths[route.path]?.[route.method.toLowerCase()];
      expect(op, `${route.method} ${route.path}`).toBeDefined();
      expect(op.operationId).toBe(
        route.deprecated && route.operation.rest.some((other) => !other.deprecated) ? `${route.operation.name}Legacy` : route.operation.name,
      );
      for (const status of ['400', '404', '429', '500', '503']) expect(Object.keys(op.responses)).toContain(status);
      if (!route.operation.credentials.includes('public')) {
        expect(op.responses['401']).toBeDefined();
        expect(op.security.length).toBeGreaterThan(0);
      }
    }
  });

  it('has a security scheme for each credential kind', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    expect(Object.keys(body.components.securitySchemes).sort()).toEqual(['agentToken', 'deviceToken', 'metricsToken', 'oauth', 'ownerSession', 'setupToken']);
    expect(body.components.securitySchemes.oauth.flows.authorizationCode.scopes).toHaveProperty('act');
  });

  it('describes path, header and body fields where they travel', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    const next = body.paths['/v1/device/{deviceId}/next'].post;
    expect(next.parameters.map((p: { in: string; name: string }) => `${p.in}:${p.name}`)).toEqual([
      'path:deviceId',
      'header:x-service-workspace',
      'query:waitSeconds',
    ]);
    expect(next.parameters.find((p: { name: string }) => p.name === 'waitSeconds')).toMatchObject({ required: false, schema: { type: 'string' } });
    expect(next.requestBody).toBeUndefined();
    const setup = body.paths['/v1/device-setup-tokens'].post;
    expect(setup.requestBody.content['application/json'].schema.properties.ttlSeconds).toMatchObject({ minimum: 60, maximum: 86400, default: 600 });
    const exportOp = body.paths['/v1/actions/export'].get;
    expect(exportOp.parameters.map((p: { name: string }) => p.name)).toEqual(['since', 'until']);
  });

  it('also names the endpoints that are not registry operations: MCP, OAuth, metadata, the wake socket, metrics', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    for (const path of [
      '/mcp',
      '/oauth/authorize',
      '/oauth/token',
      '/oauth/revoke',
      '/oauth/register',
      '/.well-known/oauth-authorization-server',
      '/.well-known/oauth-protected-resource',
      '/.well-known/oauth-protected-resource/mcp',
      '/v1/device/{deviceId}/events',
      '/metrics',
    ]) {
      expect(body.paths[path], path).toBeDefined();
    }
    expect(body.paths['/v1/functions'].get.security).toContainEqual({ oauth: ['read'] });
    // An OAuth access token is accepted on a REST route as on its MCP tool (docs/reference/rules.md "Credentials").
    expect(body.paths['/v1/broadcasts'].post.security).toEqual([{ agentToken: [] }, { oauth: ['read'] }]);
    expect(body.paths['/v1/devices/{deviceId}/actions'].post.security).toEqual([{ agentToken: [] }, { oauth: ['read'] }]);
  });
});

describe('GET /openapi.json servers', () => {
  it('names the origin the caller used, so requests from /docs stay same-origin on localhost and 127.0.0.1 alike', async () => {
    const port = new URL(server.url).port;
    expect(await serverOf(server.url, { host: `127.0.0.1:${port}` })).toBe(`http://127.0.0.1:${port}`);
    expect(await serverOf(server.url, { host: `localhost:${port}` })).toBe(`http://localhost:${port}`);
    const answer = await get(server.url, '/openapi.json');
    expect(answer.headers.vary).toContain('Host');
  });

  it('ignores X-Forwarded-Host and -Proto unless TRUST_PROXY_HOPS says a proxy is in front', async () => {
    const port = new URL(server.url).port;
    const forwarded = { host: `127.0.0.1:${port}`, 'x-forwarded-host': 'api.example.com', 'x-forwarded-proto': 'https' };
    expect(await serverOf(server.url, forwarded)).toBe(`http://127.0.0.1:${port}`);
    const proxied = await startTestServer({ env: { TRUST_PROXY_HOPS: '1' } });
    try {
      expect(await serverOf(proxied.url, forwarded)).toBe('https://api.example.com');
    } finally {
      await proxied.close();
    }
  });

  it('names PUBLIC_BASE_URL, when set, whatever the Host', async () => {
    const pinned = await startTestServer({ env: { PUBLIC_BASE_URL: 'https://devices.example.com/' } });
    try {
      expect(await serverOf(pinned.url, { host: 'localhost' })).toBe('https://devices.example.com');
      const { body } = await client(pinned.url).get('/openapi.json');
      expect(body.components.securitySchemes.oauth.flows.authorizationCode.tokenUrl).toBe('https://devices.example.com/oauth/token');
    } finally {
      await pinned.close();
    }
  });
});

describe('GET /openapi.json models', () => {
  it('names the shared shapes under components.schemas, each with an example that its schema accepts', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    const schemas = body.components.schemas as Record<string, { examples?: unknown[] }>;
    for (const name of ['Device', 'Capability', 'Action', 'Grant', 'Connection', 'NewConnection', 'AttachedDevice', 'Function', 'DeviceNext', 'Account']) {
      expect(schemas[name]?.examples, name).toHaveLength(1);
    }
    const ajv = new Ajv2020({ strict: false });
    addFormats.default(ajv);
    ajv.addFormat('int64', { type: 'number', validate: Number.isSafeInteger });
    ajv.addSchema({ $id: 'doc', components: body.components });
    for (const [name, schema] of Object.entries(schemas)) {
      if (!schema.examples) continue;
      const validate = ajv.getSchema(`doc#/components/schemas/${name}`)!;
      expect(validate(schema.examples[0]), `${name}: ${ajv.errorsText(validate.errors)}`).toBe(true);
    }
  });

  it('refers to them from the operations instead of repeating them', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    expect(body.paths['/v1/actions/{actionId}'].get.responses['200'].content['application/json'].schema.properties.data).toEqual({
      $ref: '#/components/schemas/Action',
    });
    expect(body.paths['/v1/devices'].get.responses['200'].content['application/json'].schema.properties.data.items).toEqual({
      $ref: '#/components/schemas/Device',
    });
    expect(body.components.schemas.Device.properties.capabilities.items).toEqual({ $ref: '#/components/schemas/Capability' });
  });

  it('shows timestamps as int64 integers, not bounded by ±(2^53 − 1)', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    expect(JSON.stringify(body)).not.toContain(String(Number.MAX_SAFE_INTEGER));
    expect(body.components.schemas.Action.properties.createdAt).toEqual({ type: 'integer', format: 'int64', description: 'Unix milliseconds' });
  });

  it('gives every operation its own operationId; the legacy aliases are suffixed Legacy', async () => {
    const { body } = await client(server.url).get('/openapi.json');
    const ids = Object.values(body.paths as Record<string, Record<string, { operationId: string }>>).flatMap((item) =>
      Object.values(item).map((op) => op.operationId),
    );
    expect(new Set(ids).size).toBe(ids.length);
    expect(body.paths['/v1/sdk-tokens'].post.operationId).toBe('setupTokens.createLegacy');
    expect(body.paths['/v1/sdk-tokens'].post.deprecated).toBe(true);
  });
});

describe('compression of the reference assets', () => {
  for (const path of ['/docs/scalar.js', '/openapi.json']) {
    it(`${path}: brotli or gzip when the client accepts it, the plain bytes otherwise`, async () => {
      const plain = await get(server.url, path);
      expect(plain.headers['content-encoding']).toBeUndefined();
      expect(plain.headers.vary).toContain('Accept-Encoding');
      const br = await get(server.url, path, { 'accept-encoding': 'gzip, br' });
      expect(br.headers['content-encoding']).toBe('br');
      expect(zlib.brotliDecompressSync(br.bytes).equals(plain.bytes)).toBe(true);
      const gz = await get(server.url, path, { 'accept-encoding': 'gzip, br;q=0' });
      expect(gz.headers['content-encoding']).toBe('gzip');
      expect(zlib.gunzipSync(gz.bytes).equals(plain.bytes)).toBe(true);
      expect(br.bytes.length).toBeLessThan(plain.bytes.length / 3);
    });
  }
});

describe('CORS', () => {
  const preflight = {
    origin: 'https://app.example.com',
    'access-control-request-method': 'POST',
    'access-control-request-headers': 'authorization, content-type',
  };

  it('is off by default: no Access-Control-Allow-Origin for any origin', async () => {
    const answer = await get(server.url, '/v1/devices', preflight, 'OPTIONS');
    expect(answer.headers['access-control-allow-origin']).toBeUndefined();
    const plain = await get(server.url, '/openapi.json', { origin: 'https://app.example.com' });
    expect(plain.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('allows exactly the origins of CORS_ALLOWED_ORIGINS on the REST API and /openapi.json, never on /mcp', async () => {
    const open = await startTestServer({ env: { CORS_ALLOWED_ORIGINS: 'https://app.example.com, http://localhost:3000' } });
    try {
      const allowed = await get(open.url, '/v1/devices', preflight, 'OPTIONS');
      expect(allowed.status).toBe(204);
      expect(allowed.headers['access-control-allow-origin']).toBe('https://app.example.com');
      expect(allowed.headers['access-control-allow-headers']?.toLowerCase()).toContain('authorization');
      const document = await get(open.url, '/openapi.json', { origin: 'http://localhost:3000' });
      expect(document.headers['access-control-allow-origin']).toBe('http://localhost:3000');
      const other = await get(open.url, '/v1/devices', { ...preflight, origin: 'https://evil.example' }, 'OPTIONS');
      expect(other.headers['access-control-allow-origin']).toBeUndefined();
      const mcp = await get(open.url, '/mcp', preflight, 'OPTIONS');
      expect(mcp.headers['access-control-allow-origin']).toBeUndefined();
    } finally {
      await open.close();
    }
  });
});

describe('GET /docs', () => {
  it('renders the reference with its script served locally, not from a CDN', async () => {
    const page = await fetch(`${server.url}/docs`).then((r) => r.text());
    expect(page).toContain('/openapi.json');
    expect(page).toContain('/docs/scalar.js');
    expect(page).not.toMatch(/https?:\/\/cdn\./);
    const script = await fetch(`${server.url}/docs/scalar.js`);
    expect(script.status).toBe(200);
    expect(script.headers.get('content-type')).toContain('javascript');
  });

  it('runs no inline script and loads scripts, styles and data only from this origin (Content-Security-Policy)', async () => {
    const response = await fetch(`${server.url}/docs`);
    const csp = response.headers.get('content-security-policy') ?? '';
    expect(csp).toContain("default-src 'none'");
    expect(csp).toContain("script-src 'self';");
    expect(csp).toContain("connect-src 'self';");
    const page = await response.text();
    const executable = [...page.matchAll(/<script([^>]*)>([\s\S]*?)<\/script>/g)].filter(([, attributes]) => !attributes!.includes('application/json'));
    expect(executable.length).toBeGreaterThan(0);
    for (const [, attributes, body] of executable) {
      expect(attributes).toMatch(/src="\/docs\//);
      expect(body).toBe('');
    }
  });
});

import { Validator } from '@seriousme/openapi-schema-validator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { routes } from '../src/rest/routes.js';
import { client } from './helpers/api.js';
import { startTestServer, type TestServer } from './helpers/server.js';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(() => server.close());

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
      expect(op.operationId).toBe(route.operation.name);
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
    expect(next.parameters.map((p: { in: string; name: string }) => `${p.in}:${p.name}`)).toEqual(['path:deviceId', 'header:x-service-workspace']);
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
    expect(body.paths['/v1/broadcasts'].post.security).toEqual([{ agentToken: [] }]);
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
});

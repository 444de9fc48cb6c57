import { describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { useTestServer } from '../helpers/server.js';

const server = useTestServer();

describe('GET /healthz', () => {
  it('answers the hosted Health object unwrapped, with no credential', async () => {
    const res = await client(server.url).get('/healthz');
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ service: 'dfc', protocolVersion: 1, authConfigured: true, deviceControlsEnabled: true });
    expect(res.headers.get('x-request-id')).toMatch(/.+/);
  });
});

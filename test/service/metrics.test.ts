import { describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { connectDevice } from '../helpers/ws.js';

const METRICS_TOKEN = 'metrics-secret-for-tests-0123456789';

const server = useTestServer({ env: { METRICS_TOKEN } });
const http = server.api;

describe('GET /metrics', () => {
  it('answers 401 without the metrics token and 401 with a wrong one', async () => {
    expect((await http.get('/metrics')).status).toBe(401);
    expect((await http.get('/metrics', { token: 'metrics-secret-for-tests-XXXXXXXXXX' })).status).toBe(401);
  });

  it('exposes requests by route and status, actions by status and the queue depth', async () => {
    const owner = await server.ownerToken('alice');
    const lamp = await attachDevice(http, owner);
    const agent = await createAgent(http, owner);
    await http.post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['get_state'] } });
    const socket = await connectDevice(http, server.url, lamp);
    await http.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'get_state', arguments: {} } });
    await http.post(`/v1/devices/${lamp.id}/actions`, { token: agent.token, body: { capability: 'get_state', arguments: {} } });
    await socket.nextFrame();
    await socket.nextFrame();
    await http.post(`/v1/device/${lamp.id}/next`, { token: lamp.token, headers: { 'x-service-workspace': lamp.workspace } });

    const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toContain('text/plain');
    const text = await res.text();
    expect(text).toMatch(/dfc_http_requests_total\{method="POST",route="\/v1\/devices\/:deviceId\/actions",status="201"\} 2/);
    expect(text).toMatch(/dfc_actions_total\{status="queued"\} 2/);
    expect(text).toMatch(/dfc_actions_total\{status="received"\} 1/);
    expect(text).toMatch(/dfc_actions_queued 1/);
    expect(text).toMatch(/dfc_device_sockets_open 1/);
    expect(text).toMatch(/dfc_wake_latency_seconds_count 2/);
    socket.ws.close();
  });
});

describe('GET /metrics without METRICS_TOKEN', () => {
  it('is switched off with 503 not_configured', async () => {
    const bare = await startTestServer();
    try {
      const res = await client(bare.url).get('/metrics');
      expect(res.status).toBe(503);
      expect(res.body.error.code).toBe('not_configured');
    } finally {
      await bare.close();
    }
  });
});

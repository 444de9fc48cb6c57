import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from './helpers/api.js';
import { attachDevice, createAgent, type AttachedDevice } from './helpers/fixtures.js';
import { startTestServer, type TestServer } from './helpers/server.js';

let server: TestServer;
let http: Client;
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };

beforeAll(async () => {
  server = await startTestServer();
  http = client(server.url);
  owner = await server.ownerToken('alice');
  lamp = await attachDevice(http, owner);
  agent = await createAgent(http, owner, { access: 'act' });
  const granted = await http.post('/v1/grants', {
    token: owner,
    body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['get_state', 'set_power', 'set_brightness'] },
  });
  expect(granted.status, JSON.stringify(granted.body)).toBe(201);
});
afterAll(() => server.close());

const poll = (device: AttachedDevice) =>
  http.post(`/v1/device/${device.id}/next`, { token: device.token, headers: { 'x-service-workspace': device.workspace } });

describe('request → next → result', () => {
  it('moves an action queued → received → succeeded and shows it to the agent and the owner', async () => {
    const requested = await http.post(`/v1/devices/${lamp.id}/actions`, {
      token: agent.token,
      body: { capability: 'set_power', arguments: { on: true } },
    });
    expect(requested.status, JSON.stringify(requested.body)).toBe(201);
    const action = requested.body.data;
    expect(action).toMatchObject({ status: 'queued', deviceId: lamp.id, capability: 'set_power', arguments: { on: true }, principal: agent.principal, dispatchedAt: null });
    expect(action.expiresAt - action.createdAt).toBe(30_000);

    const next = await poll(lamp);
    expect(next.status).toBe(200);
    expect(next.body.data).toMatchObject({ id: action.id, deviceId: lamp.id, capability: 'set_power', args: { on: true }, status: 'received' });
    expect((await poll(lamp)).body).toEqual({ data: null });

    const reported = await http.post(`/v1/device/${lamp.id}/result`, { token: lamp.token, body: { actionId: action.id, ok: true, result: { on: true } } });
    expect(reported.status, JSON.stringify(reported.body)).toBe(200);
    expect(reported.body.data).toMatchObject({ status: 'succeeded', result: { on: true } });

    const seen = await http.get(`/v1/actions/${action.id}`, { token: agent.token });
    expect(seen.body.data).toMatchObject({ status: 'succeeded', result: { on: true }, error: null });
    const history = await http.get('/v1/actions', { token: owner });
    expect(history.body.data[0].id).toBe(action.id);
  });

  it('rejects arguments that do not match the function schema with issues pointing at the field', async () => {
    const res = await http.post(`/v1/devices/${lamp.id}/actions`, {
      token: agent.token,
      body: { capability: 'set_brightness', arguments: { level: 101 } },
    });
    expect(res.status).toBe(400);
    expect(res.body.error.code).toBe('validation_failed');
    expect(res.body.error.issues).toEqual([{ path: 'arguments.level', message: expect.stringContaining('100') }]);
  });
});

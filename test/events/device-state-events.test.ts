import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { next, queue, report } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { openSse, type SseEvent, type SseStream } from '../helpers/sse.js';
import { grantedWorld } from '../helpers/world.js';

// device.state_changed (docs/devices/state.md, docs/reference/events.md): on the owner's
// stream and webhooks, at most one per device and function per second, the latest value winning.

const clock = manualClock();
const server = useTestServer({ clock, env: { EVENTS_POLL_SECONDS: '0.2', OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05' } });

const open: SseStream[] = [];
afterAll(() => open.forEach((sse) => sse.close()));

async function stream(owner: string): Promise<SseStream> {
  const sse = await openSse(`${server.url}/v1/events`, { token: owner });
  expect(sse.status).toBe(200);
  open.push(sse);
  return sse;
}

const parsed = (event: SseEvent) => JSON.parse(event.data) as { type: string; data: Record<string, unknown> };
const stateEvent = (event: SseEvent) => parsed(event).type === 'device.state_changed';

function reportState(device: AttachedDevice, values: Record<string, unknown>) {
  return server.api.post(`/v1/device/${device.id}/state`, { token: device.token, body: { values } });
}

describe('device.state_changed on the owner stream', () => {
  it('carries the device, the function, the value and when it was reported', async () => {
    const owner = await server.ownerToken('state-events-first');
    const device = await attachDevice(server.api, owner);
    const sse = await stream(owner);
    expect((await reportState(device, { get_state: { on: true } })).status).toBe(200);
    const event = parsed(await sse.nextWhere(stateEvent, 5000));
    expect(event.data).toEqual({ deviceId: device.id, capability: 'get_state', value: { on: true }, reportedAt: clock.now() });
  });

  it('journals a read result that changed the value', async () => {
    const { owner, device, agent } = await grantedWorld(server, 'state-events-result', { capabilities: ['get_state'] });
    const sse = await stream(owner);
    const action = await queue(server.api, agent.token, device.id, { capability: 'get_state', arguments: {} });
    await next(server.api, device);
    expect((await report(server.api, device, { actionId: action.id, ok: true, result: { on: false } })).status).toBe(200);
    expect(parsed(await sse.nextWhere(stateEvent, 5000)).data).toMatchObject({ deviceId: device.id, capability: 'get_state', value: { on: false } });
  });

  it('writes at most one a second per device and function, then the latest value, and none for an equal value', async () => {
    const owner = await server.ownerToken('state-events-coalesced');
    const device = await attachDevice(server.api, owner);
    const sse = await stream(owner);
    await reportState(device, { get_state: { on: true, level: 1 } });
    expect(parsed(await sse.nextWhere(stateEvent, 5000)).data.value).toEqual({ on: true, level: 1 });
    // Within the second: owed, not written.
    clock.advance(100);
    await reportState(device, { get_state: { on: true, level: 2 } });
    clock.advance(100);
    await reportState(device, { get_state: { on: true, level: 3 } });
    // The second passes: the sweep writes the latest value alone.
    clock.advance(1000);
    const owed = parsed(await sse.nextWhere(stateEvent, 5000));
    expect(owed.data.value).toEqual({ on: true, level: 3 });
    expect(sse.skipped.filter(stateEvent).map((e) => parsed(e).data.value)).not.toContainEqual({ on: true, level: 2 });

    // An equal value, a second later, writes nothing; the next change does.
    clock.advance(2000);
    await reportState(device, { get_state: { on: true, level: 3 } });
    clock.advance(2000);
    await reportState(device, { get_state: { on: false } });
    const changed = parsed(await sse.nextWhere(stateEvent, 5000));
    expect(changed.data.value).toEqual({ on: false });
    expect(sse.skipped.filter(stateEvent)).toHaveLength(0);
  });
});

describe('device.state_changed on webhooks', () => {
  const received: string[] = [];
  const receiver = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      received.push(Buffer.concat(chunks).toString('utf8'));
      response.writeHead(200).end();
    });
  });
  beforeAll(() => new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve)));
  afterAll(() => new Promise<void>((resolve) => receiver.close(() => resolve())));

  it('delivers it to a webhook that asked for it', async () => {
    const owner = await server.ownerToken('state-events-webhook');
    const device = await attachDevice(server.api, owner);
    const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/state`;
    const hook = await server.api.post('/v1/webhooks', { token: owner, body: { url, events: ['device.state_changed'] } });
    expect(hook.status, JSON.stringify(hook.body)).toBe(201);
    await reportState(device, { get_state: { on: true } });
    await expect
      .poll(() => received.map((body) => JSON.parse(body) as { type: string; data: Record<string, unknown> }), { timeout: 10_000 })
      .toContainEqual(expect.objectContaining({ type: 'device.state_changed', data: expect.objectContaining({ deviceId: device.id, value: { on: true } }) }));
  });
});

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { beforeAll, describe, expect, it, vi } from 'vitest';
import { grant, next, queue } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest } from '../helpers/fixtures.js';
import { openSse } from '../helpers/sse.js';
import { useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

// A hostile review of "a human in the loop" (docs/owners/approvals.md "Approvals: the owner says yes first",
// "Webhooks"; docs/reference/rules.md "Approvals"): what an agent, an owner of another workspace or a
// hostile webhook receiver could try, and what must hold.

let owner: string;

const server = useTestServer({
  // WEBHOOK_TIMEOUT_SECONDS is long on purpose: an attempt must not hold its connection until then.
  env: { OAUTH_CIMD_ALLOW_LOOPBACK: 'true', WEBHOOK_POLL_SECONDS: '0.05', WEBHOOK_TIMEOUT_SECONDS: '600' },
});
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('approvals-hostile');
});

type Action = Record<string, any>;

const approve = (id: string, token = owner) => api.post(`/v1/actions/${id}/approve`, { token, body: {} });
const reject = (id: string, token = owner) => api.post(`/v1/actions/${id}/reject`, { token, body: {} });
const read = async (id: string): Promise<Action> => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;

describe('a stricter approval mode given to a live grant', () => {
  it('keeps an action queued under the old none grant from reaching the device without a yes', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'] });
    const queued = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(queued.status).toBe('queued');

    // The owner now wants to say yes first: the same function granted again, in owner mode.
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    expect((await next(api, lamp)).body.data).toBeNull();
    expect(await read(queued.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_revoked' });
  });

  it('still hands out an action the owner approved after a re-grant in the same mode', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
    const waiting = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    expect((await approve(waiting.id)).status).toBe(200);
    expect((await next(api, lamp)).body.data).toMatchObject({ id: waiting.id });
  });
});

describe('approving after the function changed under the waiting action', () => {
  it('cancels it function_changed (409), and the device is never handed it', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'], ttlSeconds: null, approval: 'owner' });
    const waiting = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    // The device now wants another argument: the owner would be approving a call it no longer understands.
    const capabilities = (lampManifest.capabilities as { name: string }[]).map((c) =>
      c.name === 'set_power'
        ? { ...c, arguments: { type: 'object', properties: { level: { type: 'integer' } }, required: ['level'], additionalProperties: false } }
        : c,
    );
    const published = await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: { capabilities } });
    expect(published.status, JSON.stringify(published.body)).toBe(200);
    const res = await approve(waiting.id);
    expect(res.status).toBe(409);
    expect(await read(waiting.id)).toMatchObject({ status: 'cancelled', cancelReason: 'function_changed' });
    expect((await next(api, lamp)).body.data).toBeNull();
  });
});

describe('concurrent decisions on one waiting action', () => {
  it('has exactly one outcome among approvals, rejections and a revocation sent at once; a revoked one never reaches the device', async () => {
    for (let round = 0; round < 5; round++) {
      const lamp = await attachDevice(api, owner);
      const agent = await createAgent(api, owner);
      const [given] = await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
      const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
      const answers = await Promise.all([
        approve(action.id),
        reject(action.id),
        approve(action.id),
        api.post('/v1/grants/revoke', { token: owner, body: { grantId: given!.id } }),
        approve(action.id),
      ]);
      expect(answers[3]!.status).toBe(200);
      const decisions = [answers[0]!, answers[1]!, answers[2]!, answers[4]!];
      expect(decisions.filter((res) => res.status === 200).length).toBeLessThanOrEqual(1);
      expect(decisions.every((res) => res.status === 200 || res.status === 409)).toBe(true);
      // Whichever decision came first, the revocation ends what an approval queued.
      expect(['rejected', 'cancelled']).toContain((await read(action.id)).status);
      expect((await next(api, lamp)).body.data).toBeNull();
    }
  });
});

describe('a hostile webhook receiver', () => {
  it('answering 200 with an endless body does not keep the connection open until the attempt deadline', async () => {
    let closed = false;
    const receiver = http.createServer((_request, response) => {
      response.writeHead(200, { 'content-type': 'application/octet-stream' });
      const chunk = Buffer.alloc(64 * 1024, 97);
      const pump = () => {
        while (!response.destroyed && response.write(chunk));
        if (!response.destroyed) response.once('drain', pump);
      };
      response.on('close', () => {
        closed = true;
      });
      pump();
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    try {
      const url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/endless`;
      const lamp = await attachDevice(api, owner);
      const hook = await api.post('/v1/webhooks', { token: owner, body: { url, events: ['grant.created'] } });
      expect(hook.status, JSON.stringify(hook.body)).toBe(201);
      await grant(api, owner, 'agent:endless', lamp.id, ['set_power']);
      await vi.waitFor(
        async () => {
          const deliveries = (await api.get(`/v1/webhooks/${hook.body.data.id}/deliveries`, { token: owner })).body.data;
          expect(deliveries[0]).toMatchObject({ status: 'delivered', lastStatusCode: 200 });
        },
        { timeout: 15_000, interval: 50 },
      );
      await vi.waitFor(() => expect(closed).toBe(true), { timeout: 15_000, interval: 50 });
    } finally {
      receiver.closeAllConnections();
      await new Promise<void>((resolve) => receiver.close(() => resolve()));
    }
  });
});

describe('GET /v1/events and the token that opened it', () => {
  it('ends the stream cleanly when the owner token expires, rather than streaming on for whoever held it', async () => {
    const shortLived = await server.ownerToken('approvals-hostile', { expiresIn: '2s' });
    const sse = await openSse(`${server.url}/v1/events`, { token: shortLived });
    expect(sse.status).toBe(200);
    expect(await sse.ended).toEqual({ clean: true });
    // Reconnecting with the same token is refused: a fresh one is needed.
    expect((await api.get('/v1/events', { token: shortLived })).status).toBe(401);
  }, 30_000);
});

import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * Exactly-once delivery under contention: 1,000 queued actions, 100 concurrent
 * pollers of the same device, each polling until the queue answers null. Every action must
 * be handed out exactly once: none twice, none lost.
 */
const ACTIONS = 1000;
const POLLERS = 100;

let lamp: AttachedDevice;
const queued: string[] = [];

const server = useTestServer({ env: { DEVICE_QUEUE_PER_PRINCIPAL: String(ACTIONS), EXPIRY_SWEEP_SECONDS: '3600' } });
const api = server.api;

beforeAll(async () => {
  const owner = await server.ownerToken('pollers-owner');
  const agent = await createAgent(api, owner, { access: 'act' });
  lamp = await attachDevice(api, owner);
  await grant(api, owner, agent.principal, lamp.id, ['set_brightness']);
  // Ten requesters at a time; a long TTL so nothing expires while the pollers run.
  for (let batch = 0; batch < ACTIONS / 10; batch++) {
    const answers = await Promise.all(
      Array.from({ length: 10 }, (_, i) =>
        api.post(`/v1/devices/${lamp.id}/actions`, {
          token: agent.token,
          body: { capability: 'set_brightness', arguments: { level: (batch * 10 + i) % 101 }, ttlSeconds: 300 },
        }),
      ),
    );
    for (const res of answers) {
      expect(res.status, JSON.stringify(res.body)).toBe(201);
      queued.push(res.body.data.id);
    }
  }
}, 60_000);

describe('POST /v1/device/{deviceId}/next under 100 concurrent pollers', () => {
  it(`hands each of ${ACTIONS} queued actions to exactly one poll`, async () => {
    const delivered: string[] = [];
    const poller = async () => {
      for (;;) {
        const res = await next(api, lamp);
        expect(res.status, JSON.stringify(res.body)).toBe(200);
        if (res.body.data === null) return;
        delivered.push(res.body.data.id);
      }
    };
    await Promise.all(Array.from({ length: POLLERS }, poller));

    expect(delivered).toHaveLength(ACTIONS);
    expect(new Set(delivered).size).toBe(ACTIONS);
    expect([...delivered].sort()).toEqual([...queued].sort());
    const history = (await api.get('/v1/actions/export', { token: await server.ownerToken('pollers-owner') })).body.data.actions as { status: string }[];
    expect(history.filter((a) => a.status !== 'received')).toEqual([]);
  }, 60_000);
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client, type Client } from './helpers/api.js';
import { grant, next, queue } from './helpers/actions.js';
import { attachDevice, createAgent } from './helpers/fixtures.js';
import { startTestServer, type TestServer } from './helpers/server.js';

// A hostile review of "a human in the loop" (README "Approvals: the owner says yes first",
// "Webhooks"; docs/rules.md "Approvals"): what an agent, an owner of another workspace or a
// hostile webhook receiver could try, and what must hold.

let server: TestServer;
let api: Client;
let owner: string;

beforeAll(async () => {
  server = await startTestServer();
  api = client(server.url);
  owner = await server.ownerToken('approvals-hostile');
});
afterAll(() => server.close());

type Action = Record<string, any>;

const approve = (id: string, token = owner) => api.post(`/v1/actions/${id}/approve`, { token, body: {} });
const reject = (id: string, token = owner) => api.post(`/v1/actions/${id}/reject`, { token, body: {} });
const read = async (id: string): Promise<Action> => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;

describe('a stricter approval mode given to a live grant', () => {
  it('keeps an action queued under the old none grant from reaching the device without a yes', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    await grant(api, owner, agent.principal, lamp.id, ['set_power']);
    const queued = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(queued.status).toBe('queued');

    // The owner now wants to say yes first: the same function granted again, in owner mode.
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    expect((await next(api, lamp)).body.data).toBeNull();
    expect(await read(queued.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_revoked' });
  });

  it('still hands out an action the owner approved after a re-grant in the same mode', async () => {
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    const waiting = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], null, 'owner');
    expect((await approve(waiting.id)).status).toBe(200);
    expect((await next(api, lamp)).body.data).toMatchObject({ id: waiting.id });
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

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';
import { startTestServer, type TestServer } from '../helpers/server.js';

/**
 * A grant's budget (docs/owners/grants.md "Conditions") with two instances on one libSQL server:
 * the count is read in the statement that creates the action, on the database both share, so
 * requests spread over the instances never overshoot it.
 */

let sqld: TestSqld;
beforeAll(async () => {
  sqld = await startSqld();
}, 30_000);
afterAll(() => sqld?.stop());

describe('a grant budget across two instances of one database', () => {
  const instances: TestServer[] = [];
  afterAll(() => Promise.all(instances.map((instance) => instance.close())));

  it('creates exactly max actions from 40 concurrent requests split over both', async () => {
    const env = { DATABASE_URL: sqld.url, EXPIRY_SWEEP_SECONDS: '3600' };
    // One after another: the first brings the schema up to date, the other finds it so.
    for (let i = 0; i < 2; i++) instances.push(await startTestServer({ env }));
    const apis = instances.map((instance) => client(instance.url));
    const owner = await instances[0]!.ownerToken('budget-instances-owner');
    const agent = await createAgent(apis[0]!, owner, { access: 'act' });
    const lamp = await attachDevice(apis[0]!, owner);
    const granted = await apis[0]!.post('/v1/grants', {
      token: owner,
      body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'], conditions: { budget: { max: 10, perSeconds: 3600 } } },
    });
    expect(granted.status, JSON.stringify(granted.body)).toBe(201);

    const answers = await Promise.all(
      Array.from({ length: 40 }, (_, i) =>
        apis[i % 2]!.post(`/v1/devices/${lamp.id}/actions`, {
          token: agent.token,
          body: { capability: 'set_brightness', arguments: { level: i }, ttlSeconds: 300 },
        }),
      ),
    );
    const statuses = answers.map((res) => res.status);
    expect(statuses.filter((status) => status === 201)).toHaveLength(10);
    expect(answers.filter((res) => res.status !== 201).map((res) => res.body.error?.code)).toEqual(Array.from({ length: 30 }, () => 'grant_budget_exhausted'));
    const exported = await apis[0]!.get('/v1/actions/export', { token: owner });
    expect((exported.body.data.actions as { deviceId: string }[]).filter((action) => action.deviceId === lamp.id)).toHaveLength(10);
  }, 90_000);
});

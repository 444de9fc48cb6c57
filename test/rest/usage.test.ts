import { beforeAll, describe, expect, it } from 'vitest';
import { queue } from '../helpers/actions.js';
import { attachDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

/** GET /v1/usage: the workspace's use of each limit beside the limit the checks use. */

let owner: string;

const server = useTestServer({ env: { WORKSPACE_MAX_DEVICES: '7', WORKSPACE_MAX_STORED_ACTIONS: '500' } });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('usage-owner');
});

describe('GET /v1/usage', () => {
  it("counts what the workspace holds beside the configured limits, and only this workspace's", async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['get_state', 'set_power'] });
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const other = await server.ownerToken('usage-other');
    await attachDevice(api, other);

    const res = await api.get('/v1/usage', { token: owner });
    expect(res.status).toBe(200);
    const { capacity, storage } = res.body.data;
    expect(capacity.devices).toEqual({ used: 1, limit: 7 });
    expect(capacity.grants.used).toBe(2);
    expect(capacity.agentConnections.used).toBe(1);
    expect(capacity.pendingActions.used).toBe(1);
    expect(capacity.scheduledActions).toEqual({ used: 0, limit: 1000 });
    expect(storage.actions).toEqual({ used: 1, limit: 500 });
    expect(storage.action_bytes.used).toBeGreaterThan(0);
    expect(Object.keys(capacity).sort()).toEqual(
      ['agentConnections', 'devices', 'enrollmentCodes', 'grants', 'oauthClients', 'pendingActions', 'scheduledActions', 'setupTokens', 'webhooks'].sort(),
    );
  });
});

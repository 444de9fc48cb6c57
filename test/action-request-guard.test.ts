import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getAction, insertActionIfAllowed, type NewActionRow } from '../src/store/actions.js';
import { client, type Client } from './helpers/api.js';
import { grant, queue } from './helpers/actions.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from './helpers/fixtures.js';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * An action request reads and decides outside any transaction, then creates the action with one
 * statement that checks again (docs/rules.md "Actions"; docs/performance.md "On a libSQL server
 * (sqld)"). These tests make the change a concurrent request could make between the two — after
 * the checks were read, before the statement runs — and show the statement creates nothing.
 */

const PER_PRINCIPAL = 3;
let server: TestServer;
let api: Client;
let owner: string;
let agent: { id: string; token: string; principal: string };
let lamp: AttachedDevice;
let workspaceId: string;

beforeAll(async () => {
  server = await startTestServer({ env: { DEVICE_QUEUE_PER_PRINCIPAL: String(PER_PRINCIPAL) } });
  api = client(server.url);
});

afterAll(() => server.close());

beforeEach(async () => {
  owner = await server.ownerToken(`guard-${randomUUID()}`);
  agent = await createAgent(api, owner, { access: 'act', principal: 'agent:guarded' });
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  await grant(api, owner, agent.principal, lamp.id, ['set_power']);
  // One action already queued by the principal: the queue case fills the rest of its share.
  await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
  workspaceId = (await server.service.db.get<{ workspaceId: string }>('SELECT workspace_id AS workspaceId FROM devices WHERE id = ?', [lamp.id]))!.workspaceId;
});

function planned(overrides: Partial<NewActionRow> = {}): NewActionRow {
  const now = Date.now();
  return {
    id: randomUUID(),
    workspaceId,
    deviceId: lamp.id,
    targetId: lamp.id,
    capability: 'set_power',
    arguments: '{"on":false}',
    principal: agent.principal,
    connectionId: agent.id,
    broadcastId: null,
    createdAt: now,
    status: 'queued',
    expiresAt: now + 30_000,
    approval: 'none',
    approvalExpiresAt: null,
    ttlSeconds: 30,
    decidedBy: null,
    decidedAt: null,
    ...overrides,
  };
}

const insert = (row: NewActionRow) => insertActionIfAllowed(server.service.db, row, { perPrincipalOnDevice: PER_PRINCIPAL, perWorkspace: 10_000 });

describe('the guarded action insert', () => {
  it('creates the action, as planned, when nothing changed', async () => {
    const row = planned();
    const created = await insert(row);
    expect(created).toMatchObject({ id: row.id, status: 'queued', deviceId: lamp.id, principal: agent.principal, dispatchedAt: null });
    expect(await getAction(server.service.db, workspaceId, row.id)).toEqual(created);
  });

  const changes: [string, () => Promise<unknown>][] = [
    [
      'the grant was revoked',
      async () =>
        expect(
          (await api.post(`/v1/grants/revoke`, { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capability: 'set_power' } })).status,
        ).toBeLessThan(300),
    ],
    ['the device was revoked', async () => expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200)],
    ['the agent connection was revoked', async () => expect((await api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner })).status).toBe(200)],
    ['the function was re-granted to need the owner’s approval', () => grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'owner')],
    [
      'the function changed its argument schema',
      async () => {
        const changed = structuredClone(lampManifest);
        changed.capabilities[1]!.arguments = { type: 'object', properties: { on: { type: 'integer' } }, required: ['on'], additionalProperties: false };
        expect((await api.post(`/v1/device/${lamp.id}/manifest`, { token: lamp.token, body: changed })).status).toBe(200);
      },
    ],
    [
      'the principal’s share of the device queue filled',
      async () => {
        for (let i = 1; i < PER_PRINCIPAL; i++) await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
      },
    ],
  ];

  it.each(changes)('creates nothing when, after the checks were read, %s', async (_, change) => {
    await change();
    const row = planned();
    expect(await insert(row)).toBeUndefined();
    expect(await getAction(server.service.db, workspaceId, row.id)).toBeUndefined();
  });
});

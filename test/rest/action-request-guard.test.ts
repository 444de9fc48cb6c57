import { randomUUID } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { guardedActionInsert, insertActionIfAllowed, type NewActionRow } from '../../src/store/action-requests.js';
import { getAction } from '../../src/store/actions.js';
import { claimIdempotencyKey, releaseUnusedKey } from '../../src/store/idempotency.js';
import { authorizedFromListing, authorizeFunction, listCallableFunctionsOnDevices } from '../../src/domain/functions.js';
import { childrenOf, grant, hubManifest, queue, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * An action request reads and decides outside any transaction, then creates the action with one
 * statement that checks again (docs/reference/rules.md "Actions"; docs/performance.md "On a libSQL server
 * (sqld)"). These tests make the change a concurrent request could make between the two — after
 * the checks were read, before the statement runs — and show the statement creates nothing.
 */

const PER_PRINCIPAL = 3;
let owner: string;
let agent: { id: string; token: string; principal: string };
let lamp: AttachedDevice;
let workspaceId: string;

const server = useTestServer({ env: { DEVICE_QUEUE_PER_PRINCIPAL: String(PER_PRINCIPAL) } });
const api = server.api;

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

const insert = (row: NewActionRow) =>
  insertActionIfAllowed(server.service.db, row, {
    perPrincipalOnDevice: PER_PRINCIPAL,
    perWorkspace: 10_000,
    scheduledPerWorkspace: 1000,
    storage: server.config.capacity.storage,
  });

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
    ['the owner paused device control', async () => expect((await api.post('/v1/device-controls', { token: owner, body: { paused: true } })).status).toBe(200)],
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

describe('the action request with an idempotency key', () => {
  it('creates one action for requests racing with one key, and every one answers it as the first answer', async () => {
    const body = { capability: 'set_power', arguments: { on: false }, idempotencyKey: `race-${randomUUID()}` };
    const answers = await Promise.all(Array.from({ length: 8 }, () => requestAction(api, agent.token, lamp.id, body)));
    for (const answer of answers) expect(answer.status, JSON.stringify(answer.body)).toBe(201);
    const ids = new Set(answers.map((answer) => answer.body.data.id as string));
    expect(ids.size).toBe(1);
    const [id] = [...ids];
    const rows = await server.service.db.all<{ id: string }>('SELECT id FROM actions WHERE device_id = ? AND arguments = ?', [lamp.id, '{"on":false}']);
    expect(rows.map((row) => row.id)).toEqual([id]);
    for (const answer of answers) expect(answer.body.data).toEqual(answers[0]!.body.data);
    // The answer recorded for the key is the action as the database holds it.
    const read = await api.get(`/v1/actions/${id}`, { token: agent.token });
    expect(read.body.data).toEqual(answers[0]!.body.data);
  });

  it('gives the key back when the guarded insert refuses the action', async () => {
    const scope = { workspaceId, principal: agent.principal, key: `refused-${randomUUID()}` };
    expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    const row = planned();
    const response = JSON.stringify({ id: row.id });
    const limits = { perPrincipalOnDevice: PER_PRINCIPAL, perWorkspace: 10_000, scheduledPerWorkspace: 1000, storage: server.config.capacity.storage };
    const [claimed, inserted, released] = await server.service.db.batch([
      claimIdempotencyKey(scope, { requestHash: 'h', response, createdAt: row.createdAt }, row.createdAt - 1000),
      guardedActionInsert(row, limits, { ...scope, response }),
      releaseUnusedKey(scope, response, row.id),
    ]);
    expect([claimed!.changes, inserted!.changes, released!.changes]).toEqual([1, 0, 1]);
    expect(await server.service.db.get('SELECT key FROM idempotency_keys WHERE key = ?', [scope.key])).toBeUndefined();
  });

  it('creates nothing under a key another request holds', async () => {
    const scope = { workspaceId, principal: agent.principal, key: `held-${randomUUID()}` };
    const row = planned();
    const limits = { perPrincipalOnDevice: PER_PRINCIPAL, perWorkspace: 10_000, scheduledPerWorkspace: 1000, storage: server.config.capacity.storage };
    await server.service.db.batch([
      claimIdempotencyKey(scope, { requestHash: 'first', response: '{"first":true}', createdAt: row.createdAt }, row.createdAt - 1000),
    ]);
    const response = JSON.stringify({ id: row.id });
    const [claimed, inserted] = await server.service.db.batch([
      claimIdempotencyKey(scope, { requestHash: 'second', response, createdAt: row.createdAt }, row.createdAt - 1000),
      guardedActionInsert(row, limits, { ...scope, response }),
      releaseUnusedKey(scope, response, row.id),
    ]);
    expect([claimed!.changes, inserted!.changes]).toEqual([0, 0]);
    expect(await getAction(server.service.db, workspaceId, row.id)).toBeUndefined();
    expect(await server.service.db.get('SELECT response FROM idempotency_keys WHERE key = ?', [scope.key])).toEqual({ response: '{"first":true}' });
  });
});

/**
 * An MCP device tool call hands the action request the access its gate read in the same
 * request (`Context.callable`) instead of a second read (docs/contributors/performance-history.md "One access read
 * per MCP call"). That is sound only if the listing says exactly what the access check says;
 * the guarded insert above then checks both the same way.
 */
describe('the access an agent’s listing shows for a function', () => {
  async function bothReads(deviceId: string, capability: string) {
    const credential = { kind: 'agent' as const, workspaceId, connectionId: agent.id, principal: agent.principal, access: 'act' as const, functionsVersion: 0 };
    const now = Date.now();
    const listed = (await listCallableFunctionsOnDevices(server.service.db, credential, now, deviceId)).find(
      (fn) => fn.deviceId === deviceId && fn.capability === capability,
    );
    const checked = await authorizeFunction(server.service.db, credential, deviceId, capability, now);
    return { fromListing: authorizedFromListing(listed!), checked };
  }

  it('is the access check’s own answer for a device’s function, without and with the owner’s approval', async () => {
    const plain = await bothReads(lamp.id, 'set_power');
    expect(plain.fromListing).toEqual({ deviceId: lamp.id, capability: 'set_power', fn: plain.checked });
    expect(plain.checked).toMatchObject({ targetId: lamp.id, kind: 'control', approval: 'none' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'owner');
    const strict = await bothReads(lamp.id, 'set_power');
    expect(strict.fromListing).toEqual({ deviceId: lamp.id, capability: 'set_power', fn: strict.checked });
    expect(strict.checked.approval).toBe('owner');
  });

  it('is the access check’s own answer for a gateway child’s function, which its gateway fetches', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const bulb = (await childrenOf(api, owner, hub.id)).Bulb!;
    await grant(api, owner, agent.principal, bulb, ['set_power'], undefined, 'user');
    const { fromListing, checked } = await bothReads(bulb, 'set_power');
    expect(fromListing).toEqual({ deviceId: bulb, capability: 'set_power', fn: checked });
    expect(checked).toMatchObject({ targetId: hub.id, approval: 'user' });
  });
});

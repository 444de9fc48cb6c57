import { describe, expect, it } from 'vitest';
import { eventIds } from '../../src/domain/event-ids.js';
import { toWorkspaceEvent, type WorkspaceEvent } from '../../src/domain/event-catalogue.js';
import { listWorkspaceEvents } from '../../src/store/event-journal.js';
import { grant, next, queue, report, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

// The workspace event journal (migration 0016): each change the owner's stream and webhooks
// report is recorded by trigger in the transaction that makes it.

const server = useTestServer();
const api = server.api;

/** The journal of the workspace a device was attached to (devices name it by routing id). */
async function journal(routingId: string): Promise<(WorkspaceEvent & { journalId: number })[]> {
  const workspace = await server.service.db.get<{ id: string }>('SELECT id FROM workspaces WHERE routing_id = ?', [routingId]);
  const ids = await eventIds({ db: server.service.db, clock: { now: Date.now } });
  return (await listWorkspaceEvents(server.service.db, workspace!.id, 0, 1000)).map((row) => ({ ...toWorkspaceEvent(row, ids), journalId: row.id }));
}

describe('the workspace event journal', () => {
  it("records an action's creation and each change of status, in order, with the action as it was", async () => {
    const owner = await server.ownerToken('journal-actions');
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'] });
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await next(api, lamp)).status).toBe(200);
    expect((await report(api, lamp, { actionId: action.id, ok: true, result: { on: true } })).status).toBe(200);

    const events = (await journal(lamp.workspace)).filter((event) => event.data.action?.id === action.id);
    expect(events.map((event) => [event.type, event.data.action!.status])).toEqual([
      ['action.created', 'queued'],
      ['action.updated', 'received'],
      ['action.updated', 'succeeded'],
    ]);
    expect(events[0]!.data.action!.arguments).toEqual({ on: true });
    expect(events[2]!.data.action!.result).toEqual({ on: true });
    const ids = events.map((event) => event.journalId);
    expect(ids).toEqual([...ids].sort((a, b) => a - b));
  });

  it('records grants given, replaced and revoked, with their approval mode', async () => {
    const owner = await server.ownerToken('journal-grants');
    const lamp = await attachDevice(api, owner);
    const [first] = await grant(api, owner, 'agent:j', lamp.id, ['set_power'], null, 'owner');
    const [second] = await grant(api, owner, 'agent:j', lamp.id, ['set_power']);
    expect((await api.post('/v1/grants/revoke', { token: owner, body: { grantId: second!.id } })).status).toBe(200);

    const events = (await journal(lamp.workspace)).filter((event) => event.type.startsWith('grant.'));
    expect(events.map((event) => [event.type, event.data.grant!.id, event.data.grant!.approval])).toEqual([
      ['grant.created', first!.id, 'owner'],
      ['grant.revoked', first!.id, 'owner'],
      ['grant.created', second!.id, 'none'],
      ['grant.revoked', second!.id, 'none'],
    ]);
  });

  it('records a grant changed in place, with its approval mode and expiry before and after', async () => {
    const owner = await server.ownerToken('journal-grant-update');
    const lamp = await attachDevice(api, owner);
    const [given] = await grant(api, owner, 'agent:ju', lamp.id, ['set_power'], null, 'owner');
    const changed = await api.post(`/v1/grants/${given!.id}/update`, { token: owner, body: { approval: 'none', ttlSeconds: 3600 } });
    expect(changed.status).toBe(200);

    const events = (await journal(lamp.workspace)).filter((event) => event.type === 'grant.updated');
    expect(events).toHaveLength(1);
    expect(events[0]!.data.grant).toMatchObject({
      id: given!.id,
      approval: 'none',
      expiresAt: changed.body.data.expiresAt,
      previous: { approval: 'owner', expiresAt: null },
    });
  });

  it('records device control paused and resumed, naming the owner, once per switch', async () => {
    const owner = await server.ownerToken('journal-pause');
    const lamp = await attachDevice(api, owner);
    for (const paused of [true, true, false, false]) {
      expect((await api.post('/v1/device-controls', { token: owner, body: { paused } })).status).toBe(200);
    }
    const events = (await journal(lamp.workspace)).filter((event) => event.type.startsWith('controls.'));
    expect(events.map((event) => event.type)).toEqual(['controls.paused', 'controls.resumed']);
    expect(events[0]!.data.controls).toEqual({ paused: true, by: 'journal-pause', pausedAt: events[0]!.createdAt });
    expect(events[1]!.data.controls).toEqual({ paused: false, by: 'journal-pause', pausedAt: events[0]!.createdAt });
  });

  it('records a device revoked', async () => {
    const owner = await server.ownerToken('journal-devices');
    const lamp = await attachDevice(api, owner);
    expect((await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner })).status).toBe(200);
    const events = (await journal(lamp.workspace)).filter((event) => event.type === 'device.revoked');
    expect(events).toHaveLength(1);
    expect(events[0]!.data.device).toMatchObject({ id: lamp.id, name: 'Lamp', kind: 'device', parentId: null });
  });

  it('records nothing for a request that was refused', async () => {
    const owner = await server.ownerToken('journal-refused');
    const lamp = await attachDevice(api, owner);
    const agent = await createAgent(api, owner);
    const before = (await journal(lamp.workspace)).length;
    expect((await requestAction(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } })).status).toBe(403);
    expect(
      (await api.post('/v1/grants', { token: owner, body: { principal: 'agent:j', deviceId: lamp.id, capabilities: ['set_power', 'no_such_function'] } }))
        .status,
    ).toBe(400);
    expect(await journal(lamp.workspace)).toHaveLength(before);
  });
});

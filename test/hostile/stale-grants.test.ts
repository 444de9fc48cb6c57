import { randomUUID } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { schemaFingerprint } from '../../src/domain/schema-fingerprints.js';
import { issueToken } from '../../src/domain/tokens.js';
import { EmbeddedDb } from '../../src/store/embedded.js';
import { loadMigrations, migrate } from '../../src/store/migrate.js';
import { client } from '../helpers/api.js';
import { childrenOf, grant, hubManifest, next, queue, requestAction } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, rawMcp } from '../helpers/mcp-client.js';
import { startTestServer, useTestServer } from '../helpers/server.js';
import { grantedDevice } from '../helpers/world.js';

// docs/reference/rules.md "Access": a grant applies to the function as the owner saw it (its kind and
// argument schema); a republish that changes or removes the function withdraws its commands.

let owner: string;

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('stale-grants-owner');
});

type Capability = { name: string; kind: string; description?: string; arguments: Record<string, unknown> };

/** The lamp's manifest with `get_state` changed (or left out with `null`). */
function lampWith(change: (c: Capability) => Capability | null) {
  return { capabilities: (lampManifest.capabilities as Capability[]).map((c) => (c.name === 'get_state' ? change(c) : c)).filter((c) => c !== null) };
}

async function publish(device: AttachedDevice, manifest: Record<string, unknown>) {
  const res = await api.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: manifest });
  expect(res.status, JSON.stringify(res.body)).toBe(200);
}

async function actionOf(id: string) {
  const res = await api.get(`/v1/actions/${id}`, { token: owner });
  expect(res.status).toBe(200);
  return res.body.data as { status: string; cancelReason: string | null; cancelRequestedAt: number | null };
}

async function grantsOf(principal: string, deviceId: string) {
  const res = await api.get(`/v1/grants?principal=${encodeURIComponent(principal)}&deviceId=${deviceId}`, { token: owner });
  expect(res.status).toBe(200);
  return res.body.data as { capability: string; functionKind: string | null; stale: Record<string, unknown> | null }[];
}

async function staleOf(principal: string, deviceId: string, capability: string) {
  return (await grantsOf(principal, deviceId)).find((g) => g.capability === capability)!.stale;
}

/** Device tools the agent sees over MCP (2026-07-28), and the functions GET /v1/functions lists for it. */
async function agentSees(token: string): Promise<{ tools: string[]; functions: string[] }> {
  const mcp = await connect(server.url, token, 'modern');
  try {
    const tools = (await mcp.listTools()).tools.map((t) => t.name).filter((name) => name.includes('__'));
    const functions = (await api.get('/v1/functions', { token })).body.data.map((f: { capability: string }) => f.capability);
    return { tools, functions };
  } finally {
    await mcp.close();
  }
}

async function expectGrantRequired(token: string, deviceId: string, capability: string) {
  const res = await requestAction(api, token, deviceId, { capability, arguments: {} });
  expect(res.status).toBe(403);
  expect(res.body.error.code).toBe('grant_required');
}

describe('a function republished with another kind', () => {
  it('stops a plain read grant: hidden, 403 grant_required, queued commands cancelled function_changed, listed as stale', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { agent: { access: 'act', principal: 'agent:kind-plain' }, capabilities: ['get_state'] });
    // Listed once before, so the cached tool list must follow the republish.
    const before = await agentSees(agent.token);
    expect(before).toEqual({ tools: [expect.stringContaining('get_state')], functions: ['get_state'] });
    const tool = before.tools[0]!;
    const queued = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });

    await publish(
      lamp,
      lampWith((c) => ({ ...c, kind: 'control' })),
    );

    expect(await actionOf(queued.id)).toMatchObject({ status: 'cancelled', cancelReason: 'function_changed' });
    await expectGrantRequired(agent.token, lamp.id, 'get_state');
    expect(await agentSees(agent.token)).toEqual({ tools: [], functions: [] });
    const call = await rawMcp(server.url, { token: agent.token, method: 'tools/call', name: tool, params: { name: tool, arguments: {} } });
    expect(call.status).toBe(403);
    expect(call.json.error.code).toBe('grant_required');
    expect(await staleOf(agent.principal, lamp.id, 'get_state')).toMatchObject({ reason: 'kind_changed', grantedKind: 'read', currentKind: 'control' });
    expect((await next(api, lamp)).body.data).toBeNull();
  });

  it("stops a gateway grant in read mode on the gateway's child", async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const bulb = (await childrenOf(api, owner, hub.id)).Bulb!;
    const agent = await createAgent(api, owner, { access: 'act', principal: 'agent:kind-gateway' });
    const granted = await api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: owner, body: { principal: agent.principal, mode: 'read' } });
    expect(granted.status).toBe(200);
    const queued = await queue(api, agent.token, bulb, { capability: 'get_state', arguments: {} });

    const bulbAsControl = {
      ...hubManifest,
      children: hubManifest.children.map((child) =>
        child.key === 'bulb' ? { ...child, capabilities: child.capabilities.map((c) => (c.name === 'get_state' ? { ...c, kind: 'control' } : c)) } : child,
      ),
    };
    await publish(hub, bulbAsControl);

    expect(await actionOf(queued.id)).toMatchObject({ status: 'cancelled', cancelReason: 'function_changed' });
    await expectGrantRequired(agent.token, bulb, 'get_state');
    expect((await agentSees(agent.token)).functions).toEqual(['hub_status']);
    expect(await staleOf(agent.principal, bulb, 'get_state')).toMatchObject({ reason: 'kind_changed', grantedKind: 'read', currentKind: 'control' });
    expect(await staleOf(agent.principal, hub.id, 'hub_status')).toBeNull();
  });
});

describe('a function republished with another argument schema', () => {
  it('stops its grants and cancels its queued commands, but a description change alone does not', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { agent: { access: 'act', principal: 'agent:schema' }, capabilities: ['get_state'] });
    const kept = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });

    // Annotations only: the function's description and a property's title and description.
    await publish(
      lamp,
      lampWith((c) => ({ ...c, description: 'Reworded.', arguments: { ...c.arguments, title: 'No arguments', description: 'Nothing to pass.' } })),
    );
    expect(await staleOf(agent.principal, lamp.id, 'get_state')).toBeNull();
    expect(await actionOf(kept.id)).toMatchObject({ status: 'queued', cancelReason: null });

    await publish(
      lamp,
      lampWith((c) => ({ ...c, arguments: { type: 'object', properties: { verbose: { type: 'boolean' } }, additionalProperties: false } })),
    );
    expect(await actionOf(kept.id)).toMatchObject({ status: 'cancelled', cancelReason: 'function_changed' });
    await expectGrantRequired(agent.token, lamp.id, 'get_state');
    expect(await staleOf(agent.principal, lamp.id, 'get_state')).toMatchObject({ reason: 'schema_changed', grantedKind: 'read', currentKind: 'read' });
  });
});

describe('a function removed from the manifest', () => {
  it('cancels its queued commands and recalls the handed-out one with function_removed; its grant shows stale', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, {
      agent: { access: 'act', principal: 'agent:removed' },
      capabilities: ['get_state', 'set_power'],
    });
    const handedOut = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect((await next(api, lamp)).body.data.id).toBe(handedOut.id);
    const queued = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    const other = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });

    await publish(
      lamp,
      lampWith(() => null),
    );

    expect(await actionOf(queued.id)).toMatchObject({ status: 'cancelled', cancelReason: 'function_removed' });
    const recalled = await actionOf(handedOut.id);
    expect(recalled).toMatchObject({ status: 'received', cancelReason: 'function_removed' });
    expect(recalled.cancelRequestedAt).toEqual(expect.any(Number));
    expect(await actionOf(other.id)).toMatchObject({ status: 'queued', cancelReason: null });
    expect(await staleOf(agent.principal, lamp.id, 'get_state')).toMatchObject({ reason: 'function_removed', grantedKind: 'read', currentKind: null });
    expect(await staleOf(agent.principal, lamp.id, 'set_power')).toBeNull();
  });

  it('keeps the grant stale when the name comes back with another schema, and live when it comes back identical', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { agent: { access: 'act', principal: 'agent:returns' }, capabilities: ['get_state'] });
    await publish(
      lamp,
      lampWith(() => null),
    );

    await publish(
      lamp,
      lampWith((c) => ({ ...c, arguments: { type: 'object' } })),
    );
    await expectGrantRequired(agent.token, lamp.id, 'get_state');
    expect(await staleOf(agent.principal, lamp.id, 'get_state')).toMatchObject({ reason: 'schema_changed' });

    // Exactly the function the owner granted: its fingerprint matches again.
    await publish(lamp, lampManifest);
    expect(await staleOf(agent.principal, lamp.id, 'get_state')).toBeNull();
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
  });
});

describe('granting again', () => {
  it('records the new kind and schema, so the grant is live again', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { agent: { access: 'act', principal: 'agent:regrant' }, capabilities: ['get_state'] });
    await publish(
      lamp,
      lampWith((c) => ({ ...c, kind: 'control' })),
    );
    await expectGrantRequired(agent.token, lamp.id, 'get_state');

    await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    expect(await grantsOf(agent.principal, lamp.id)).toEqual([expect.objectContaining({ capability: 'get_state', functionKind: 'control', stale: null })]);
    expect((await agentSees(agent.token)).functions).toEqual(['get_state']);
    await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
  });

  it('in a read-mode gateway grant, leaves a function that became control ungranted', async () => {
    const hub = await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest });
    const agent = await createAgent(api, owner, { access: 'act', principal: 'agent:regrant-gateway' });
    const grantRead = () => api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: owner, body: { principal: agent.principal, mode: 'read' } });
    expect((await grantRead()).status).toBe(200);
    const statusAsControl = { ...hubManifest, capabilities: hubManifest.capabilities.map((c) => (c.name === 'hub_status' ? { ...c, kind: 'control' } : c)) };
    await publish(hub, statusAsControl);
    expect((await grantRead()).status).toBe(200);
    expect((await grantsOf(agent.principal, hub.id)).map((g) => g.capability)).toEqual([]);
    await expectGrantRequired(agent.token, hub.id, 'hub_status');
  });
});

describe('fair queues (docs/reference/rules.md "Errors and limits")', () => {
  it("accepts another principal's request on a device whose queue one principal filled to its share of 20", async () => {
    const lamp = await attachDevice(api, owner);
    const flood = await createAgent(api, owner, { access: 'read', principal: 'agent:flood' });
    const door = await createAgent(api, owner, { access: 'act', principal: 'agent:door' });
    await grant(api, owner, flood.principal, lamp.id, ['get_state']);
    await grant(api, owner, door.principal, lamp.id, ['set_power']);
    for (let i = 0; i < 20; i++) await queue(api, flood.token, lamp.id, { capability: 'get_state', arguments: {} });
    const refused = await requestAction(api, flood.token, lamp.id, { capability: 'get_state', arguments: {} });
    expect(refused.status).toBe(429);
    expect(refused.body.error.code).toBe('capacity_exceeded');
    expect(refused.body.error.message).toContain('at most 20 queued actions per device');
    expect(refused.headers.get('retry-after')).toBe('1');
    await queue(api, door.token, lamp.id, { capability: 'set_power', arguments: { on: false } });
  });
});

describe('schema fingerprints', () => {
  it('ignore key order and annotations, but not a property that happens to be named description', () => {
    const schema = { type: 'object', properties: { description: { type: 'string', description: 'Free text.' } }, required: ['description'] };
    const reordered = { required: ['description'], title: 'Note', properties: { description: { description: 'Other text.', type: 'string' } }, type: 'object' };
    expect(schemaFingerprint(reordered)).toBe(schemaFingerprint(schema));
    expect(schemaFingerprint({ ...schema, properties: {} })).not.toBe(schemaFingerprint(schema));
    expect(schemaFingerprint({ ...schema, properties: { description: { type: 'integer' } } })).not.toBe(schemaFingerprint(schema));
  });
});

describe('migration 0014 on grants given before it', () => {
  it('records the kind and fingerprint of the published function; a grant whose function was gone never applies again', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-0014-'));
    const db = new EmbeddedDb(path.join(dir, 'service.db'));
    await migrate(
      db,
      loadMigrations().filter((m) => m.version < 14),
    );
    const [workspaceId, deviceId] = [randomUUID(), randomUUID()];
    const device = issueToken('device');
    const routingId = 'ab'.repeat(32);
    await db.run("INSERT INTO workspaces (id, external_id, routing_id, created_at) VALUES (?, 'migrated', ?, 1)", [workspaceId, routingId]);
    await db.run(
      "INSERT INTO devices (id, workspace_id, name, kind, token_hash, token_prefix, attached_via, created_at) VALUES (?, ?, 'Lamp', 'device', ?, 'x', 'x', 1)",
      [deviceId, workspaceId, device.hash],
    );
    for (const [position, c] of lampManifest.capabilities.entries()) {
      await db.run('INSERT INTO capabilities (device_id, workspace_id, name, kind, description, arguments, position) VALUES (?, ?, ?, ?, NULL, ?, ?)', [
        deviceId,
        workspaceId,
        c.name,
        c.kind,
        JSON.stringify(c.arguments),
        position,
      ]);
    }
    for (const capability of ['get_state', 'dim']) {
      await db.run(
        "INSERT INTO grants (id, workspace_id, principal, device_id, capability, created_by, created_at) VALUES (?, ?, 'agent:migrated', ?, ?, 'o', 1)",
        [randomUUID(), workspaceId, deviceId, capability],
      );
    }
    await db.close();

    const migrated = await startTestServer({ dir });
    try {
      const http = client(migrated.url);
      const ownerOf = await migrated.ownerToken('migrated');
      const listed = async () => (await http.get('/v1/grants?principal=agent:migrated', { token: ownerOf })).body.data as any[];
      const byName = async (name: string) => (await listed()).find((g) => g.capability === name);
      expect(await byName('get_state')).toMatchObject({
        functionKind: 'read',
        schemaFingerprint: schemaFingerprint(lampManifest.capabilities[0]!.arguments),
        stale: null,
      });
      expect(await byName('dim')).toMatchObject({ functionKind: null, schemaFingerprint: null, stale: { reason: 'function_removed' } });

      const agent = await createAgent(http, ownerOf, { access: 'act', principal: 'agent:migrated' });
      await queue(http, agent.token, deviceId, { capability: 'get_state', arguments: {} });
      const withDim = { capabilities: [...lampManifest.capabilities, { name: 'dim', kind: 'control', arguments: { type: 'object' } }] };
      const published = await http.post(`/v1/device/${deviceId}/manifest`, { token: device.token, body: withDim });
      expect(published.status, JSON.stringify(published.body)).toBe(200);
      expect((await byName('dim')).stale).toMatchObject({ reason: 'kind_changed', grantedKind: null, currentKind: 'control' });
      const res = await requestAction(http, agent.token, deviceId, { capability: 'dim', arguments: {} });
      expect(res.status).toBe(403);
      expect(res.body.error.code).toBe('grant_required');
    } finally {
      await migrated.close();
    }
  });
});

import { beforeAll, describe, expect, it } from 'vitest';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent, lampManifest } from '../helpers/fixtures.js';
import { rawMcp } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * A device chooses its function names, so it can aim two of them at one MCP
 * tool name. These two 60-character names share their first 41 characters and the first 8
 * hex digits of their SHA-256 (found by a birthday search in about a second), so both the
 * short form and the full-device-id form of their tool names used to be equal, and the SDK's
 * duplicate registration answered tools/list with 500.
 */
const COLLIDING = ['collide_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx00000000000000009uk', 'collide_xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx00000000000000022f4'];
const schema = { type: 'object', properties: {}, additionalProperties: false };

let owner: string;

const hex12 = (id: string) => id.replaceAll('-', '').slice(0, 12);

async function listNames(token: string): Promise<string[]> {
  const res = await rawMcp(server.url, { token, method: 'tools/list' });
  expect(res.status, res.text).toBe(200);
  return (res.json.result.tools as { name: string }[]).map((t) => t.name);
}

const server = useTestServer();
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('owner-tool-names');
});

describe('MCP tool names never collide', () => {
  it('gives two functions a device forced onto one name distinct, stable names, and each can be called', async () => {
    const device = await attachDevice(api, owner, {
      name: 'Forger',
      manifest: { capabilities: COLLIDING.map((name) => ({ name, kind: 'read', arguments: schema })) },
    });
    const agent = await createAgent(api, owner, { name: 'names', access: 'act', principal: 'agent:names' });
    await grant(api, owner, agent.principal, device.id, COLLIDING);

    const names = (await listNames(agent.token)).filter((n) => n.includes('__'));
    expect(names).toHaveLength(2);
    expect(new Set(names).size).toBe(2);
    for (const name of names) expect(name).toMatch(/^[a-z][a-z0-9_-]{0,37}__[0-9a-f]{12,24}$/);
    expect(names.every((n) => n.length <= 40)).toBe(true);
    // Stable: the same names on the next request, and a tools/call resolves each to its own function.
    expect(await listNames(agent.token)).toEqual(expect.arrayContaining(names));
    const called = new Set<string>();
    for (const name of names) {
      const res = await rawMcp(server.url, {
        token: agent.token,
        method: 'tools/call',
        name,
        params: { name, arguments: {}, _meta: { 'dfc/waitSeconds': 0 } },
      });
      expect(res.status, res.text).toBe(200);
      called.add(res.json.result.structuredContent.capability);
    }
    expect(called).toEqual(new Set(COLLIDING));
  });

  it('leaves ordinary names as they were: <capability>__<12 hex digits of the device id>', async () => {
    const lamp = await attachDevice(api, owner, { name: 'Lamp', manifest: lampManifest });
    const agent = await createAgent(api, owner, { name: 'plain', access: 'act', principal: 'agent:plain' });
    await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power']);
    const names = (await listNames(agent.token)).filter((n) => n.includes('__'));
    expect(names).toEqual([`get_state__${hex12(lamp.id)}`, `set_power__${hex12(lamp.id)}`]);
  });

  it('keeps every name within 40 characters, so a client that prefixes it (mcp__<server>__) stays within 64: a long capability gets a stable short hash', async () => {
    const long = 'adjust_the_colour_temperature_of_every_bulb_in_the_room_now';
    const device = await attachDevice(api, owner, {
      name: 'Long names',
      manifest: { capabilities: [long, 'set_colour_temperature_now'].map((name) => ({ name, kind: 'read', arguments: schema })) },
    });
    const agent = await createAgent(api, owner, { name: 'long', access: 'act', principal: 'agent:long-names' });
    await grant(api, owner, agent.principal, device.id, [long, 'set_colour_temperature_now']);
    const names = (await listNames(agent.token)).filter((n) => n.includes('__'));
    expect(names).toEqual([
      expect.stringMatching(new RegExp(`^adjust_the_colour_[0-9a-f]{8}__${hex12(device.id)}$`)),
      `set_colour_temperature_now__${hex12(device.id)}`,
    ]);
    expect(names.every((n) => n.length <= 40)).toBe(true);
    expect(await listNames(agent.token)).toEqual(expect.arrayContaining(names));
    const res = await rawMcp(server.url, {
      token: agent.token,
      method: 'tools/call',
      name: names[0],
      params: { name: names[0], arguments: {}, _meta: { 'dfc/waitSeconds': 0 } },
    });
    expect(res.json.result.structuredContent.capability).toBe(long);
  });
});

import { Client, StreamableHTTPClientTransport } from '@modelcontextprotocol/client';
import { EXTENSION_ID, RESOURCE_MIME_TYPE } from '@modelcontextprotocol/ext-apps/server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_VIEW_BYTES } from '../../src/mcp/device-view.js';
import { connect, MODERN, rawMcp, simulateDevice, toolName, type Era, type SimulatedDevice } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';
import { grantedWorld, type GrantedWorld } from '../helpers/world.js';

/**
 * MCP Apps (docs/agents/apps.md): the extension declared in both eras, the device view named by
 * the device tools and get_device_state, listed and read as an MCP Apps resource, and a client
 * that declares the extension seeing the same tools and answers as one that does not.
 */

const server = useTestServer();
const VIEW_URI = 'ui://device-function-control/device.html';

let world: GrantedWorld;
let device: SimulatedDevice;

beforeAll(async () => {
  world = await grantedWorld(server, 'owner-apps', { device: { name: 'Porch lamp' }, capabilities: ['get_state', 'set_power'] });
  device = simulateDevice(server.api, world.device, ({ capability, args }) => ({
    ok: true,
    result: capability === 'get_state' ? { on: true } : { on: args.on },
  }));
});

afterAll(async () => {
  await device.stop();
});

/** The official client declaring MCP Apps as a host does: the extension with the view's media type. */
async function connectHost(era: Era): Promise<Client> {
  const client = new Client(
    { name: 'dfc-apps-host', version: '1.0.0' },
    {
      capabilities: { extensions: { [EXTENSION_ID]: { mimeTypes: [RESOURCE_MIME_TYPE] } } },
      ...(era === 'modern' ? { versionNegotiation: { mode: { pin: MODERN } } } : {}),
    },
  );
  await client.connect(
    new StreamableHTTPClientTransport(new URL(`${server.url}/mcp`), { requestInit: { headers: { Authorization: `Bearer ${world.agent.token}` } } }),
  );
  return client;
}

/** An answer without what differs from call to call: the action's id and times, the request id. */
function stable(result: Record<string, unknown>): unknown {
  return JSON.parse(
    JSON.stringify(result)
      .replace(/[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g, '<id>')
      .replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>')
      .replace(/"(createdAt|expiresAt|dispatchedAt|completedAt|reportedAt|lastSeenAt)": ?\d+/g, '"$1":0')
      .replace(/\\"(createdAt|expiresAt|dispatchedAt|completedAt|reportedAt|lastSeenAt)\\": ?\d+/g, '\\"$1\\":0'),
  );
}

describe('the server/discover answer', () => {
  it('declares io.modelcontextprotocol/ui under capabilities.extensions, as an object', async () => {
    const res = await rawMcp(server.url, { token: world.agent.token, method: 'server/discover' });
    expect(res.json.result.capabilities.extensions[EXTENSION_ID]).toEqual({});
  });
});

describe.each<Era>(['modern', 'legacy'])('MCP Apps (%s client)', (era) => {
  let plain: Client;
  let host: Client;
  beforeAll(async () => {
    plain = await connect(server.url, world.agent.token, era);
    host = await connectHost(era);
  });
  afterAll(async () => {
    await plain.close();
    await host.close();
  });

  it('declares the extension in what the client reads of the server', () => {
    expect(plain.getServerCapabilities()?.extensions?.[EXTENSION_ID]).toEqual({});
  });

  it('names the device view in _meta.ui.resourceUri of each device tool and of get_device_state only', async () => {
    const { tools } = await plain.listTools();
    const named = tools.filter((t) => (t._meta?.ui as { resourceUri?: string } | undefined)?.resourceUri === VIEW_URI).map((t) => t.name);
    expect(named.sort()).toEqual(['get_device_state', toolName('get_state', world.device), toolName('set_power', world.device)].sort());
    for (const tool of tools) if (!named.includes(tool.name)) expect(tool._meta?.ui, tool.name).toBeUndefined();
    // Nothing but the one entry is added to a device tool: tools/list grows by it alone.
    expect(tools.find((t) => t.name === toolName('set_power', world.device))!._meta).toEqual({
      'dfc/deviceId': world.device.id,
      'dfc/capability': 'set_power',
      ui: { resourceUri: VIEW_URI },
    });
  });

  it('lists the view and reads it as text/html;profile=mcp-app with a CSP that names no outside domain', async () => {
    const listed = (await plain.listResources()).resources.find((r) => r.uri === VIEW_URI);
    expect(listed).toMatchObject({ mimeType: RESOURCE_MIME_TYPE, _meta: { ui: { csp: { connectDomains: [], resourceDomains: [] } } } });
    const read = await plain.readResource({ uri: VIEW_URI });
    const [content] = read.contents as { uri: string; mimeType: string; text: string; _meta: { ui: { csp: Record<string, string[]> } } }[];
    expect(content!.mimeType).toBe('text/html;profile=mcp-app');
    expect(content!._meta.ui.csp).toEqual({ connectDomains: [], resourceDomains: [], frameDomains: [], baseUriDomains: [] });
    expect(content!._meta.ui).not.toHaveProperty('domain');
    expect(Buffer.byteLength(content!.text, 'utf8')).toBeLessThanOrEqual(MAX_VIEW_BYTES);
    // Self-contained: nothing loaded from anywhere, and its own policy allows only its inline script and style.
    expect(content!.text).not.toMatch(/\ssrc=|\shref=|url\(|@import|@font-face|<iframe|https?:\/\//i);
    expect(content!.text).toMatch(
      /<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'sha256-[^']+'; style-src 'sha256-[^']+';/,
    );
  });

  it('keeps each view within 64 KiB', async () => {
    const views = (await plain.listResources()).resources.filter((r) => r.uri.startsWith('ui://'));
    expect(views.length).toBeGreaterThan(0);
    for (const { uri } of views) {
      const [content] = (await plain.readResource({ uri })).contents as { text: string }[];
      expect(Buffer.byteLength(content!.text, 'utf8'), uri).toBeLessThanOrEqual(64 * 1024);
    }
  });

  it('gives a client that declares the extension the same tools and the same answers', async () => {
    expect((await host.listTools()).tools).toEqual((await plain.listTools()).tools);
    expect((await host.listResources()).resources).toEqual((await plain.listResources()).resources);
    const name = toolName('set_power', world.device);
    const [a, b] = [await plain.callTool({ name, arguments: { on: true } }), await host.callTool({ name, arguments: { on: true } })];
    expect(a.structuredContent).toMatchObject({ status: 'succeeded', result: { on: true } });
    expect(stable(b)).toEqual(stable(a));
    const state = { name: 'get_device_state', arguments: { deviceId: world.device.id } };
    expect(stable(await host.callTool(state))).toEqual(stable(await plain.callTool(state)));
  });

  it("carries the device's name and the tool in the answer's _meta for the view", async () => {
    const name = toolName('get_state', world.device);
    const result = await plain.callTool({ name, arguments: {} });
    expect(result._meta?.['dfc/view']).toEqual({ deviceId: world.device.id, deviceName: 'Porch lamp', tool: name });
    const state = await plain.callTool({ name: 'get_device_state', arguments: { deviceId: world.device.id } });
    expect(state._meta?.['dfc/view']).toEqual({ deviceId: world.device.id, deviceName: 'Porch lamp' });
    expect(state.structuredContent).toMatchObject({ deviceId: world.device.id, values: [{ capability: 'get_state', value: { on: true } }] });
  });
});

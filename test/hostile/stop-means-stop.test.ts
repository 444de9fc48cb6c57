import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { attachDevice as attachSdkDevice, CommandRecalled, Device, type DeviceEvent, type Manifest } from '@dfc/device';
import { childrenOf, grant, hubManifest, next, queue, report } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, createSetupToken, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { connect, toolName } from '../helpers/mcp-client.js';
import { accessTokenFor, registerClient, useOAuthTestServer } from '../helpers/oauth.js';
import { connectDevice } from '../helpers/ws.js';
import { grantedDevice } from '../helpers/world.js';

// docs/reference/rules.md "Actions": a command moves a device only while the permission it was
// requested under holds. Real server, real devices (raw polls, raw wake sockets, the SDK),
// the real MCP client where an agent waits.

const clock = manualClock();
let owner: string;
const running: Device[] = [];

const server = useOAuthTestServer({ clock });
const api = server.api;

beforeAll(async () => {
  owner = await server.ownerToken('stopper', { expiresIn: '10h' });
});
afterAll(async () => {
  await Promise.all(running.map((device) => device.stop()));
});

type Agent = Awaited<ReturnType<typeof createAgent>>;

/** A fresh lamp and agent, the agent granted the lamp's functions: each case is alone with them. */
async function world(ttlSeconds: number | null = null): Promise<{ lamp: AttachedDevice; agent: Agent }> {
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner, { access: 'act' });
  await grant(api, owner, agent.principal, lamp.id, ['get_state', 'set_power'], ttlSeconds);
  return { lamp, agent };
}

const actionOf = async (id: string) => (await api.get(`/v1/actions/${id}`, { token: owner })).body.data;

async function until<T>(check: () => Promise<T | undefined>, pauseMs = 10): Promise<T> {
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, pauseMs));
  }
}

/** Waits until `count` actions exist on the device: a waiting MCP call has queued its own. */
function actionsOn(deviceId: string, count: number): Promise<true> {
  return until(async () => {
    const listed = (await api.get('/v1/actions', { token: owner })).body.data as { deviceId: string }[];
    return listed.filter((a) => a.deviceId === deviceId).length >= count ? true : undefined;
  });
}

interface Revocation {
  name: string;
  reason: string;
  revoke(lamp: AttachedDevice, agent: Agent): Promise<void>;
}

const revocations: Revocation[] = [
  {
    name: 'revoking the grant',
    reason: 'grant_revoked',
    async revoke(lamp, agent) {
      const res = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id } });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    },
  },
  {
    name: 'revoking the agent connection',
    reason: 'principal_revoked',
    async revoke(_lamp, agent) {
      const res = await api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    },
  },
  {
    name: 'revoking the device',
    reason: 'device_revoked',
    async revoke(lamp) {
      const res = await api.post(`/v1/devices/${lamp.id}/revoke`, { token: owner });
      expect(res.status, JSON.stringify(res.body)).toBe(200);
    },
  },
];

describe.each(revocations)('$name while commands are queued', ({ reason, revoke }) => {
  it(`cancels them at once with cancelReason ${reason}, and the waiting MCP call answers cancelled`, async () => {
    const { lamp, agent } = await world();
    const mcp = await connect(server.url, agent.token, 'modern');
    try {
      const tool = (await mcp.listTools()).tools.find((t) => t.name === toolName('set_power', lamp))!;
      const waiting = mcp.callTool({ name: tool.name, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 30 } });
      const other = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
      await actionsOn(lamp.id, 2);
      await revoke(lamp, agent);
      const answer = await waiting;
      expect(answer.structuredContent).toMatchObject({ status: 'cancelled', cancelReason: reason, cancelRequestedAt: null });
      expect(await actionOf(other.id)).toMatchObject({ status: 'cancelled', cancelReason: reason });
    } finally {
      await mcp.close();
    }
    if (reason !== 'device_revoked') expect((await next(api, lamp)).body.data).toBeNull();
  });
});

describe.each(revocations)('$name while a command is received', ({ reason, revoke }) => {
  it('sends the cancel frame on the wake socket and records cancelRequestedAt; the status stays received', async () => {
    const { lamp, agent } = await world();
    const socket = await connectDevice(api, server.url, lamp);
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect(await socket.nextFrame()).toMatchObject({ type: 'wake', actionId: action.id });
    expect((await next(api, lamp)).body.data.id).toBe(action.id);
    await revoke(lamp, agent);
    expect(await socket.nextFrame()).toEqual({ type: 'cancel', deviceId: lamp.id, actionId: action.id, reason });
    expect(await actionOf(action.id)).toMatchObject({ status: 'received', cancelReason: reason, cancelRequestedAt: clock.now() });
    socket.ws.close();
  });
});

describe('a recalled command on a device running the SDK', () => {
  it("aborts the handler's signal with CommandRecalled, and stores the report it still sends", async () => {
    const { agent } = await world();
    const setup = await createSetupToken(api, owner);
    const credentials = await attachSdkDevice({ url: server.url, setupToken: setup.token, name: 'SDK lamp' });
    const events: DeviceEvent[] = [];
    let started: (actionId: string) => void = () => undefined;
    const startedOnce = new Promise<string>((resolve) => (started = resolve));
    const manifest: Manifest = {
      capabilities: [{ name: 'set_power', kind: 'control', arguments: { type: 'object', properties: { on: { type: 'boolean' } }, required: ['on'] } }],
    };
    const device = new Device({ url: server.url, credentials, manifest, onEvent: (e) => events.push(e) });
    running.push(device);
    device.handle('set_power', async (args: { on: boolean }, ctx) => {
      started(ctx.actionId);
      await new Promise((resolve) => ctx.signal.addEventListener('abort', resolve, { once: true }));
      const recalled = ctx.signal.reason as CommandRecalled;
      // The relay had already switched: the report says so.
      return { on: args.on, stoppedBecause: recalled instanceof CommandRecalled ? recalled.reason : 'other' };
    });
    await device.start();
    await until(async () => (device.connected ? true : undefined));
    await grant(api, owner, agent.principal, credentials.deviceId, ['set_power']);
    const action = await queue(api, agent.token, credentials.deviceId, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 120 });
    expect(await startedOnce).toBe(action.id);
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: credentials.deviceId } });
    expect(revoked.status).toBe(200);
    const stored = await until(async () => {
      const now = await actionOf(action.id);
      return now.status === 'received' ? undefined : now;
    });
    expect(stored).toMatchObject({
      status: 'succeeded',
      result: { on: true, stoppedBecause: 'grant_revoked' },
      cancelReason: 'grant_revoked',
      cancelRequestedAt: expect.any(Number),
    });
    expect(events).toContainEqual({ type: 'cancel', deviceId: credentials.deviceId, actionId: action.id, reason: 'grant_revoked' });
  });
});

describe('a device that was not connected when its command was recalled', () => {
  it('is told the recall as soon as its wake socket opens', async () => {
    const { lamp, agent } = await world();
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    expect((await next(api, lamp)).body.data.id).toBe(action.id);
    const revoked = await api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id } });
    expect(revoked.status).toBe(200);
    const socket = await connectDevice(api, server.url, lamp);
    expect(await socket.nextFrame()).toEqual({ type: 'cancel', deviceId: lamp.id, actionId: action.id, reason: 'grant_revoked' });
    // Once reported, it is no longer recalled on the next socket.
    expect((await report(api, lamp, { actionId: action.id, ok: true, result: { on: true } })).body.data).toMatchObject({
      status: 'succeeded',
      cancelReason: 'grant_revoked',
    });
    socket.ws.close();
    const again = await connectDevice(api, server.url, lamp);
    await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    const fresh = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {} });
    // The first frame of the new socket is the new command's wake: no recall was replayed.
    expect(await again.nextFrame()).toMatchObject({ type: 'wake', actionId: fresh.id });
    again.ws.close();
  });
});

describe('POST /v1/device/{deviceId}/next: authorization at hand-out', () => {
  it('cancels a command whose grant expired (grant_expired) and hands out nothing', async () => {
    const { lamp, agent } = await world(60);
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 });
    clock.advance(60_001);
    expect((await next(api, lamp)).body.data).toBeNull();
    expect(await actionOf(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_expired', dispatchedAt: null });
  });

  it('skips an unauthorised command and hands out the next authorised one in the same call', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { capabilities: ['set_power'], ttlSeconds: 60 });
    await grant(api, owner, agent.principal, lamp.id, ['get_state']);
    const first = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 });
    clock.advance(1);
    const second = await queue(api, agent.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 });
    clock.advance(60_000);
    const handed = await next(api, lamp);
    expect(handed.body.data).toMatchObject({ id: second.id, capability: 'get_state' });
    expect(await actionOf(first.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_expired' });
  });

  it('cancels a command whose function left the manifest (function_removed)', async () => {
    const { lamp, agent } = await world();
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true } });
    const republished = await api.post(`/v1/device/${lamp.id}/manifest`, {
      token: lamp.token,
      body: { capabilities: lampManifest.capabilities.filter((c) => c.name !== 'set_power') },
    });
    expect(republished.status).toBe(200);
    expect((await next(api, lamp)).body.data).toBeNull();
    expect(await actionOf(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'function_removed' });
  });

  it('cancels a command whose agent connection expired (principal_expired): its credential ended like a grant does', async () => {
    const { device: lamp, agent } = await grantedDevice(api, owner, { agent: { access: 'act', ttlSeconds: 60 }, capabilities: ['set_power'] });
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 });
    clock.advance(60_001);
    expect((await next(api, lamp)).body.data).toBeNull();
    expect(await actionOf(action.id)).toMatchObject({ status: 'cancelled', cancelReason: 'principal_expired', dispatchedAt: null });
  });

  it('hands out a command requested before the grant was renewed: the principal holds a live grant again', async () => {
    const { lamp, agent } = await world(60);
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], 3600);
    clock.advance(60_001);
    expect((await next(api, lamp)).body.data).toMatchObject({ id: action.id });
  });
});

describe('the expiry sweep', () => {
  it('recalls a handed-out command whose grant expired, with the cancel frame', async () => {
    const { lamp, agent } = await world(60);
    const socket = await connectDevice(api, server.url, lamp);
    const action = await queue(api, agent.token, lamp.id, { capability: 'set_power', arguments: { on: true }, ttlSeconds: 300 });
    expect(await socket.nextFrame()).toMatchObject({ type: 'wake' });
    expect((await next(api, lamp)).body.data.id).toBe(action.id);
    clock.advance(60_001);
    // The sweep runs every EXPIRY_SWEEP_SECONDS on the real timer; the frame is its result.
    expect(await socket.nextFrame()).toEqual({ type: 'cancel', deviceId: lamp.id, actionId: action.id, reason: 'grant_expired' });
    expect(await actionOf(action.id)).toMatchObject({ status: 'received', cancelReason: 'grant_expired' });
    socket.ws.close();
  });
});

const oauthToken = (clientId: string) => accessTokenFor(server, owner, clientId);

describe('revoking an OAuth client', () => {
  it('cancels its queued commands (principal_revoked) and answers its waiting MCP call; revoking one token does not', async () => {
    const lamp = await attachDevice(api, owner);
    const registered = await registerClient(server.issuer, owner, {
      name: 'Stop client',
      redirectUris: ['http://127.0.0.1:9/callback'],
      public: true,
      access: 'act',
    });
    await grant(api, owner, registered.principal, lamp.id, ['set_power']);
    const token = await oauthToken(registered.oauth.clientId);
    const mcp = await connect(server.url, token, 'modern');
    try {
      const tool = (await mcp.listTools()).tools.find((t) => t.name.startsWith('set_power'))!;
      const early = await mcp.callTool({ name: tool.name, arguments: { on: true }, _meta: { 'dfc/waitSeconds': 0.1 } });
      const kept = early.structuredContent as { id: string; status: string };
      expect(kept.status).toBe('queued');
      // A second token of the same client revoked at /oauth/revoke: the client stays, so do its commands.
      const spare = await oauthToken(registered.oauth.clientId);
      const revokedToken = await fetch(`${server.issuer}/oauth/revoke`, {
        method: 'POST',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        body: new URLSearchParams({ token: spare, client_id: registered.oauth.clientId }),
      });
      expect(revokedToken.status).toBe(200);
      expect(await actionOf(kept.id)).toMatchObject({ status: 'queued' });

      const waiting = mcp.callTool({ name: tool.name, arguments: { on: false }, _meta: { 'dfc/waitSeconds': 30 } });
      await actionsOn(lamp.id, 2);
      const revoked = await api.post(`/v1/oauth-clients/${encodeURIComponent(registered.oauth.clientId)}/revoke`, { token: owner });
      expect(revoked.status, JSON.stringify(revoked.body)).toBe(200);
      expect((await waiting).structuredContent).toMatchObject({ status: 'cancelled', cancelReason: 'principal_revoked' });
      expect(await actionOf(kept.id)).toMatchObject({ status: 'cancelled', cancelReason: 'principal_revoked' });
    } finally {
      await mcp.close();
    }
    expect((await next(api, lamp)).body.data).toBeNull();
  });
});

describe('replacing a gateway grant control → read', () => {
  it("cancels the principal's queued control commands on the children at once (grant_revoked)", async () => {
    const hub = await attachDevice(api, owner, { name: 'Stop hub', kind: 'gateway', manifest: hubManifest });
    const bulbId = (await childrenOf(api, owner, hub.id)).Bulb!;
    const agent = await createAgent(api, owner, { access: 'act' });
    const replace = (mode: 'read' | 'control') =>
      api.post(`/v1/devices/${hub.id}/gateway-grants`, { token: owner, body: { principal: agent.principal, mode } });
    expect((await replace('control')).status).toBe(200);
    const control = await queue(api, agent.token, bulbId, { capability: 'set_power', arguments: { on: true } });
    const read = await queue(api, agent.token, bulbId, { capability: 'get_state', arguments: {} });
    expect((await replace('read')).status).toBe(200);
    expect(await actionOf(control.id)).toMatchObject({ status: 'cancelled', cancelReason: 'grant_revoked' });
    expect((await next(api, hub)).body.data).toMatchObject({ id: read.id });
  });
});

describe("a gateway's manifest that leaves a child out", () => {
  it('recalls the command the gateway already fetched for that child at once (device_detached), as it cancels the queued ones', async () => {
    const hub = await attachDevice(api, owner, { name: 'Detaching hub', kind: 'gateway', manifest: hubManifest });
    const bulbId = (await childrenOf(api, owner, hub.id)).Bulb!;
    const agent = await createAgent(api, owner, { access: 'act' });
    await grant(api, owner, agent.principal, bulbId, ['set_power']);
    const held = await queue(api, agent.token, bulbId, { capability: 'set_power', arguments: { on: true } });
    const queued = await queue(api, agent.token, bulbId, { capability: 'set_power', arguments: { on: false } });
    expect((await next(api, hub)).body.data).toMatchObject({ id: held.id });
    const withoutBulb = { ...hubManifest, children: hubManifest.children.filter((child) => child.key !== 'bulb') };
    const republished = await api.post(`/v1/device/${hub.id}/manifest`, { token: hub.token, body: withoutBulb });
    expect(republished.status, JSON.stringify(republished.body)).toBe(200);
    expect(await actionOf(queued.id)).toMatchObject({ status: 'cancelled', cancelReason: 'device_detached' });
    expect(await actionOf(held.id)).toMatchObject({ status: 'received', cancelReason: 'device_detached', cancelRequestedAt: expect.any(Number) });
    const socket = await connectDevice(api, server.url, hub);
    expect(await socket.nextFrame()).toEqual({ type: 'cancel', deviceId: bulbId, actionId: held.id, reason: 'device_detached' });
    socket.ws.close();
  });
});

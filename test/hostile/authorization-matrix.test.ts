import { beforeAll, describe, expect, it } from 'vitest';
import { allOperations } from '../../src/domain/registry.js';
import { routes } from '../../src/rest/routes.js';
import { grant, hubManifest, next, queue } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent, createSetupToken, lampManifest, type AttachedDevice } from '../helpers/fixtures.js';
import { envelope, MODERN } from '../helpers/mcp-client.js';
import { accessTokenFor, registerClient, useOAuthTestServer } from '../helpers/oauth.js';

/**
 * The authorization matrix: every route of the REST table, and every MCP tool,
 * against every kind of caller — the owner, agents with the act ceiling, the read ceiling and
 * no grant, an OAuth access token, a setup token, a device, a second workspace's owner, agent
 * and device, a revoked and an expired credential of each kind, and no credential. Each cell
 * states the status class it must get. The table is keyed by `${method} ${path}` and must
 * hold exactly the routes the registry declares (src/rest/routes.ts derives them), so a new
 * route fails here until it has a row; the MCP rows likewise hold exactly its fixed tools.
 *
 * Every request is well formed for its route, so a cell measures who may call, not what
 * they sent. Answers a second workspace's credentials get must carry none of the first
 * workspace's ids.
 */

const LIVE = ['owner', 'agentAct', 'agentRead', 'agentNoGrant', 'oauth', 'setup', 'device', 'owner2', 'agent2', 'device2'] as const;
const DEAD = ['revokedAgent', 'expiredAgent', 'revokedSetup', 'expiredSetup', 'revokedDevice', 'revokedOAuth', 'expiredOAuth', 'expiredOwner', 'none'] as const;
type Caller = (typeof LIVE)[number] | (typeof DEAD)[number];
type Outcome = '2xx' | '401' | '403' | '404';
type Cells = Record<Caller, Outcome>;

const CALLBACK = 'http://127.0.0.1:9/callback';
const clock = manualClock();
const tokens = {} as Record<Exclude<Caller, 'none'>, string>;
let owner: string;
let lamp: AttachedDevice;
let gatewayId: string;
let agentAct: { id: string; token: string; principal: string };
/** Every id of workspace 1 a second workspace must never see. */
const ws1Ids = new Set<string>();
let requestedAction: string;
let asker: { token: string; principal: string };

const oauthToken = (clientId: string) => accessTokenFor(server, owner, clientId, CALLBACK);

async function grantedOAuthClient(): Promise<{ clientId: string; principal: string }> {
  const registered = await registerClient(server.issuer, owner, { name: 'matrix client', redirectUris: [CALLBACK], public: true, access: 'act' });
  await grant(api, owner, registered.principal, lamp.id, ['get_state', 'set_power', 'set_brightness']);
  return { clientId: registered.oauth.clientId, principal: registered.principal };
}

// The test-only switch admits a loopback webhook URL (the discard port: nothing subscribed is sent there).
const server = useOAuthTestServer({ clock, env: { EXPIRY_SWEEP_SECONDS: '3600', OAUTH_CIMD_ALLOW_LOOPBACK: 'true' } });
const api = server.api;

beforeAll(async () => {
  // The owner JWT is checked against the real clock; consent sessions against the manual one.
  owner = await server.ownerToken('matrix-owner', { expiresIn: '10h' });
  tokens.owner = owner;
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  gatewayId = (await attachDevice(api, owner, { name: 'Hub', kind: 'gateway', manifest: hubManifest })).id;
  tokens.device = lamp.token;

  agentAct = await createAgent(api, owner, { access: 'act', principal: 'matrix:act' });
  tokens.agentAct = agentAct.token;
  const agentRead = await createAgent(api, owner, { access: 'read', principal: 'matrix:read' });
  tokens.agentRead = agentRead.token;
  tokens.agentNoGrant = (await createAgent(api, owner, { access: 'act', principal: 'matrix:nogrant' })).token;
  for (const principal of [agentAct.principal, agentRead.principal]) await grant(api, owner, principal, lamp.id, ['get_state', 'set_power', 'set_brightness']);
  // The longest lifetime, since the clock jumps an hour ahead below.
  tokens.setup = (await createSetupToken(api, owner, { name: 'matrix', deviceLimit: 20, ttlSeconds: 86_400 })).token;

  // Revoked credentials of each kind.
  const revokedAgent = await createAgent(api, owner, { access: 'act', principal: agentAct.principal });
  await api.post(`/v1/agent-connections/${revokedAgent.id}/revoke`, { token: owner });
  tokens.revokedAgent = revokedAgent.token;
  const revokedSetup = await createSetupToken(api, owner, { name: 'revoked' });
  await api.post(`/v1/device-setup-tokens/${revokedSetup.id}/revoke`, { token: owner });
  tokens.revokedSetup = revokedSetup.token;
  const revokedDevice = await attachDevice(api, owner, { name: 'Revoked' });
  await api.post(`/v1/devices/${revokedDevice.id}/revoke`, { token: owner });
  tokens.revokedDevice = revokedDevice.token;
  const revokedClient = await grantedOAuthClient();
  tokens.revokedOAuth = await oauthToken(revokedClient.clientId);
  await api.post(`/v1/oauth-clients/${encodeURIComponent(revokedClient.clientId)}/revoke`, { token: owner });
  tokens.expiredOwner = await server.ownerToken('matrix-owner', { expiresIn: '-5 minutes' });

  // Expired ones: issued now, then the clock moves past their lifetimes (60 s, 60 s, 1 h).
  tokens.expiredAgent = (await createAgent(api, owner, { access: 'act', principal: agentAct.principal, ttlSeconds: 60 })).token;
  tokens.expiredSetup = (await createSetupToken(api, owner, { name: 'expiring', ttlSeconds: 60 })).token;
  const oauthClient = await grantedOAuthClient();
  tokens.expiredOAuth = await oauthToken(oauthClient.clientId);
  clock.advance(3_700_000);
  tokens.oauth = await oauthToken(oauthClient.clientId);

  // The second workspace: its own owner, agent (granted its own device) and device.
  const owner2 = await server.ownerToken('matrix-owner-2', { expiresIn: '10h' });
  tokens.owner2 = owner2;
  const device2 = await attachDevice(api, owner2, { name: 'Other lamp' });
  tokens.device2 = device2.token;
  const agent2 = await createAgent(api, owner2, { access: 'act' });
  await grant(api, owner2, agent2.principal, device2.id, ['get_state', 'set_power']);
  tokens.agent2 = agent2.token;

  // A function that needs the owner's approval (docs/reference/rules.md "Approvals"), for approve and
  // reject, under a principal of its own: its waiting actions fill no other row's queue.
  asker = await createAgent(api, owner, { access: 'act', principal: 'matrix:asker' });
  await grant(api, owner, asker.principal, lamp.id, ['set_brightness'], null, 'owner');
  requestedAction = (await queue(api, agentAct.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 })).id;
  const devices = (await api.get('/v1/devices', { token: owner })).body.data as { id: string }[];
  for (const id of [...devices.map((d) => d.id), requestedAction, agentAct.id, agentRead.id]) ws1Ids.add(id);
}, 60_000);

interface Request {
  path: string;
  body?: unknown;
  headers?: Record<string, string>;
}

interface Row {
  /** Built per cell, so a call that consumes its target (revoke, cancel, result) gets a fresh one. */
  request: (caller: Caller) => Promise<Request>;
  cells: Cells;
  /** A further check on a 2xx answer. */
  check?: (caller: Caller, body: any) => void;
  /** An endless stream (Server-Sent Events): a 2xx is judged by its status and headers, then dropped. */
  live?: boolean;
}

/** Dead credentials get 401 everywhere but on public routes. */
const DEAD_401 = Object.fromEntries(DEAD.map((c) => [c, '401'])) as Record<(typeof DEAD)[number], Outcome>;
/** Public routes ignore whatever Authorization header comes along. */
const ANYONE = Object.fromEntries([...LIVE, ...DEAD].map((c) => [c, '2xx'])) as Cells;

/** Owner routes: other live kinds are 403 (valid, wrong kind); `owner2` as the row says. */
function ownerRoute(owner2: Outcome): Cells {
  return {
    owner: '2xx',
    agentAct: '403',
    agentRead: '403',
    agentNoGrant: '403',
    oauth: '403',
    setup: '403',
    device: '403',
    owner2,
    agent2: '403',
    device2: '403',
    ...DEAD_401,
  };
}

/** Device routes on workspace 1's lamp: only its own credential; another device is 403. */
const DEVICE_ROUTE: Cells = {
  owner: '403',
  agentAct: '403',
  agentRead: '403',
  agentNoGrant: '403',
  oauth: '403',
  setup: '403',
  device: '2xx',
  owner2: '403',
  agent2: '403',
  device2: '403',
  ...DEAD_401,
};

const freshSetupId = async () => (await createSetupToken(api, owner, { name: 'target' })).id;
const freshAgentId = async () => (await createAgent(api, owner)).id;
const freshDeviceId = async () => (await attachDevice(api, owner, { manifest: null })).id;
const freshClientId = async () => (await registerClient(server.issuer, owner, { name: 'target', redirectUris: [CALLBACK], public: true })).oauth.clientId;
const WEBHOOK = { url: 'http://127.0.0.1:9/hook', events: ['approval.requested'] };
const freshWebhookId = async () => {
  const res = await api.post('/v1/webhooks', { token: owner, body: WEBHOOK });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  ws1Ids.add(res.body.data.id);
  return res.body.data.id as string;
};
const freshAction = async () => (await queue(api, agentAct.token, lamp.id, { capability: 'get_state', arguments: {}, ttlSeconds: 300 })).id;
/** An action awaiting the owner's approval: a fresh one for the owner, whose call decides it; one shared by every refused caller. */
let sharedWaiting: string | undefined;
const newWaiting = async () =>
  (await queue(api, asker.token, lamp.id, { capability: 'set_brightness', arguments: { level: 10 }, approvalTtlSeconds: 86_400 })).id;
const waitingAction = async (caller: Caller) => (caller === 'owner' ? newWaiting() : (sharedWaiting ??= await newWaiting()));

const matrix: Record<string, Row> = {
  'GET /healthz': { request: async () => ({ path: '/healthz' }), cells: ANYONE },
  'GET /readyz': { request: async () => ({ path: '/readyz' }), cells: ANYONE },
  'GET /v1/account': { request: async () => ({ path: '/v1/account' }), cells: ownerRoute('2xx') },

  'POST /v1/device-setup-tokens': { request: async () => ({ path: '/v1/device-setup-tokens', body: { name: 'm' } }), cells: ownerRoute('2xx') },
  'GET /v1/device-setup-tokens': { request: async () => ({ path: '/v1/device-setup-tokens' }), cells: ownerRoute('2xx') },
  'POST /v1/device-setup-tokens/{connectionId}/revoke': {
    request: async () => ({ path: `/v1/device-setup-tokens/${await freshSetupId()}/revoke` }),
    cells: ownerRoute('404'),
  },
  'POST /v1/sdk-tokens': { request: async () => ({ path: '/v1/sdk-tokens', body: { name: 'm' } }), cells: ownerRoute('2xx') },
  'GET /v1/sdk-tokens': { request: async () => ({ path: '/v1/sdk-tokens' }), cells: ownerRoute('2xx') },
  'POST /v1/sdk-tokens/{connectionId}/revoke': { request: async () => ({ path: `/v1/sdk-tokens/${await freshSetupId()}/revoke` }), cells: ownerRoute('404') },

  'POST /v1/agent-connections': { request: async () => ({ path: '/v1/agent-connections', body: { name: 'm' } }), cells: ownerRoute('2xx') },
  'GET /v1/agent-connections': { request: async () => ({ path: '/v1/agent-connections' }), cells: ownerRoute('2xx') },
  'POST /v1/agent-connections/{connectionId}/revoke': {
    request: async () => ({ path: `/v1/agent-connections/${await freshAgentId()}/revoke` }),
    cells: ownerRoute('404'),
  },

  'POST /v1/oauth-clients': {
    request: async () => ({ path: '/v1/oauth-clients', body: { name: 'm', redirectUris: [CALLBACK], public: true } }),
    cells: ownerRoute('2xx'),
  },
  'GET /v1/oauth-clients': { request: async () => ({ path: '/v1/oauth-clients' }), cells: ownerRoute('2xx') },
  'POST /v1/oauth-clients/{clientId}/revoke': {
    request: async () => ({ path: `/v1/oauth-clients/${encodeURIComponent(await freshClientId())}/revoke` }),
    cells: ownerRoute('404'),
  },

  'POST /v1/sdk/devices': {
    request: async () => ({ path: '/v1/sdk/devices', body: { name: 'matrix device' } }),
    cells: {
      owner: '403',
      agentAct: '403',
      agentRead: '403',
      agentNoGrant: '403',
      oauth: '403',
      setup: '2xx',
      device: '403',
      owner2: '403',
      agent2: '403',
      device2: '403',
      ...DEAD_401,
    },
  },
  'POST /v1/enrollments': { request: async () => ({ path: '/v1/enrollments' }), cells: ownerRoute('2xx') },
  // Public: the enrollment code in the body is the credential.
  'POST /v1/device/enroll': {
    request: async () => ({ path: '/v1/device/enroll', body: { code: (await api.post('/v1/enrollments', { token: owner })).body.data.code, name: 'Board' } }),
    cells: ANYONE,
  },

  'GET /v1/devices': {
    request: async () => ({ path: '/v1/devices' }),
    cells: {
      owner: '2xx',
      agentAct: '2xx',
      agentRead: '2xx',
      agentNoGrant: '2xx',
      oauth: '2xx',
      setup: '403',
      device: '403',
      owner2: '2xx',
      agent2: '2xx',
      device2: '403',
      ...DEAD_401,
    },
    check: (caller, body) => {
      if (caller === 'agentNoGrant') expect(body.data).toEqual([]);
      if (caller === 'agentAct' || caller === 'oauth') expect(body.data.map((d: { id: string }) => d.id)).toEqual([lamp.id]);
    },
  },
  // Last-known values of a page of devices: an agent sees only the devices it may call, another workspace none of these.
  'GET /v1/device-states': {
    request: async () => ({ path: '/v1/device-states' }),
    cells: {
      owner: '2xx',
      agentAct: '2xx',
      agentRead: '2xx',
      agentNoGrant: '2xx',
      oauth: '2xx',
      setup: '403',
      device: '403',
      owner2: '2xx',
      agent2: '2xx',
      device2: '403',
      ...DEAD_401,
    },
    check: (caller, body) => {
      if (caller === 'agentNoGrant') expect(body.data).toEqual([]);
      if (caller === 'agentAct' || caller === 'oauth') expect(body.data.map((d: { deviceId: string }) => d.deviceId)).toEqual([lamp.id]);
      if (caller === 'owner2' || caller === 'agent2') expect(body.data.map((d: { deviceId: string }) => d.deviceId)).not.toContain(lamp.id);
    },
  },
  'POST /v1/devices/{deviceId}/revoke': { request: async () => ({ path: `/v1/devices/${await freshDeviceId()}/revoke` }), cells: ownerRoute('404') },
  'POST /v1/devices/{deviceId}/rename': {
    request: async () => ({ path: `/v1/devices/${await freshDeviceId()}/rename`, body: { name: 'Renamed by the matrix' } }),
    cells: ownerRoute('404'),
  },
  // Last-known values: an agent on a device it holds no live grant on finds no device.
  'GET /v1/devices/{deviceId}/state': {
    request: async () => ({ path: `/v1/devices/${lamp.id}/state` }),
    cells: {
      owner: '2xx',
      agentAct: '2xx',
      agentRead: '2xx',
      agentNoGrant: '404',
      oauth: '2xx',
      setup: '403',
      device: '403',
      owner2: '404',
      agent2: '404',
      device2: '403',
      ...DEAD_401,
    },
  },
  'POST /v1/device/{reporterId}/state': {
    request: async () => ({ path: `/v1/device/${lamp.id}/state`, body: { values: { get_state: { on: true } } } }),
    cells: DEVICE_ROUTE,
  },
  'POST /v1/device/{deviceId}/manifest': { request: async () => ({ path: `/v1/device/${lamp.id}/manifest`, body: lampManifest }), cells: DEVICE_ROUTE },

  'POST /v1/grants': {
    request: async () => ({ path: '/v1/grants', body: { principal: 'matrix:throwaway', deviceId: lamp.id, capabilities: ['get_state'] } }),
    cells: ownerRoute('404'),
  },
  'GET /v1/grants': { request: async () => ({ path: '/v1/grants' }), cells: ownerRoute('2xx') },
  'POST /v1/grants/revoke': {
    request: async () => ({ path: '/v1/grants/revoke', body: { principal: 'matrix:throwaway', deviceId: lamp.id } }),
    cells: ownerRoute('404'),
  },
  'POST /v1/grants/{grantId}/update': {
    request: async () => ({
      path: `/v1/grants/${(await grant(api, owner, 'matrix:throwaway', lamp.id, ['get_state']))[0]!.id}/update`,
      body: { approval: 'none' },
    }),
    cells: ownerRoute('404'),
  },
  'GET /v1/usage': { request: async () => ({ path: '/v1/usage' }), cells: ownerRoute('2xx') },
  'GET /v1/device-controls': { request: async () => ({ path: '/v1/device-controls' }), cells: ownerRoute('2xx') },
  // Resuming a running workspace: every caller's attempt leaves device control running.
  'POST /v1/device-controls': { request: async () => ({ path: '/v1/device-controls', body: { paused: false } }), cells: ownerRoute('2xx') },
  'POST /v1/devices/{deviceId}/gateway-grants': {
    request: async () => ({ path: `/v1/devices/${gatewayId}/gateway-grants`, body: { principal: 'matrix:throwaway', mode: 'read' } }),
    cells: ownerRoute('404'),
  },
  'POST /v1/webhooks': { request: async () => ({ path: '/v1/webhooks', body: WEBHOOK }), cells: ownerRoute('2xx') },
  'GET /v1/webhooks': { request: async () => ({ path: '/v1/webhooks' }), cells: ownerRoute('2xx') },
  'GET /v1/webhooks/{webhookId}': { request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}` }), cells: ownerRoute('404') },
  'POST /v1/webhooks/{webhookId}/rotate-secret': {
    request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}/rotate-secret` }),
    cells: ownerRoute('404'),
  },
  'POST /v1/webhooks/{webhookId}/revoke': { request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}/revoke` }), cells: ownerRoute('404') },
  'POST /v1/webhooks/{webhookId}/enable': { request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}/enable` }), cells: ownerRoute('404') },
  'POST /v1/webhooks/{webhookId}/disable': { request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}/disable` }), cells: ownerRoute('404') },
  'POST /v1/webhooks/{webhookId}/test': { request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}/test` }), cells: ownerRoute('404') },
  'GET /v1/webhooks/{webhookId}/deliveries': {
    request: async () => ({ path: `/v1/webhooks/${await freshWebhookId()}/deliveries` }),
    cells: ownerRoute('404'),
  },

  'GET /v1/functions': {
    request: async () => ({ path: '/v1/functions' }),
    cells: {
      owner: '2xx',
      agentAct: '2xx',
      agentRead: '2xx',
      agentNoGrant: '2xx',
      oauth: '2xx',
      setup: '403',
      device: '403',
      owner2: '2xx',
      agent2: '2xx',
      device2: '403',
      ...DEAD_401,
    },
    check: (caller, body) => {
      if (caller === 'agentNoGrant') expect(body.data).toEqual([]);
      // The read ceiling lists read functions only.
      if (caller === 'agentRead') expect(body.data.map((f: { capability: string }) => f.capability)).toEqual(['get_state']);
    },
  },

  // A control function: the read ceiling and the missing grant are both 403. OAuth tokens
  // act through MCP and the shared endpoints only (src/auth), so this agent endpoint is 403.
  'POST /v1/devices/{deviceId}/actions': {
    request: async () => ({ path: `/v1/devices/${lamp.id}/actions`, body: { capability: 'set_power', arguments: { on: true } } }),
    cells: {
      owner: '403',
      agentAct: '2xx',
      agentRead: '403',
      agentNoGrant: '403',
      oauth: '2xx',
      setup: '403',
      device: '403',
      owner2: '403',
      agent2: '403',
      device2: '403',
      ...DEAD_401,
    },
  },
  'GET /v1/actions': { request: async () => ({ path: '/v1/actions' }), cells: ownerRoute('2xx') },
  'GET /v1/actions/export': { request: async () => ({ path: '/v1/actions/export' }), cells: ownerRoute('2xx') },
  // The owner's own workspace only: owner2 gets a stream of its own (nothing of workspace 1).
  'GET /v1/events': { request: async () => ({ path: '/v1/events' }), cells: ownerRoute('2xx'), live: true },
  // Agents see only the actions their own principal requested.
  'GET /v1/actions/{actionId}': {
    request: async () => ({ path: `/v1/actions/${requestedAction}` }),
    cells: {
      owner: '2xx',
      agentAct: '2xx',
      agentRead: '404',
      agentNoGrant: '404',
      oauth: '404',
      setup: '403',
      device: '403',
      owner2: '404',
      agent2: '404',
      device2: '403',
      ...DEAD_401,
    },
  },
  // Only the owner decides: an agent never approves, not even its own request; another
  // workspace's owner does not find the action.
  'POST /v1/actions/{actionId}/approve': {
    request: async (caller) => ({ path: `/v1/actions/${await waitingAction(caller)}/approve`, body: { reason: 'matrix' } }),
    cells: ownerRoute('404'),
  },
  'POST /v1/actions/{actionId}/reject': {
    request: async (caller) => ({ path: `/v1/actions/${await waitingAction(caller)}/reject`, body: {} }),
    cells: ownerRoute('404'),
  },
  'GET /v1/approvals': { request: async () => ({ path: '/v1/approvals' }), cells: ownerRoute('2xx') },
  // Another workspace's action is not rejected: owner2 is answered that it was skipped, unknown.
  'POST /v1/actions/reject': {
    request: async (caller) => ({ path: '/v1/actions/reject', body: { actionIds: [await waitingAction(caller)], reason: 'matrix' } }),
    cells: ownerRoute('2xx'),
  },
  'POST /v1/actions/{actionId}/cancel': {
    request: async () => ({ path: `/v1/actions/${await freshAction()}/cancel` }),
    cells: {
      owner: '2xx',
      agentAct: '2xx',
      agentRead: '404',
      agentNoGrant: '404',
      oauth: '404',
      setup: '403',
      device: '403',
      owner2: '404',
      agent2: '404',
      device2: '403',
      ...DEAD_401,
    },
  },
  // Per-device results: the call succeeds, and each device answers for itself.
  'POST /v1/broadcasts': {
    request: async () => ({
      path: '/v1/broadcasts',
      body: { deviceIds: [lamp.id], capability: 'set_power', arguments: { on: false }, idempotencyKey: crypto.randomUUID() },
    }),
    cells: {
      owner: '403',
      agentAct: '2xx',
      agentRead: '2xx',
      agentNoGrant: '2xx',
      oauth: '2xx',
      setup: '403',
      device: '403',
      owner2: '403',
      agent2: '2xx',
      device2: '403',
      ...DEAD_401,
    },
    check: (caller, body) => {
      const [result] = body.data.results;
      const allowed = caller === 'agentAct' || caller === 'oauth';
      expect(result.ok, JSON.stringify(result)).toBe(allowed);
      if (!allowed)
        expect(result.error.code).toBe({ agentRead: 'insufficient_access', agentNoGrant: 'grant_required', agent2: 'grant_required' }[caller as string]);
    },
  },

  'POST /v1/device/{deviceId}/next': {
    request: async (caller) => ({
      path: `/v1/device/${lamp.id}/next`,
      headers: { 'x-service-workspace': caller === 'device2' ? '0'.repeat(64) : lamp.workspace },
    }),
    cells: DEVICE_ROUTE,
  },
  'POST /v1/device/{deviceId}/result': {
    request: async () => {
      // A command the lamp has fetched, so the lamp's own report is accepted.
      const id = await freshAction();
      for (;;) {
        const handed = (await next(api, lamp)).body.data;
        if (!handed || handed.id === id) break;
      }
      return { path: `/v1/device/${lamp.id}/result`, body: { actionId: id, ok: true, result: { on: true } } };
    },
    cells: DEVICE_ROUTE,
  },
  'POST /v1/device/{deviceId}/events-ticket': { request: async () => ({ path: `/v1/device/${lamp.id}/events-ticket` }), cells: DEVICE_ROUTE },
};

/** Opens an endless stream: its error envelope when refused, else its status once the headers are in (then drops it). */
async function openLive(path: string, token: string | undefined): Promise<{ status: number; body: any }> {
  const dropped = new AbortController();
  const res = await fetch(`${server.url}${path}`, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: dropped.signal });
  if (res.status >= 300) return { status: res.status, body: await res.json() };
  expect(res.headers.get('content-type')).toMatch(/^text\/event-stream/);
  dropped.abort();
  return { status: res.status, body: {} };
}

function outcomeOf(status: number): Outcome | string {
  if (status >= 200 && status < 300) return '2xx';
  return String(status);
}

describe('authorization matrix: the table', () => {
  it('has exactly one row per route of src/rest/routes.ts', () => {
    expect(Object.keys(matrix).sort()).toEqual(routes.map((r) => `${r.method} ${r.path}`).sort());
  });

  it('states a cell for every caller in every row', () => {
    for (const [key, row] of Object.entries(matrix)) expect(Object.keys(row.cells).sort(), key).toEqual([...LIVE, ...DEAD].sort());
  });
});

const cases = routes.flatMap((route) => [...LIVE, ...DEAD].map((caller) => ({ key: `${route.method} ${route.path}`, method: route.method, caller })));

describe('authorization matrix: REST', () => {
  it.each(cases)('$key as $caller', async ({ key, method, caller }) => {
    const row = matrix[key];
    if (!row) throw new Error(`no matrix row for ${key}: add one`);
    const request = await row.request(caller);
    const token = caller === 'none' ? undefined : tokens[caller];
    const res = row.live
      ? await openLive(request.path, token)
      : await api.request(method, request.path, { token, body: request.body, ...(request.headers ? { headers: request.headers } : {}) });
    const expected = row.cells[caller];
    expect(outcomeOf(res.status), `${key} as ${caller}: ${JSON.stringify(res.body).slice(0, 300)}`).toBe(expected);
    if (res.status >= 300) {
      expect(Object.keys(res.body)).toEqual(['error']);
      if (expected === '401') expect(res.body.error.code).toBe('unauthorized');
      return;
    }
    row.check?.(caller, res.body);
    if (caller === 'owner2' || caller === 'agent2' || caller === 'device2') {
      const sent = `${request.path} ${JSON.stringify(request.body ?? '')}`;
      const text = JSON.stringify(res.body);
      for (const id of ws1Ids) if (!sent.includes(id)) expect(text, `${key} as ${caller} leaked ${id}`).not.toContain(id);
    }
  });
});

// ---------------------------------------------------------------------------------------
// MCP: tools/call for each fixed tool and for a device tool, per caller.
// ---------------------------------------------------------------------------------------

type McpOutcome = '2xx' | '2xx:isError' | '401' | '403';

/** Whoever may call /mcp at all: agents and OAuth tokens; other valid kinds are 403. */
function mcpCells(agentCells: Partial<Record<Caller, McpOutcome>>): Record<Caller, McpOutcome> {
  return {
    owner: '403',
    setup: '403',
    device: '403',
    owner2: '403',
    device2: '403',
    agentAct: '2xx',
    agentRead: '2xx',
    agentNoGrant: '2xx',
    oauth: '2xx',
    agent2: '2xx',
    ...(Object.fromEntries(DEAD.map((c) => [c, '401'])) as Record<(typeof DEAD)[number], McpOutcome>),
    ...agentCells,
  };
}

const lampTool = () => `set_power__${lamp.id.replace(/-/g, '').slice(0, 12)}`;

const mcpMatrix: Record<string, { args: () => Promise<Record<string, unknown>>; cells: Record<Caller, McpOutcome> }> = {
  list_devices: { args: async () => ({}), cells: mcpCells({}) },
  list_functions: { args: async () => ({}), cells: mcpCells({}) },
  // Each agent lists its own principal's actions: none of another's is ever in the answer.
  list_actions: { args: async () => ({ status: 'scheduled' }), cells: mcpCells({}) },
  // Another principal's action is "not found" to the caller: a tool error, not an HTTP one.
  get_action: {
    args: async () => ({ actionId: requestedAction }),
    cells: mcpCells({ agentRead: '2xx:isError', agentNoGrant: '2xx:isError', oauth: '2xx:isError', agent2: '2xx:isError' }),
  },
  get_device_state: {
    args: async () => ({ deviceId: lamp.id }),
    cells: mcpCells({ agentNoGrant: '2xx:isError', agent2: '2xx:isError' }),
  },
  cancel_action: {
    args: async () => ({ actionId: await freshAction() }),
    cells: mcpCells({ agentRead: '2xx:isError', agentNoGrant: '2xx:isError', oauth: '2xx:isError', agent2: '2xx:isError' }),
  },
  // Per-device refusals (ceiling, grant, other workspace) are in the broadcast's results.
  broadcast: {
    args: async () => ({ deviceIds: [lamp.id], capability: 'set_power', arguments: { on: true }, idempotencyKey: crypto.randomUUID() }),
    cells: mcpCells({}),
  },
  // A refused grant or ceiling is the tool's error, as for any fixed tool.
  schedule_action: {
    args: async () => ({
      deviceId: lamp.id,
      capability: 'set_power',
      arguments: { on: true },
      notBefore: clock.now() + 3_600_000,
      idempotencyKey: crypto.randomUUID(),
    }),
    cells: mcpCells({ agentRead: '2xx:isError', agentNoGrant: '2xx:isError', agent2: '2xx:isError' }),
  },
  // A device tool: the live grant and ceiling are checked before the SDK sees the call.
  '<device tool>': {
    args: async () => ({ on: true }),
    cells: mcpCells({ agentRead: '403', agentNoGrant: '403', agent2: '403' }),
  },
};

async function callTool(token: string | undefined, name: string, args: Record<string, unknown>) {
  const res = await fetch(`${server.url}/mcp`, {
    method: 'POST',
    headers: {
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
      'mcp-protocol-version': MODERN,
      'mcp-method': 'tools/call',
      'mcp-name': name,
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    // No waiting for the lamp: a queued action answers at once.
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/call', params: { name, arguments: args, _meta: envelope({ 'dfc/waitSeconds': 0 }) } }),
  });
  const text = await res.text();
  const json = res.headers.get('content-type')?.includes('text/event-stream')
    ? JSON.parse(
        text
          .split('\n')
          .filter((l) => l.startsWith('data:'))
          .at(-1)!
          .slice(5),
      )
    : JSON.parse(text);
  return { status: res.status, json };
}

describe('authorization matrix: MCP tools', () => {
  it('has exactly one row per fixed tool an act agent lists, plus the device tool', async () => {
    const res = await fetch(`${server.url}/mcp`, {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        accept: 'application/json, text/event-stream',
        'mcp-protocol-version': MODERN,
        'mcp-method': 'tools/list',
        authorization: `Bearer ${tokens.agentAct}`,
      },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'tools/list', params: { _meta: envelope() } }),
    });
    const text = await res.text();
    const json = res.headers.get('content-type')?.includes('text/event-stream')
      ? JSON.parse(
          text
            .split('\n')
            .filter((l) => l.startsWith('data:'))
            .at(-1)!
            .slice(5),
        )
      : JSON.parse(text);
    const names = (json.result.tools as { name: string }[]).map((t) => t.name);
    expect(names).toContain(lampTool());
    expect([...names.filter((n) => !n.includes('__')), '<device tool>'].sort()).toEqual(Object.keys(mcpMatrix).sort());
  });

  it('has exactly one row per fixed tool the registry declares, plus the device tool', () => {
    const declared = allOperations.flatMap((operation) => (operation.mcp ? [operation.mcp.name] : []));
    expect(
      Object.keys(mcpMatrix)
        .filter((tool) => tool !== '<device tool>')
        .sort(),
    ).toEqual(declared.sort());
  });

  const mcpCases = Object.keys(mcpMatrix).flatMap((tool) => [...LIVE, ...DEAD].map((caller) => ({ tool, caller })));
  it.each(mcpCases)('tools/call $tool as $caller', async ({ tool, caller }) => {
    const row = mcpMatrix[tool]!;
    const name = tool === '<device tool>' ? lampTool() : tool;
    const args = await row.args();
    const res = await callTool(caller === 'none' ? undefined : tokens[caller], name, args);
    const outcome =
      res.status === 200 ? (res.json.result?.isError ? '2xx:isError' : res.json.error ? `rpc ${res.json.error.code}` : '2xx') : String(res.status);
    expect(outcome, `${tool} as ${caller}: ${JSON.stringify(res.json).slice(0, 300)}`).toBe(row.cells[caller]);
    if (res.status === 401 || res.status === 403) expect(Object.keys(res.json)).toEqual(['error']);
    if (outcome === '2xx' && caller === 'agent2') {
      const text = JSON.stringify(res.json);
      const sent = JSON.stringify(args);
      for (const id of ws1Ids) if (!sent.includes(id)) expect(text, `${tool} as ${caller} leaked ${id}`).not.toContain(id);
    }
    if (tool === 'broadcast' && outcome === '2xx') {
      const { results } = res.json.result.structuredContent;
      expect(results[0].ok).toBe(caller === 'agentAct' || caller === 'oauth');
    }
  });
});

/**
 * Hand-out (docs/reference/rules.md "Actions"): `next` hands a queued command to its device only while
 * the permission it was requested under holds; otherwise the command ends `cancelled` with
 * the reason. One row per part of that permission, each on its own device and agent.
 */
interface HandOutRow {
  /** What changed between the request and the device's `next`. */
  change: string;
  ceiling?: 'read' | 'act';
  capability?: 'get_state' | 'set_power';
  grantTtl?: number;
  gateway?: boolean;
  withdraw(world: { device: AttachedDevice; commandDeviceId: string; agent: { id: string; token: string; principal: string } }): Promise<unknown>;
  /** The cancel reason, or null when the command is handed out. */
  reason: string | null;
}

const handOutRows: HandOutRow[] = [
  { change: 'nothing', withdraw: async () => undefined, reason: null },
  { change: 'the grant expired', grantTtl: 60, withdraw: async () => clock.advance(60_001), reason: 'grant_expired' },
  {
    change: 'the grant was revoked',
    withdraw: ({ commandDeviceId, agent }) => api.post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: commandDeviceId } }),
    reason: 'grant_revoked',
  },
  {
    change: 'the requesting agent connection was revoked',
    withdraw: ({ agent }) => api.post(`/v1/agent-connections/${agent.id}/revoke`, { token: owner }),
    reason: 'principal_revoked',
  },
  {
    change: 'another connection of the same principal was revoked',
    withdraw: async ({ agent }) => {
      const sibling = await createAgent(api, owner, { access: 'act', principal: agent.principal });
      return api.post(`/v1/agent-connections/${sibling.id}/revoke`, { token: owner });
    },
    reason: null,
  },
  {
    change: 'the function left the manifest',
    withdraw: ({ device }) =>
      api.post(`/v1/device/${device.id}/manifest`, {
        token: device.token,
        body: { capabilities: lampManifest.capabilities.filter((c) => c.name !== 'set_power') },
      }),
    reason: 'function_removed',
  },
  {
    change: 'the function was republished as control under a read ceiling',
    ceiling: 'read',
    capability: 'get_state',
    withdraw: ({ device }) =>
      api.post(`/v1/device/${device.id}/manifest`, {
        token: device.token,
        body: { capabilities: lampManifest.capabilities.map((c) => (c.name === 'get_state' ? { ...c, kind: 'control' } : c)) },
      }),
    reason: 'function_changed',
  },
  { change: 'the device was revoked', withdraw: ({ device }) => api.post(`/v1/devices/${device.id}/revoke`, { token: owner }), reason: 'device_revoked' },
  {
    change: "the child was left out of its gateway's manifest",
    gateway: true,
    withdraw: ({ device }) =>
      api.post(`/v1/device/${device.id}/manifest`, { token: device.token, body: { capabilities: hubManifest.capabilities, children: [] } }),
    reason: 'device_detached',
  },
];

describe('authorization matrix: hand-out by POST /v1/device/{deviceId}/next', () => {
  it.each(handOutRows)('after "$change": cancelled with $reason (null: handed out)', async (row) => {
    const device = row.gateway
      ? await attachDevice(api, owner, { name: 'Hand-out hub', kind: 'gateway', manifest: hubManifest })
      : await attachDevice(api, owner, { name: 'Hand-out lamp' });
    const listed = (await api.get('/v1/devices', { token: owner })).body.data as { id: string; parentId: string | null; name: string }[];
    const commandDeviceId = row.gateway ? listed.find((d) => d.parentId === device.id && d.name === 'Bulb')!.id : device.id;
    const agent = await createAgent(api, owner, { access: row.ceiling ?? 'act' });
    const capability = row.capability ?? 'set_power';
    await grant(api, owner, agent.principal, commandDeviceId, [capability], row.grantTtl ?? null);
    const action = await queue(api, agent.token, commandDeviceId, {
      capability,
      arguments: capability === 'set_power' ? { on: true } : {},
      ttlSeconds: 300,
    });
    const withdrawn = (await row.withdraw({ device, commandDeviceId, agent })) as { status?: number; body?: unknown } | undefined;
    if (withdrawn?.status !== undefined) expect(withdrawn.status, JSON.stringify(withdrawn.body)).toBe(200);
    const handed = await next(api, device);
    const stored = (await api.get(`/v1/actions/${action.id}`, { token: owner })).body.data;
    if (row.reason === null) {
      expect(handed.body.data).toMatchObject({ id: action.id });
      expect(stored).toMatchObject({ status: 'received', cancelReason: null });
    } else {
      expect(handed.status === 401 || handed.body.data === null, JSON.stringify(handed.body)).toBe(true);
      expect(stored).toMatchObject({ status: 'cancelled', cancelReason: row.reason, dispatchedAt: null });
    }
  });
});

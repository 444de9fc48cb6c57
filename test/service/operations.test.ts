import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Credential } from '../../src/domain/context.js';
import type { AnyOperation } from '../../src/domain/operation.js';
import { allOperations, operations as ops } from '../../src/domain/registry.js';
import { lampManifest } from '../helpers/fixtures.js';
import { openOperationsContext, type OperationsContext } from '../helpers/operations.js';

/**
 * Every operation of the registry, called through `invoke`/`call` without HTTP in one
 * prepared workspace, answers what its output schema describes: the answer as a client reads
 * it (after JSON) parses with the operation's `output`. A new operation without a case here
 * fails the first test.
 */
let w: OperationsContext;
let owner: Credential;
let agent: Credential;
let device: Credential;
let deviceId: string;
let routingId: string;

/** An operation's caller and a valid input, made in the prepared workspace. */
type Case = () => Promise<{ as: Credential | null; input: Record<string, unknown> }>;

const invoke = <O extends AnyOperation>(operation: O, as: Credential | null, input: Record<string, unknown>) => w.invoke(operation, as, input);

async function newSetupToken() {
  return invoke(ops.createSetupToken, owner, { name: 'setup' });
}

async function newAction(capability = 'get_state', args: Record<string, unknown> = {}) {
  return invoke(ops.requestAction, agent, { deviceId, capability, arguments: args });
}

async function newWebhook() {
  return invoke(ops.createWebhook, owner, { url: 'http://127.0.0.1:9/hook', events: ['action.created'] });
}

const cases: Record<string, Case> = {
  'health.get': async () => ({ as: null, input: {} }),
  'readiness.get': async () => ({ as: null, input: {} }),
  'account.get': async () => ({ as: owner, input: {} }),
  'setupTokens.create': async () => ({ as: owner, input: { name: 'another setup' } }),
  'setupTokens.list': async () => ({ as: owner, input: {} }),
  'setupTokens.revoke': async () => ({ as: owner, input: { connectionId: (await newSetupToken()).id } }),
  'agentConnections.create': async () => ({ as: owner, input: { name: 'another agent', access: 'read' } }),
  'agentConnections.list': async () => ({ as: owner, input: {} }),
  'agentConnections.revoke': async () => ({
    as: owner,
    input: { connectionId: (await invoke(ops.createAgentConnection, owner, { name: 'to revoke' })).id },
  }),
  'oauthClients.create': async () => ({ as: owner, input: { name: 'client', redirectUris: ['https://client.example/callback'] } }),
  'oauthClients.list': async () => ({ as: owner, input: {} }),
  'oauthClients.revoke': async () => ({
    as: owner,
    input: { clientId: (await invoke(ops.createOAuthClient, owner, { name: 'to revoke', redirectUris: ['https://client.example/cb'] })).oauth!.clientId },
  }),
  'devices.attach': async () => ({ as: await w.credentialOf((await newSetupToken()).token), input: { name: 'Fan' } }),
  'devices.list': async () => ({ as: agent, input: {} }),
  'devices.revoke': async () => {
    const attached = await invoke(ops.attachDevice, await w.credentialOf((await newSetupToken()).token), { name: 'To revoke' });
    return { as: owner, input: { deviceId: attached.device.id } };
  },
  'devices.rename': async () => ({ as: owner, input: { deviceId, name: 'Renamed lamp' } }),
  'devices.state': async () => ({ as: agent, input: { deviceId } }),
  'deviceStates.list': async () => ({ as: agent, input: {} }),
  'devices.publishManifest': async () => ({ as: device, input: { deviceId, ...lampManifest } }),
  'enrollments.create': async () => ({ as: owner, input: {} }),
  'enrollments.enroll': async () => ({ as: null, input: { code: (await invoke(ops.createEnrollment, owner, {})).code, name: 'Board' } }),
  'grants.create': async () => ({ as: owner, input: { principal: 'other-agent', deviceId, capabilities: ['get_state'] } }),
  'grants.list': async () => ({ as: owner, input: {} }),
  'grants.revoke': async () => {
    const [grant] = await invoke(ops.createGrants, owner, { principal: 'revoked-agent', deviceId, capabilities: ['get_state'] });
    return { as: owner, input: { grantId: grant!.id } };
  },
  'grants.update': async () => {
    const [grant] = await invoke(ops.createGrants, owner, { principal: 'updated-agent', deviceId, capabilities: ['get_state'] });
    return { as: owner, input: { grantId: grant!.id, approval: 'owner', ttlSeconds: 3600 } };
  },
  'gatewayGrants.replace': async () => {
    const gateway = await invoke(ops.attachDevice, await w.credentialOf((await newSetupToken()).token), { name: 'Hub', kind: 'gateway' });
    await invoke(ops.publishManifest, await w.credentialOf(gateway.token), { deviceId: gateway.device.id, ...lampManifest });
    return { as: owner, input: { deviceId: gateway.device.id, principal: 'hub-agent', mode: 'read' } };
  },
  'functions.list': async () => ({ as: agent, input: {} }),
  'actions.request': async () => ({ as: agent, input: { deviceId, capability: 'set_power', arguments: { on: true } } }),
  'actions.schedule': async () => ({
    as: agent,
    input: { deviceId, capability: 'set_power', arguments: { on: true }, notBefore: Date.now() + 60_000 },
  }),
  'actions.get': async () => ({ as: agent, input: { actionId: (await newAction()).id } }),
  'actions.listOwn': async () => ({ as: agent, input: { status: 'scheduled' } }),
  'actions.cancel': async () => ({ as: agent, input: { actionId: (await newAction()).id } }),
  'actions.approve': async () => ({ as: owner, input: { actionId: (await newAction('set_brightness', { level: 10 })).id } }),
  'actions.reject': async () => ({ as: owner, input: { actionId: (await newAction('set_brightness', { level: 20 })).id } }),
  'actions.list': async () => ({ as: owner, input: {} }),
  'approvals.list': async () => ({ as: owner, input: {} }),
  'actions.rejectMany': async () => ({ as: owner, input: { actionIds: [(await newAction('set_brightness', { level: 30 })).id] } }),
  'actions.listRequested': async () => ({ as: agent, input: {} }),
  'actions.export': async () => ({ as: owner, input: {} }),
  'broadcasts.create': async () => ({
    as: agent,
    input: { deviceIds: [deviceId], capability: 'set_power', arguments: { on: false }, idempotencyKey: 'broadcast-1' },
  }),
  'device.next': async () => {
    await newAction();
    return { as: device, input: { deviceId, workspace: routingId } };
  },
  'device.result': async () => {
    await newAction();
    const next = await invoke(ops.fetchNextCommand, device, { deviceId, workspace: routingId });
    return { as: device, input: { deviceId, actionId: next!.id, ok: true, result: { on: true } } };
  },
  'device.state': async () => ({ as: device, input: { reporterId: deviceId, values: { get_state: { on: true } } } }),
  'device.eventsTicket': async () => ({ as: device, input: { deviceId } }),
  'events.stream': async () => ({ as: owner, input: {} }),
  'webhooks.create': async () => ({ as: owner, input: { url: 'http://127.0.0.1:9/other', events: ['grant.created'] } }),
  'webhooks.list': async () => ({ as: owner, input: {} }),
  'webhooks.get': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'webhooks.rotateSecret': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'webhooks.revoke': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'webhooks.enable': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'webhooks.deliveries': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'webhooks.test': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'webhooks.disable': async () => ({ as: owner, input: { webhookId: (await newWebhook()).id } }),
  'usage.get': async () => ({ as: owner, input: {} }),
  'deviceControls.get': async () => ({ as: owner, input: {} }),
  'deviceControls.set': async () => ({ as: owner, input: { paused: false } }),
};

beforeAll(async () => {
  w = await openOperationsContext({ EVENTS_HEARTBEAT_SECONDS: '1', EVENTS_POLL_SECONDS: '1' });
  owner = await w.owner('operations-owner');
  const attached = await invoke(ops.attachDevice, await w.credentialOf((await newSetupToken()).token), { name: 'Lamp' });
  deviceId = attached.device.id;
  routingId = attached.workspace;
  device = await w.credentialOf(attached.token);
  await invoke(ops.publishManifest, device, { deviceId, ...lampManifest });
  const connection = await invoke(ops.createAgentConnection, owner, { name: 'agent', access: 'act' });
  agent = await w.credentialOf(connection.token);
  await invoke(ops.createGrants, owner, { principal: connection.principal, deviceId, capabilities: ['get_state', 'set_power'] });
  // set_brightness waits for the owner's approval: what approve, reject and the approvals list act on.
  await invoke(ops.createGrants, owner, { principal: connection.principal, deviceId, capabilities: ['set_brightness'], approval: 'owner' });
});

afterAll(() => w?.close());

/** The answer as a client reads it: what JSON carries of it, parsed with the operation's output schema. */
function parsesAsOutput(operation: AnyOperation, data: unknown): void {
  const parsed = operation.output.safeParse(JSON.parse(JSON.stringify(data)));
  expect(parsed.success, parsed.success ? '' : `${operation.name}: ${parsed.error.message}`).toBe(true);
}

/** The first event of a live feed after something happens in the workspace. */
async function firstEvent(operation: AnyOperation, as: Credential | null, input: Record<string, unknown>): Promise<unknown> {
  const feed = new AbortController();
  try {
    const answer = await w.call(operation, as, input, feed.signal);
    if (answer.kind !== 'live') throw new Error(`${operation.name} is not a live feed`);
    const events = answer.items[Symbol.asyncIterator]();
    await invoke(ops.createGrants, owner, { principal: 'watched-agent', deviceId, capabilities: ['get_state'] });
    for (;;) {
      const next = await events.next();
      if (next.done) throw new Error(`${operation.name} ended before an event`);
      if ('id' in next.value) return next.value.data;
    }
  } finally {
    feed.abort();
  }
}

describe('every operation in the registry, called without HTTP', () => {
  it('has a case here', () => {
    expect(Object.keys(cases).sort()).toEqual(allOperations.map((operation) => operation.name).sort());
  });

  it.each(allOperations.map((operation) => [operation.name, operation] as const))('%s answers what its output schema describes', async (name, operation) => {
    const { as, input } = await cases[name]!();
    if (operation.live) {
      parsesAsOutput(operation, await firstEvent(operation, as, input));
      return;
    }
    const answer = await w.call(operation, as, input);
    if (answer.kind === 'stream') {
      const items: unknown[] = [];
      for await (const item of answer.items) items.push(item);
      parsesAsOutput(operation, { ...answer.head, [answer.listKey]: items, [answer.countKey]: items.length });
      return;
    }
    if (answer.kind === 'live') throw new Error(`${name} answered a live feed without declaring one`);
    if (answer.kind === 'page') expect(answer.data, `${name} answers a page of items`).toBeInstanceOf(Array);
    parsesAsOutput(operation, answer.data);
  });
});

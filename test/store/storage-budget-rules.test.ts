import { afterAll, describe, expect, it } from 'vitest';
import type { Credential } from '../../src/domain/context.js';
import { DomainError } from '../../src/domain/errors.js';
import { operations as ops } from '../../src/domain/registry.js';
import { ACTION_RESERVED_BYTES } from '../../src/store/usage.js';
import { openOperationsContext, type OperationsContext } from '../helpers/operations.js';

/**
 * The storage budgets' rules (docs/operators/budgets.md) where HTTP is not the point: called
 * through `invoke` as every surface calls them (test/helpers/operations.ts), each on a fresh
 * database with its budget set. test/rest/storage-budgets.test.ts keeps the cases on the wire
 * (429 with Retry-After, 413 without it, MCP's tool error) and those that need a running
 * service (webhook deliveries, retention, two instances, metrics).
 */

/** A device whose one function stores whatever text the agent sends. */
const noteManifest = {
  capabilities: [
    {
      name: 'note',
      kind: 'control',
      arguments: { type: 'object', properties: { text: { type: 'string', maxLength: 14_000 } }, required: ['text'], additionalProperties: false },
    },
  ],
};

interface World {
  harness: OperationsContext;
  owner: Credential;
  agent: Credential;
  principal: string;
  deviceId: string;
  workspaceId: string;
}

const opened: OperationsContext[] = [];
afterAll(() => Promise.all(opened.map((harness) => harness.close())));

/** A workspace on a fresh database with `env`'s budgets: a notebook device and an agent granted `note`. */
async function world(env: Record<string, string>, name: string): Promise<World> {
  const harness = await openOperationsContext(env);
  opened.push(harness);
  const owner = await harness.owner(name);
  const deviceId = await notebook(harness, owner, 'Notebook');
  const connection = await harness.invoke(ops.createAgentConnection, owner, { name: 'agent', access: 'act' });
  await harness.invoke(ops.createGrants, owner, { principal: connection.principal, deviceId, capabilities: ['note'] });
  const workspaceId = (owner as { workspaceId: string }).workspaceId;
  return { harness, owner, agent: await harness.credentialOf(connection.token), principal: connection.principal, deviceId, workspaceId };
}

async function notebook(harness: OperationsContext, owner: Credential, name: string): Promise<string> {
  const setup = await harness.invoke(ops.createSetupToken, owner, { name: 'setup' });
  const attached = await harness.invoke(ops.attachDevice, await harness.credentialOf(setup.token), { name });
  await harness.invoke(ops.publishManifest, await harness.credentialOf(attached.token), { deviceId: attached.device.id, ...noteManifest });
  return attached.device.id;
}

/** Arguments of exactly `bytes` bytes once stored as JSON. */
const argumentsOf = (bytes: number) => ({ text: 'x'.repeat(bytes - '{"text":""}'.length) });

/** The action request's answer: the action, or the DomainError it was refused with. */
async function note(w: World, bytes: number): Promise<{ ok: true } | { ok: false; error: DomainError }> {
  try {
    await w.harness.invoke(ops.requestAction, w.agent, { deviceId: w.deviceId, capability: 'note', arguments: argumentsOf(bytes) });
    return { ok: true };
  } catch (error) {
    if (error instanceof DomainError) return { ok: false, error };
    throw error;
  }
}

function expectQuotaExceeded(answer: Awaited<ReturnType<typeof note>>, budget: string, limit: number): DomainError {
  if (answer.ok) throw new Error(`the request was accepted: expected quota_exceeded for ${budget}`);
  expect(answer.error.code).toBe('quota_exceeded');
  expect(answer.error.message).toContain(budget);
  expect(answer.error.details.budget).toMatchObject({ name: budget, limit });
  expect(answer.error.details.budget!.used).toBeGreaterThan(0);
  expect(answer.error.details.retryAfterSeconds).toBeGreaterThanOrEqual(1);
  return answer.error;
}

const storedActions = async (w: World) =>
  (await w.harness.db.get<{ n: number }>('SELECT count(*) AS n FROM actions WHERE workspace_id = ?', [w.workspaceId]))!.n;

describe('each storage budget, once used up, refuses the next action request with quota_exceeded naming it', () => {
  it('action_bytes: the bytes of arguments and results stored (WORKSPACE_MAX_ACTION_BYTES); a smaller request that fits is still accepted', async () => {
    // Each action counts its arguments and the room it reserves for its result.
    const limit = 2 * (2000 + ACTION_RESERVED_BYTES) + 1500 + ACTION_RESERVED_BYTES;
    const w = await world({ WORKSPACE_MAX_ACTION_BYTES: String(limit) }, 'budget-bytes');
    expect((await note(w, 2000)).ok).toBe(true);
    expect((await note(w, 2000)).ok).toBe(true);
    const refused = expectQuotaExceeded(await note(w, 2000), 'action_bytes', limit);
    expect(refused.details.budget!.used).toBe(2 * (2000 + ACTION_RESERVED_BYTES));
    expect((await note(w, 1000)).ok).toBe(true);
    expect(await storedActions(w)).toBe(3);
  });

  it('event_bytes: the bytes of the workspace event journal (WORKSPACE_MAX_EVENT_BYTES)', async () => {
    const w = await world({ WORKSPACE_MAX_EVENT_BYTES: '8000' }, 'budget-events');
    let accepted = 0;
    let answer = await note(w, 1500);
    for (; answer.ok && accepted < 20; answer = await note(w, 1500)) accepted++;
    expect(accepted).toBeGreaterThan(0);
    const refused = expectQuotaExceeded(answer, 'event_bytes', 8000);
    expect(refused.details.budget!.used).toBeGreaterThanOrEqual(8000);
    expect(await storedActions(w)).toBe(accepted);
  });
});

describe('a broadcast checks each device against the budgets on its own', () => {
  it('queues what fits and answers quota_exceeded for each device past it', async () => {
    const w = await world({ WORKSPACE_MAX_STORED_ACTIONS: '1' }, 'budget-broadcast');
    const second = await notebook(w.harness, w.owner, 'Second notebook');
    await w.harness.invoke(ops.createGrants, w.owner, { principal: w.principal, deviceId: second, capabilities: ['note'] });
    const answer = await w.harness.invoke(ops.broadcast, w.agent, {
      deviceIds: [w.deviceId, second],
      capability: 'note',
      arguments: argumentsOf(100),
      idempotencyKey: 'fill-both',
    });
    expect(answer.results.map((r) => r.ok || r.error.code)).toEqual([true, 'quota_exceeded']);
    expect(await storedActions(w)).toBe(1);
  });
});

import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { grant } from '../helpers/actions.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { initializeLegacy, startLegacyCall } from '../helpers/legacy-prompts.js';
import { toolName } from '../helpers/mcp-client.js';
import { startTestServer, type TestServer } from '../helpers/server.js';
import { startSqld, type TestSqld } from '../helpers/sqld.js';

/**
 * 2025-era sessions behind two instances (docs/operators/scale-out.md, docs/agents/confirmation.md
 * "The two MCP eras"): the session id holds what the client declared, so the instance that
 * serves a call knows its client can ask, whichever instance served its `initialize`. The ask
 * waits in the instance that holds the call: an answer posted to the other is refused with 409,
 * never accepted with a 202 that nothing waits for. Two in-process instances on a real sqld.
 */
let sqld: TestSqld;
let a: TestServer;
let b: TestServer;

beforeAll(async () => {
  sqld = await startSqld();
  a = await startTestServer({ env: { DATABASE_URL: sqld.url } });
  b = await startTestServer({ env: { DATABASE_URL: sqld.url } });
}, 60_000);
afterAll(async () => {
  await Promise.all([a?.close(), b?.close()]);
  await sqld?.stop();
});

describe('a 2025-era client whose initialize went to one instance', () => {
  it('is asked to confirm by the other, and an answer posted to the first is refused, not lost', async () => {
    const api = client(a.url);
    const owner = await a.ownerToken('owner-sessions-scale');
    const lamp = await attachDevice(api, owner, { name: 'Two-instance lamp' });
    const agent = await createAgent(api, owner, { name: 'sessions-scale', access: 'act', principal: 'agent:sessions-scale' });
    await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'user');
    const setPower = toolName('set_power', lamp.id);

    const session = await initializeLegacy(a.url, agent.token);
    // Answered on B, to an answer sent to A: A holds no call, and says so.
    const misrouted = await startLegacyCall(b.url, agent.token, setPower, { on: true }, 1, { session, answerUrl: a.url });
    expect(misrouted.kind).toBe('ask');
    if (misrouted.kind !== 'ask') return;
    expect(misrouted.message).toContain('set_power');
    expect(await misrouted.answer({ action: 'decline' })).toBe(409);
    misrouted.close();

    // The same session, its answer to the instance holding the call: taken, and the call completes.
    const routed = await startLegacyCall(b.url, agent.token, setPower, { on: true }, 2, { session });
    expect(routed.kind).toBe('ask');
    if (routed.kind !== 'ask') return;
    expect(await routed.answer({ action: 'decline' })).toBe(202);
    const result = await routed.result();
    expect(result.structuredContent.error.code).toBe('confirmation_declined');
    expect((await api.get('/v1/actions', { token: owner })).body.data).toEqual([]);
  }, 60_000);
});

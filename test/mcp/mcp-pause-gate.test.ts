import { beforeAll, describe, expect, it } from 'vitest';
import { grant, next, report } from '../helpers/actions.js';
import { attachDevice, createAgent, type AttachedDevice } from '../helpers/fixtures.js';
import { rawMcp, toolName } from '../helpers/mcp-client.js';
import { useTestServer } from '../helpers/server.js';

/**
 * An MCP device tool call reads the workspace's pause switch once, in the tools/call gate,
 * and the action request takes that reading (docs/owners/console-guide.md "Pause device
 * control"): the gate and the call must agree. Paused, the gate answers 503 and nothing is
 * queued, on the direct path and on the SDK's (a call with a progress token); running, the
 * call the gate let through queues its action and runs.
 */
const server = useTestServer();
const api = server.api;
let owner: string;
let lamp: AttachedDevice;
let agent: { token: string; principal: string };
let setPower: string;

const pause = (paused: boolean) => api.post('/v1/device-controls', { token: owner, body: { paused } });

beforeAll(async () => {
  owner = await server.ownerToken('pause-gate-owner');
  lamp = await attachDevice(api, owner, { name: 'Lamp' });
  agent = await createAgent(api, owner, { name: 'pause-gate', access: 'act', principal: 'agent:pause-gate' });
  await grant(api, owner, agent.principal, lamp.id, ['set_power']);
  setPower = toolName('set_power', lamp);
});

/** A device tool call; with a progress token it goes through the SDK's per-request server, without one the direct path answers it. */
function callSetPower(on: boolean, viaSdk: boolean) {
  const meta = viaSdk ? { _meta: { progressToken: `p-${on}` } } : {};
  return rawMcp(server.url, { token: agent.token, method: 'tools/call', name: setPower, params: { name: setPower, arguments: { on }, ...meta } });
}

describe('the tools/call gate and the action request agree on the pause switch', () => {
  for (const viaSdk of [false, true]) {
    const path = viaSdk ? 'through the SDK' : 'on the direct path';
    it(`refuses a device tool call ${path} with 503 while paused and queues nothing; once resumed the call it admits queues and runs`, async () => {
      expect((await pause(true)).status).toBeLessThan(300);
      try {
        const refused = await callSetPower(true, viaSdk);
        expect(refused.status).toBe(503);
        expect(refused.json.error.code).toBe('device_controls_disabled');
      } finally {
        expect((await pause(false)).status).toBeLessThan(300);
      }
      // Nothing was queued while paused: the device finds its queue empty once control runs again.
      expect((await next(api, lamp)).body.data).toBeNull();

      const call = callSetPower(false, viaSdk);
      let command: { id: string; args: { on: boolean } } | null = null;
      await expect.poll(async () => (command = (await next(api, lamp)).body.data)).not.toBeNull();
      expect(command!.args).toEqual({ on: false });
      await report(api, lamp, { actionId: command!.id, ok: true, result: { on: false } });
      const answered = await call;
      expect(answered.status).toBe(200);
      expect(JSON.stringify(answered.json)).toContain('"status":"succeeded"');
    });
  }
});

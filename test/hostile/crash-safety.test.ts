import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { client } from '../helpers/api.js';
import { startChildService, testIdentity, type ChildService } from '../helpers/child-service.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { grant } from '../helpers/actions.js';

/**
 * Crash safety: the service runs as its own process on a file database under a
 * steady load of action requests (an agent), polls and results (a simulated device). The
 * test kills it with SIGKILL at random moments, restarts it on the same file each time, and
 * then proves from the clients' own records that
 *   - every acknowledged action exists exactly once (each request carries an idempotency key
 *     and is retried with it until acknowledged, so the database must hold exactly one action
 *     per key: none lost, none doubled by a retry after a lost answer);
 *   - no action was handed out by `next` twice, across all kills;
 *   - every acknowledged result is stored;
 *   - an owner revoking and granting again all along (docs/reference/rules.md "Actions": stop means
 *     stop), no command cancelled by a revocation is ever handed out, kills included;
 *   - nothing is stuck: after the last restart every action ends terminal (expiry applies).
 */

const KILLS = 20;
const TTL_SECONDS = 3;
const TERMINAL = new Set(['succeeded', 'failed', 'cancelled', 'expired']);

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-crash-'));
let service: ChildService | undefined;

afterAll(async () => {
  if (service && service.process.exitCode === null) {
    service.process.kill('SIGKILL');
    await service.exited;
  }
});

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('crash safety under SIGKILL', () => {
  it(`keeps every acknowledged action exactly once and delivers none twice across ${KILLS} kills`, async () => {
    const identity = await testIdentity(dir);
    const env = {
      ...identity.env,
      DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
      EXPIRY_SWEEP_SECONDS: '1',
      DEVICE_QUEUE_PER_PRINCIPAL: '100000',
      WORKSPACE_MAX_QUEUED_ACTIONS: '100000',
    };
    service = await startChildService({ ...env, PORT: '0' });
    let base = service.url;
    const api = () => client(base);

    const owner = await identity.ownerToken('crash-owner');
    const agent = await createAgent(api(), owner, { access: 'act' });
    const lamp = await attachDevice(api(), owner);
    await grant(api(), owner, agent.principal, lamp.id, ['set_brightness']);

    // The clients' own records.
    const acknowledged = new Map<string, string>(); // idempotency key → action id
    const delivered = new Map<string, number>(); // action id → times handed out by next
    const resultsAcknowledged = new Set<string>();
    let requestsSent = 0;
    let running = true;

    /** The agent: one request after another, each retried with its key until acknowledged. */
    const agentLoop = async (worker: number) => {
      for (let n = 0; running; n++) {
        const key = `w${worker}-${n}`;
        for (;;) {
          requestsSent++;
          try {
            const res = await api().post(`/v1/devices/${lamp.id}/actions`, {
              token: agent.token,
              body: { capability: 'set_brightness', arguments: { level: n % 101 }, ttlSeconds: TTL_SECONDS, idempotencyKey: key },
            });
            if (res.status === 201) {
              const previous = acknowledged.get(key);
              if (previous !== undefined) expect(res.body.data.id).toBe(previous);
              acknowledged.set(key, res.body.data.id);
              break;
            }
            expect(res.status, JSON.stringify(res.body)).toBeLessThan(500);
          } catch {
            // Connection refused or reset: the server is down. Retry with the same key.
          }
          await sleep(20);
        }
      }
    };

    /** The device: poll, then report success for what it was handed. */
    const deviceLoop = async () => {
      while (running) {
        try {
          const res = await api().post(`/v1/device/${lamp.id}/next`, { token: lamp.token, headers: { 'x-service-workspace': lamp.workspace } });
          const command = res.status === 200 ? res.body.data : null;
          if (!command) {
            await sleep(10);
            continue;
          }
          delivered.set(command.id, (delivered.get(command.id) ?? 0) + 1);
          const done = await api().post(`/v1/device/${lamp.id}/result`, {
            token: lamp.token,
            body: { actionId: command.id, ok: true, result: { level: command.args.level } },
          });
          if (done.status === 200) resultsAcknowledged.add(command.id);
        } catch {
          await sleep(20);
        }
      }
    };

    /** The owner: revokes the agent's grant and grants it again, over and over. */
    let revocations = 0;
    const ownerLoop = async () => {
      while (running) {
        try {
          await api().post('/v1/grants/revoke', { token: owner, body: { principal: agent.principal, deviceId: lamp.id } });
          revocations++;
          await sleep(30);
          await api().post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'] } });
        } catch {
          // The server is down; the next round tries again.
        }
        await sleep(100);
      }
      // Leave the grant in place for whatever comes after the load.
      await api().post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'] } });
    };

    const load = [agentLoop(0), agentLoop(1), agentLoop(2), deviceLoop(), deviceLoop(), ownerLoop()];

    let kills = 0;
    for (; kills < KILLS; kills++) {
      await sleep(250 + Math.random() * 700);
      service.process.kill('SIGKILL');
      await service.exited;
      const port = service.port;
      try {
        service = await startChildService({ ...env, PORT: String(port) });
      } catch {
        // The port was taken in the meantime: any free one will do; the clients follow.
        service = await startChildService({ ...env, PORT: '0' });
      }
      base = service.url;
    }

    await sleep(500);
    running = false;
    await Promise.all(load);

    // After the last restart, with no more load, every action must settle: the device's
    // results or expiry (TTL 3 s, sweep every second).
    let actions: { id: string; status: string; cancelReason: string | null; reportedLateAt: number | null; result: unknown }[] = [];
    for (let waited = 0; waited < 20_000; waited += 250) {
      actions = (await api().get('/v1/actions/export', { token: owner })).body.data.actions;
      if (actions.every((a) => TERMINAL.has(a.status))) break;
      await sleep(250);
    }

    const ids = actions.map((a) => a.id);
    const byId = new Map(actions.map((a) => [a.id, a]));
    const acknowledgedIds = [...acknowledged.values()];

    expect(new Set(ids).size).toBe(ids.length);
    // Exactly one action per idempotency key: every acknowledged one exists, and there is no other.
    expect(new Set(acknowledgedIds).size).toBe(acknowledgedIds.length);
    for (const id of acknowledgedIds) expect(byId.has(id), `acknowledged action ${id} is missing`).toBe(true);
    expect(ids.length).toBe(acknowledged.size);
    // Never handed out twice, and only acknowledged actions were handed out.
    const duplicates = [...delivered].filter(([, times]) => times > 1);
    expect(duplicates).toEqual([]);
    for (const id of delivered.keys()) expect(byId.has(id)).toBe(true);
    // A command handed out was never cancelled: what a revocation cancelled never reached the device.
    expect([...delivered.keys()].filter((id) => byId.get(id)!.status === 'cancelled')).toEqual([]);
    expect(revocations).toBeGreaterThan(0);
    // Every acknowledged result is stored: before the deadline as `succeeded`, after it on the
    // `expired` action with the time it arrived (docs/reference/rules.md "Actions": late results are kept).
    for (const id of resultsAcknowledged) {
      const stored = byId.get(id)!;
      if (stored.status !== 'succeeded')
        expect(stored, id).toMatchObject({ status: 'expired', reportedLateAt: expect.any(Number), result: { level: expect.any(Number) } });
    }
    // Nothing stuck.
    expect(actions.filter((a) => !TERMINAL.has(a.status))).toEqual([]);
    expect(kills).toBe(KILLS);
    expect(acknowledged.size).toBeGreaterThan(100);

    if (process.env.FAULT_STATS) {
      const statuses: Record<string, number> = {};
      for (const a of actions) statuses[a.status] = (statuses[a.status] ?? 0) + 1;
      console.info(
        `crash safety: ${kills} kills survived, ${requestsSent} action requests sent, ${acknowledged.size} acknowledged and checked, ` +
          `${delivered.size} delivered, ${duplicates.length} duplicates, ${resultsAcknowledged.size} results acknowledged, ${revocations} revocations, ` +
          `${actions.filter((a) => a.cancelReason === 'grant_revoked').length} with cancelReason grant_revoked, final ${JSON.stringify(statuses)}`,
      );
    }
  }, 180_000);
});

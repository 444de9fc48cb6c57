import { describe, expect, it } from 'vitest';
import { createEventHub } from '../../src/domain/event-hub.js';
import { startScheduler } from '../../src/domain/scheduled-actions.js';
import type { Db } from '../../src/store/driver.js';
import { requestAction } from '../helpers/actions.js';
import { manualClock } from '../helpers/clock.js';
import { attachDevice, createAgent } from '../helpers/fixtures.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The scheduler of one instance (docs/agents/actions.md "Scheduling", "Cheap while waiting"),
 * run beside the test server's own on the server's real database, as a second instance would:
 * what it reads while actions wait, and that a due time it hears of is kept.
 */

const NOON = Date.UTC(2026, 11, 2, 12, 0);
const clock = manualClock(NOON);
const server = useTestServer({ clock });
const api = server.api;

/** The server's database, counting the statements this scheduler sends through it. */
function counted(db: Db): { db: Db; reads: () => number } {
  let reads = 0;
  const wrapped = Object.create(db) as Db;
  wrapped.all = (sql, args) => ((reads += 1), db.all(sql, args));
  wrapped.get = (sql, args) => ((reads += 1), db.get(sql, args));
  wrapped.run = (sql, args) => ((reads += 1), db.run(sql, args));
  return { db: wrapped, reads: () => reads };
}

const silent = { debug() {}, info() {}, warn() {}, error() {} };

async function scheduleMany(count: number, notBefore: number): Promise<string[]> {
  const owner = await server.ownerToken(`scheduler-owner-${notBefore}`);
  const lamp = await attachDevice(api, owner);
  const agent = await createAgent(api, owner);
  await api.post('/v1/grants', { token: owner, body: { principal: agent.principal, deviceId: lamp.id, capabilities: ['set_brightness'] } });
  const ids: string[] = [];
  for (let i = 0; i < count; i++) {
    const res = await requestAction(api, agent.token, lamp.id, { capability: 'set_brightness', arguments: { level: i }, notBefore, ttlSeconds: 300 });
    expect(res.body.data?.status, JSON.stringify(res.body)).toBe('scheduled');
    ids.push(res.body.data.id as string);
  }
  return ids;
}

describe('the scheduler while actions wait', () => {
  it('reads the earliest due time once per rescan, not once per tick nor per action', async () => {
    await scheduleMany(30, NOON + 6 * 3_600_000);
    const { db, reads } = counted(server.service.db);
    const stop = startScheduler({ db, events: createEventHub(), clock: manualClock(NOON), log: silent }, { tickMs: 20, rescanMs: 400 });
    try {
      const started = performance.now();
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      const elapsed = performance.now() - started;
      // At start, then every 400 ms: at most one read per rescan that fits (50 ticks passed).
      expect(reads()).toBeGreaterThanOrEqual(1);
      expect(reads()).toBeLessThanOrEqual(Math.ceil(elapsed / 400) + 1);
    } finally {
      stop();
    }
  });

  it('moves an action at the due time a hint told it of, without waiting for a rescan', async () => {
    // The server's own scheduler keeps the server's clock (noon): this one runs on its own.
    const own = manualClock(NOON);
    const [later] = await scheduleMany(1, NOON + 5 * 3_600_000);
    const events = createEventHub();
    // No rescan within the test: it knows the later action from its first read only.
    const stop = startScheduler({ db: server.service.db, events, clock: own, log: silent }, { tickMs: 20, rescanMs: 3_600_000 });
    try {
      const moved: string[] = [];
      events.subscribe((event) => {
        if (event.type === 'action') moved.push(event.action.id);
      });
      const due = NOON + 4 * 3_600_000;
      const [early] = await scheduleMany(1, due);
      // Scheduled on "another instance": this one hears of it only from the bus's hint.
      events.publish({ type: 'action-hint', workspaceId: 'w', targetId: 't', actionId: early!, signal: false, dueAt: due });
      own.set(due);
      await expect.poll(() => moved).toEqual([early]);
      expect(moved).not.toContain(later);
    } finally {
      stop();
    }
  });
});

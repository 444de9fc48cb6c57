/**
 * Measures what waiting scheduled actions cost an idle instance (docs/agents/actions.md
 * "Scheduling"): the CPU the service process uses per minute with none scheduled, and again
 * with `--actions` scheduled hours to days ahead, nothing else happening.
 *
 *   node scripts/build-if-changed.mjs && npx tsx scripts/schedule-idle.ts [--actions 10000] [--seconds 60]
 *
 * Starts the build of `src/main.ts` (dist/main.js) as its own process on a temp libSQL file,
 * one workspace with 20 devices and one agent granted them, and reads the process's CPU time
 * (user and system, /proc/<pid>/stat) before and after each idle phase. The actions are made
 * by broadcasts of 20 through the REST API, as an agent would.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { parseArgs } from 'node:util';
import { client } from '../test/helpers/api.js';
import { grant } from '../test/helpers/actions.js';
import { startChildService, testIdentity } from '../test/helpers/child-service.js';
import { attachDevice, createAgent } from '../test/helpers/fixtures.js';
import { procCpuMs } from './proc-cpu.js';

const { values } = parseArgs({ options: { actions: { type: 'string', default: '10000' }, seconds: { type: 'string', default: '60' } } });
const actions = Number(values.actions);
const seconds = Number(values.seconds);
const PER_BROADCAST = 20;

const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-schedule-idle-'));
const identity = await testIdentity(dir);
const service = await startChildService({
  ...identity.env,
  PORT: '0',
  DATABASE_URL: `file:${path.join(dir, 'service.db')}`,
  WORKSPACE_MAX_SCHEDULED_ACTIONS: String(actions + 1),
});
const pid = service.process.pid!;

/** CPU ms per minute the service process used over `seconds` of doing nothing. */
async function idleCpuPerMinute(): Promise<number> {
  const before = procCpuMs(`/proc/${pid}/stat`)!;
  const started = performance.now();
  await sleep(seconds * 1000);
  const used = procCpuMs(`/proc/${pid}/stat`)! - before;
  return (used * 60_000) / (performance.now() - started);
}

try {
  const api = client(service.url);
  const owner = await identity.ownerToken('owner-schedule-idle');
  const agent = await createAgent(api, owner, { name: 'scheduler', access: 'act', principal: 'agent:scheduler' });
  const lamps = [];
  for (let i = 0; i < PER_BROADCAST; i++) {
    const lamp = await attachDevice(api, owner, { name: `Lamp ${i}` });
    await grant(api, owner, agent.principal, lamp.id, ['set_brightness']);
    lamps.push(lamp);
  }
  await sleep(5000);
  const empty = await idleCpuPerMinute();

  const hour = 3_600_000;
  const made = performance.now();
  for (let b = 0; b < actions / PER_BROADCAST; b++) {
    // Spread from one hour to six days ahead: none becomes due while the instance idles.
    const notBefore = Date.now() + hour + Math.floor((b / (actions / PER_BROADCAST)) * 5 * 24 * hour);
    const res = await api.post('/v1/broadcasts', {
      token: agent.token,
      body: { deviceIds: lamps.map((lamp) => lamp.id), capability: 'set_brightness', arguments: { level: b % 100 }, idempotencyKey: `idle-${b}`, notBefore },
    });
    if (res.status >= 300 || res.body.data.results.some((r: { ok: boolean }) => !r.ok))
      throw new Error(`broadcast ${b}: ${res.status} ${JSON.stringify(res.body)}`);
  }
  const madeSeconds = (performance.now() - made) / 1000;
  const usage = (await api.get('/v1/usage', { token: owner })).body.data;
  await sleep(5000);
  const waiting = await idleCpuPerMinute();

  console.log(`command: npx tsx scripts/schedule-idle.ts --actions ${actions} --seconds ${seconds} (Node ${process.version}, ${os.cpus().length} cores)`);
  console.log(
    `scheduled actions waiting: ${usage.capacity.scheduledActions.used} (made in ${madeSeconds.toFixed(1)} s by ${actions / PER_BROADCAST} broadcasts)`,
  );
  console.log(`idle CPU of the service process, none scheduled: ${empty.toFixed(0)} ms per minute`);
  console.log(`idle CPU of the service process, ${actions} scheduled: ${waiting.toFixed(0)} ms per minute`);
} finally {
  service.process.kill('SIGTERM');
  await service.exited;
  fs.rmSync(dir, { recursive: true, force: true });
}

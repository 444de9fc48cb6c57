/**
 * Measures what a pending 2025-era user confirmation costs in memory (docs/agents/confirmation.md
 * "Limits").
 *
 *   npx tsx --expose-gc scripts/confirmation-memory.ts [--count 200]
 *
 * Starts the real service in this process (a temp libSQL file), one agent connection with a
 * `user` grant, and opens `count` 2025-era tools/calls whose `elicitation/create` nobody
 * answers, with the caps raised to fit. It reports the heap (after a full GC) before and
 * while they wait, per prompt, then drops the streams and reports the heap once they are
 * released. The figure includes this process's own side of each open event stream (the
 * fetch), so it is an upper bound of the service's share; what is left after release includes
 * idle keep-alive sockets on both sides.
 */
import { parseArgs } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { client } from '../test/helpers/api.js';
import { grant } from '../test/helpers/actions.js';
import { attachDevice, createAgent } from '../test/helpers/fixtures.js';
import { initializeLegacy, startLegacyCall } from '../test/helpers/legacy-prompts.js';
import { RELAXED_LIMITS, startTestServer } from '../test/helpers/server.js';

const { values } = parseArgs({ options: { count: { type: 'string', default: '200' } } });
const count = Number(values.count);
const gc = (globalThis as { gc?: () => void }).gc;
if (!Number.isInteger(count) || count < 1 || !gc) {
  console.error('usage: npx tsx --expose-gc scripts/confirmation-memory.ts [--count N>=1]');
  process.exit(2);
}

async function heap(): Promise<number> {
  for (let i = 0; i < 3; i++) {
    gc!();
    await sleep(50);
  }
  return process.memoryUsage().heapUsed;
}

const server = await startTestServer({
  env: { ...RELAXED_LIMITS, MCP_CONFIRMATIONS_PER_CONNECTION: String(count), MCP_CONFIRMATIONS_PER_INSTANCE: String(count), LOG_LEVEL: 'warn' },
});
const api = client(server.url);
const owner = await server.ownerToken('owner-memory');
const lamp = await attachDevice(api, owner, { name: 'Lamp' });
const agent = await createAgent(api, owner, { name: 'memory', principal: 'agent:memory' });
await grant(api, owner, agent.principal, lamp.id, ['set_power'], undefined, 'user');
const tool = `set_power__${lamp.id.replaceAll('-', '').slice(0, 12)}`;
await initializeLegacy(server.url, agent.token);

// One ask answered first, so every lazily built cache is warm before the baseline.
const warm = await startLegacyCall(server.url, agent.token, tool, { on: true });
if (warm.kind !== 'ask') throw new Error(`expected an ask, got ${JSON.stringify(warm.result)}`);
await warm.answer({ action: 'decline' });
await warm.result();

const before = await heap();
const open = [];
for (let i = 0; i < count; i++) {
  const call = await startLegacyCall(server.url, agent.token, tool, { on: i % 2 === 0 }, i + 1);
  if (call.kind !== 'ask') throw new Error(`call ${i}: expected an ask, got ${JSON.stringify(call.result)}`);
  open.push(call);
}
const during = await heap();
for (const call of open) call.close();
// What is left is the service's: this script lets go of its side of the calls.
open.length = 0;
await sleep(6000);
const after = await heap();
const again = await startLegacyCall(server.url, agent.token, tool, { on: true }, count + 1);
const released = again.kind === 'ask';
if (again.kind === 'ask') again.close();
await server.close();

const kib = (bytes: number) => `${(bytes / 1024).toFixed(1)} KiB`;
console.log(`pending prompts: ${count}`);
console.log(`heap before: ${kib(before)}, while pending: ${kib(during)}, after release: ${kib(after)}`);
console.log(
  `released after the streams closed: ${released ? 'yes (a new ask was made at the cap)' : `no: ${JSON.stringify(again.kind === 'result' ? again.result : null)}`}`,
);
console.log(`per pending prompt: ${kib((during - before) / count)}; left after release: ${kib((after - before) / count)} per prompt`);

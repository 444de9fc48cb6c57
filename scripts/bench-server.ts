/**
 * The server half of `npm run bench` (scripts/bench.ts), run as a child process so the load
 * generator never competes with it for the same event loop (and, with taskset, not for the
 * same core either). It is the real service — `startService` with the configuration parsed
 * from the environment, exactly as src/main.ts does — plus three measuring hooks the parent
 * asks for over the IPC channel:
 *
 * - `published`: when each action was published as `queued` (after its transaction
 *   committed), on the monotonic clock `process.hrtime` reads, which is the same clock in
 *   every process of the machine. The parent subtracts it from the moment its device socket
 *   received the wake frame: the wake latency queue → frame, socket hop included.
 * - `cpu`: the CPU time used so far, the main thread's share of it, the times the process
 *   slept for want of work (voluntary context switches: event-loop wake-ups) and was
 *   preempted (involuntary ones), the garbage collector's pauses in ms (wall time, all and
 *   major), and the heap in use now.
 * - `rss`: the process's resident set after a full garbage collection (run with --expose-gc).
 * - `db-stats`: on a libSQL server, the remote driver's writer-queue counters so far
 *   (`WriterQueueStats` in src/store/remote.ts); nothing on the embedded driver.
 * - `profile-start` / `profile-stop`: a V8 CPU profile of one phase only (the inspector's
 *   Profiler, the same data as `node --cpu-prof`), written to `profiles/<name>.cpuprofile`.
 * - `stop`: closes the service and exits.
 */
import fs from 'node:fs';
import { Session } from 'node:inspector/promises';
import path from 'node:path';
import { constants, PerformanceObserver } from 'node:perf_hooks';
import type * as ConfigModule from '../src/config.js';
import type * as LoggerModule from '../src/logger.js';
import type * as NotifierModule from '../src/device-channel/notifier.js';
import type * as ServiceModule from '../src/service.js';
import { procCpuMs } from './proc-cpu.js';

// The service as `npm start` runs it: the tsc build in dist/, which scripts/bench.ts makes
// before it starts this process (the types are the sources'). BENCH_SERVICE_DIR names another
// checkout whose build to load instead (`npm run bench:compare` runs an earlier commit so).
const serviceDir = process.env.BENCH_SERVICE_DIR ?? path.join(import.meta.dirname, '..');
const built = <T>(module: string) => import(path.join(serviceDir, 'dist', module)) as Promise<T>;
const { parseConfig } = await built<typeof ConfigModule>('config.js');
const { createLogger } = await built<typeof LoggerModule>('logger.js');
const { createLocalNotifier } = await built<typeof NotifierModule>('device-channel/notifier.js');
const { startService } = await built<typeof ServiceModule>('service.js');

type Request =
  | { type: 'published'; since: number }
  | { type: 'rss' }
  | { type: 'cpu' }
  | { type: 'db-stats' }
  | { type: 'profile-start' }
  | { type: 'profile-stop'; file: string }
  | { type: 'stop' };

let session: Session | undefined;

/**
 * The CPU time of the main thread alone (the event loop), from /proc in clock ticks: the rest
 * of the process's CPU is V8's and libuv's helper threads (concurrent marking, parallel
 * scavenges, compilation). Undefined where /proc is not.
 */
function mainThreadCpuMs(): number | undefined {
  return procCpuMs(`/proc/self/task/${process.pid}/stat`);
}

// Garbage collection pauses so far, so the bench can tell how much of a round trip's CPU they take.
let gcMs = 0;
let majorGcMs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) {
    gcMs += entry.duration;
    if ((entry as { detail?: { kind?: number } }).detail?.kind === constants.NODE_PERFORMANCE_GC_MAJOR) majorGcMs += entry.duration;
  }
}).observe({ entryTypes: ['gc'] });

const send = (message: unknown) => process.send!(message);
const config = parseConfig(process.env);

// actionId → hrtime (ms) of its `queued` publication; kept until the parent reads it. The
// recorder subscribes before the wake notifier does, so it runs before the frame is written.
const published = new Map<string, number>();
const service = await startService(config, {
  log: createLogger(config.logLevel),
  notifier: (events, deps) => {
    events.subscribe((event) => {
      if (event.type === 'action' && event.action.status === 'queued') published.set(event.action.id, Number(process.hrtime.bigint()) / 1e6);
    });
    return createLocalNotifier(events, deps);
  },
});

process.on('message', (raw: Request) => {
  switch (raw.type) {
    case 'published': {
      const entries = [...published].filter(([, at]) => at >= raw.since);
      published.clear();
      send({ type: 'published', entries });
      break;
    }
    case 'rss': {
      (globalThis as { gc?: () => void }).gc?.();
      send({ type: 'rss', rss: process.memoryUsage().rss, heapUsed: process.memoryUsage().heapUsed });
      break;
    }
    case 'cpu': {
      const { voluntaryContextSwitches, involuntaryContextSwitches } = process.resourceUsage();
      const mainThreadMs = mainThreadCpuMs();
      send({
        type: 'cpu',
        usage: process.cpuUsage(),
        sleeps: voluntaryContextSwitches,
        preempted: involuntaryContextSwitches,
        gcMs,
        majorGcMs,
        heapUsed: process.memoryUsage().heapUsed,
        mainThreadMs,
      });
      break;
    }
    case 'db-stats': {
      const db = service.db as { stats?: () => unknown };
      send({ type: 'db-stats', stats: db.stats?.() });
      break;
    }
    case 'profile-start':
      void (async () => {
        session = new Session();
        session.connect();
        await session.post('Profiler.enable');
        await session.post('Profiler.setSamplingInterval', { interval: 200 });
        await session.post('Profiler.start');
        send({ type: 'profile-start' });
      })();
      break;
    case 'profile-stop':
      void (async () => {
        const { profile } = await session!.post('Profiler.stop');
        session!.disconnect();
        fs.mkdirSync(path.dirname(raw.file), { recursive: true });
        fs.writeFileSync(raw.file, JSON.stringify(profile));
        send({ type: 'profile-stop' });
      })();
      break;
    case 'stop':
      void service.close().then(() => process.exit(0));
      break;
  }
});

send({ type: 'ready', url: service.url, pid: process.pid });

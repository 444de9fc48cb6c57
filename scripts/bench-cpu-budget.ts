/**
 * A CPU budget for one bench server process: a cgroup of its own whose CPU quota is a
 * fraction of one core, the way a container's CPU limit or a small machine bounds one
 * instance of the service in a deployment. With it, the bench's instances each bring their
 * own CPU, as instances on separate machines do, and `--instances 2` asks whether a second
 * instance adds capacity where the first one's CPU is what limits it; without it, every
 * instance shares the server's core (docs/performance.md, "Each instance with a CPU budget").
 *
 * Needs a writable cgroup CPU controller: v2's `cpu.max` or v1's `cpu.cfs_quota_us` (root in
 * a VM or container that delegates it). Linux only.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The scheduler period the quota is a share of (the kernel's default, 100 ms). */
const PERIOD_US = 100_000;

export interface CpuBudget {
  /** The command and arguments that run `argv` inside the budget's cgroup. */
  wrap(argv: string[]): [string, string[]];
  /** Removes the cgroup (its process must have exited). */
  remove(): void;
}

/** Where a new cgroup with a CPU quota can be made, and how its quota is written. */
function cpuController(): { root: string; write(dir: string, quotaUs: number): void } {
  const v2 = '/sys/fs/cgroup';
  if (readable(path.join(v2, 'cgroup.controllers')).split(/\s+/).includes('cpu'))
    return { root: v2, write: (dir, quotaUs) => fs.writeFileSync(path.join(dir, 'cpu.max'), `${quotaUs} ${PERIOD_US}`) };
  const v1 = '/sys/fs/cgroup/cpu';
  if (fs.existsSync(path.join(v1, 'cpu.cfs_quota_us')))
    return {
      root: v1,
      write(dir, quotaUs) {
        fs.writeFileSync(path.join(dir, 'cpu.cfs_period_us'), String(PERIOD_US));
        fs.writeFileSync(path.join(dir, 'cpu.cfs_quota_us'), String(quotaUs));
      },
    };
  throw new Error('--instance-cpu needs a cgroup CPU controller (cgroup v2 cpu.max or v1 cpu.cfs_quota_us)');
}

function readable(file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return '';
  }
}

let made = 0;

/** A fresh cgroup limited to `cores` of CPU (0.25: a quarter of one core). Throws where none can be made. */
export function cpuBudget(cores: number): CpuBudget {
  const controller = cpuController();
  const dir = path.join(controller.root, `dfc-bench-${process.pid}-${made++}`);
  try {
    fs.mkdirSync(dir);
    controller.write(dir, Math.round(cores * PERIOD_US));
  } catch (error) {
    throw new Error(`--instance-cpu: cannot make a cgroup at ${dir} (${(error as Error).message}); run as root, or without --instance-cpu`);
  }
  return {
    // The shell joins the cgroup before it becomes the process, so not one instruction runs unbudgeted.
    wrap: (argv) => ['sh', ['-c', `echo $$ > '${path.join(dir, 'cgroup.procs')}' && exec "$@"`, 'sh', ...argv]],
    remove() {
      try {
        fs.rmdirSync(dir);
      } catch {
        // A process still in it (killed, not yet reaped) keeps it: an empty leftover costs nothing.
      }
    },
  };
}

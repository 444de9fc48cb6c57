/**
 * A CPU budget for one bench server process: a cgroup of its own whose CPU quota is a
 * fraction of one core, the way a container's CPU limit bounds one instance of the service
 * in a deployment. With it, the bench's instances each bring their own CPU, and
 * `--instances 2` asks whether a second instance adds capacity where the first one's CPU is
 * what limits it; without it, every instance shares the server's core (docs/performance.md,
 * "A second instance with CPU of its own").
 *
 * Needs a writable cgroup CPU controller: v2's `cpu.max` (with `cpu` enabled for the root's
 * children) or v1's `cpu.cfs_quota_us`, as root. Linux only.
 */
import fs from 'node:fs';
import path from 'node:path';

/** The scheduler period the quota is a share of (the kernel's default, 100 ms). */
const PERIOD_US = 100_000;
/** The kernel's smallest quota (1 ms a period): `--instance-cpu` below 0.01 cannot be set. */
const MIN_QUOTA_US = 1_000;
/** The name every budget's cgroup starts with. */
const PREFIX = 'dfc-bench-';

export interface CpuBudget {
  /** The command and arguments that run `argv` inside the budget's cgroup. */
  wrap(argv: string[]): [string, string[]];
  /** Removes the cgroup (its process must have exited). */
  remove(): void;
}

/** Where a new cgroup with a CPU quota can be made, and how its quota is written; why not, where it cannot. */
function cpuController(): { root: string; write(dir: string, quotaUs: number): void } {
  const v2 = '/sys/fs/cgroup';
  if (readable(path.join(v2, 'cgroup.controllers')).split(/\s+/).includes('cpu')) {
    if (!readable(path.join(v2, 'cgroup.subtree_control')).split(/\s+/).includes('cpu'))
      throw new Error(`--instance-cpu: the cgroup v2 cpu controller is not enabled for children of ${v2} (echo +cpu > ${v2}/cgroup.subtree_control)`);
    return { root: v2, write: (dir, quotaUs) => fs.writeFileSync(path.join(dir, 'cpu.max'), `${quotaUs} ${PERIOD_US}`) };
  }
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

/** Removes the cgroups of earlier runs (a run that failed kills its servers without waiting to remove them). */
function removeLeftovers(root: string): void {
  for (const name of fs.readdirSync(root)) {
    if (!name.startsWith(PREFIX)) continue;
    // Another bench running now may not have moved its server into its cgroup yet.
    if (alive(Number(name.slice(PREFIX.length).split('-')[0]))) continue;
    try {
      fs.rmdirSync(path.join(root, name));
    } catch {
      // Still holds a process: a server that outlived its run.
    }
  }
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

let made = 0;

/** A fresh cgroup limited to `cores` of CPU (0.25: a quarter of one core). Throws where none can be made. */
export function cpuBudget(cores: number): CpuBudget {
  const quotaUs = Math.round(cores * PERIOD_US);
  if (quotaUs < MIN_QUOTA_US) throw new Error(`--instance-cpu: at least ${MIN_QUOTA_US / PERIOD_US} of a core`);
  const controller = cpuController();
  if (made === 0) removeLeftovers(controller.root);
  const dir = path.join(controller.root, `${PREFIX}${process.pid}-${made++}`);
  try {
    fs.mkdirSync(dir);
  } catch (error) {
    throw new Error(`--instance-cpu: cannot make a cgroup at ${dir} (${(error as Error).message}); run as root, or without --instance-cpu`);
  }
  try {
    controller.write(dir, quotaUs);
  } catch (error) {
    try {
      fs.rmdirSync(dir);
    } catch {
      // Left for the next run's `removeLeftovers`: the quota's error is the one to report.
    }
    throw new Error(`--instance-cpu: cannot set the quota of ${dir} (${(error as Error).message})`);
  }
  return {
    // The shell joins the cgroup before it becomes the process, so not one instruction runs unbudgeted.
    wrap: (argv) => ['sh', ['-c', `echo $$ > '${path.join(dir, 'cgroup.procs')}' && exec "$@"`, 'sh', ...argv]],
    remove() {
      try {
        fs.rmdirSync(dir);
      } catch {
        // A process still in it (killed, not yet reaped): the next run's `removeLeftovers` takes it.
      }
    },
  };
}

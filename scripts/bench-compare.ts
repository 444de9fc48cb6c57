/**
 * `npm run bench:compare -- --against <commit>` — the bench (scripts/bench.ts) on this checkout
 * and on an earlier commit in one run, alternately, so a regression shows as a pair measured
 * side by side on the same machine at the same time, not as a figure remembered from another day.
 *
 *   npm run bench:compare -- --against a6204d1 [--against <commit>…] [--rounds 3] [--keep] [bench options]
 *
 * Each `--against` commit is checked out in a temporary worktree (under the system's temp
 * folder, removed at the end unless `--keep`, and reused by a later run while kept), given this
 * checkout's node_modules when its package-lock.json is the same, `npm ci` otherwise, and built
 * (`npm run build`). Then every round runs the bench once per checkout, the order turned round
 * each round (this, earlier; earlier, this; …) so a machine getting busier or quieter during the
 * run falls on both. The load generator, the bare and floor servers and the bench's phases are
 * this checkout's in every run; only the service's server process loads the other build
 * (`--service-dir`): the same bench measures both.
 *
 * Every other option goes to the bench (default `--only mcp,rest --duration 5`); with
 * `--instance-cpu 0.5` each service process gets half a core of its own, which keeps other
 * work on a shared machine from deciding the figures. The report gives, for each checkout,
 * the median of each figure over the rounds with its range (the noise), and this checkout's
 * median as a ratio of each earlier one's. CPU per round trip moves much less than the rate
 * when other work shares the machine: compare that first.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const ROOT = path.resolve(import.meta.dirname, '..');

const against: string[] = [];
let rounds = 3;
let keep = false;
const benchArgs: string[] = [];
const argv = process.argv.slice(2);
for (let i = 0; i < argv.length; i++) {
  const arg = argv[i]!;
  if (arg === '--against') against.push(argv[++i] ?? '');
  else if (arg === '--rounds') rounds = Number(argv[++i]);
  else if (arg === '--keep') keep = true;
  else if (arg === '--service-dir' || arg === '--json' || arg === '--no-build') {
    console.error(`bench:compare: ${arg} is the comparison's own to set`);
    process.exit(2);
  } else benchArgs.push(arg);
}
if (against.length === 0 || against.some((commit) => commit === '') || !Number.isInteger(rounds) || rounds < 1) {
  console.error('usage: npm run bench:compare -- --against <commit> [--against <commit>…] [--rounds N>=1] [--keep] [bench options]');
  process.exit(2);
}
if (!benchArgs.includes('--only')) benchArgs.push('--only', 'mcp,rest');
if (!benchArgs.includes('--duration')) benchArgs.push('--duration', '5');

const git = (...args: string[]) => execFileSync('git', args, { cwd: ROOT, encoding: 'utf8' }).trim();

interface Checkout {
  label: string;
  dir: string;
}

/** Node modules of this checkout that a worktree with the same lockfile can share. */
const MODULE_DIRS = ['node_modules', ...fs.readdirSync(path.join(ROOT, 'packages')).map((name) => path.join('packages', name, 'node_modules'))].filter((dir) =>
  fs.existsSync(path.join(ROOT, dir)),
);

/**
 * Builds the service at this checkout or in a worktree. tsc writes dist/ even where it reports
 * type errors (a shared node_modules can hold another version of a workspace package than the
 * commit was written against): the bench needs dist/service.js, not a clean type check.
 */
function build(dir: string): void {
  const result = spawnSync('npm', ['run', '-s', 'build'], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8' });
  if (result.status !== 0) {
    if (!fs.existsSync(path.join(dir, 'dist', 'service.js'))) {
      process.stderr.write(result.stderr);
      throw new Error(`bench:compare: the build in ${dir} failed`);
    }
    console.error(`bench:compare: the build in ${dir} reported errors; its dist/ is used as written`);
  }
}

function prepare(commit: string): Checkout {
  const sha = git('rev-parse', '--verify', `${commit}^{commit}`);
  const dir = path.join(os.tmpdir(), 'dfc-bench-compare', sha.slice(0, 12));
  if (!fs.existsSync(path.join(dir, '.git'))) {
    fs.mkdirSync(path.dirname(dir), { recursive: true });
    git('worktree', 'add', '--detach', dir, sha);
  }
  const sameLockfile = spawnSync('git', ['diff', '--quiet', sha, 'HEAD', '--', 'package-lock.json'], { cwd: ROOT }).status === 0;
  if (!fs.existsSync(path.join(dir, 'node_modules'))) {
    if (sameLockfile) {
      for (const modules of MODULE_DIRS)
        if (fs.existsSync(path.dirname(path.join(dir, modules)))) fs.symlinkSync(fs.realpathSync(path.join(ROOT, modules)), path.join(dir, modules));
    } else {
      console.error(`bench:compare: ${commit} has another package-lock.json: npm ci in ${dir}`);
      execFileSync('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: dir, stdio: 'inherit' });
    }
  }
  build(dir);
  return { label: commit, dir };
}

/** The figures of one bench run that the comparison reports (undefined where the phase did not run). */
interface Figures {
  'healthz req/s'?: number;
  'healthz µs CPU/request'?: number;
  'MCP round trips/s'?: number;
  'MCP µs CPU/round trip'?: number;
  'REST round trips/s'?: number;
  'REST µs CPU/round trip'?: number;
  'task-mode round trips/s'?: number;
  'task-mode µs CPU/round trip'?: number;
  'MCP one at a time, µs CPU'?: number;
  'REST one at a time, µs CPU'?: number;
  'floor round trips/s'?: number;
  'wake p99 ms (1,000 sockets)'?: number;
}

/** For each figure, whether more is better (the ratio's reading). */
const HIGHER_IS_BETTER: Record<keyof Figures, boolean> = {
  'healthz req/s': true,
  'healthz µs CPU/request': false,
  'MCP round trips/s': true,
  'MCP µs CPU/round trip': false,
  'REST round trips/s': true,
  'REST µs CPU/round trip': false,
  'task-mode round trips/s': true,
  'task-mode µs CPU/round trip': false,
  'MCP one at a time, µs CPU': false,
  'REST one at a time, µs CPU': false,
  'floor round trips/s': true,
  'wake p99 ms (1,000 sockets)': false,
};

function runBench(checkout: Checkout): Figures {
  const json = path.join(os.tmpdir(), `dfc-bench-compare-${process.pid}.json`);
  const result = spawnSync(
    process.execPath,
    ['--import', 'tsx', path.join(ROOT, 'scripts', 'bench.ts'), '--no-build', '--service-dir', checkout.dir, '--json', json, ...benchArgs],
    { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] },
  );
  if (result.status !== 0) throw new Error(`bench:compare: the bench against ${checkout.label} exited with ${result.status}`);
  const report = JSON.parse(fs.readFileSync(json, 'utf8'));
  fs.rmSync(json, { force: true });
  const load = (figure: { roundTripsPerSecond: number; service: { cpuMicros: number } } | undefined, rate: keyof Figures, cpu: keyof Figures) =>
    figure ? { [rate]: figure.roundTripsPerSecond, [cpu]: figure.service.cpuMicros } : {};
  return {
    ...(report.healthz ? { 'healthz req/s': report.healthz.requestsPerSecond, 'healthz µs CPU/request': report.healthz.cpuMicrosPerRequest } : {}),
    ...load(report.mcpRoundTrips, 'MCP round trips/s', 'MCP µs CPU/round trip'),
    ...load(report.restRoundTrips, 'REST round trips/s', 'REST µs CPU/round trip'),
    ...load(report.mcpTaskRoundTrips, 'task-mode round trips/s', 'task-mode µs CPU/round trip'),
    ...(report.sequential ? { 'MCP one at a time, µs CPU': report.sequential.service.cpuMicros } : {}),
    ...(report.sequentialRest ? { 'REST one at a time, µs CPU': report.sequentialRest.service.cpuMicros } : {}),
    ...(report.floor ? { 'floor round trips/s': report.floor.roundTripsPerSecond } : {}),
    ...(report.wake ? { 'wake p99 ms (1,000 sockets)': report.wake.wake.p99Ms } : {}),
  };
}

const median = (values: number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
};
const round = (n: number) => (Math.abs(n) >= 100 ? Math.round(n) : Math.round(n * 100) / 100);

const dirty = git('status', '--porcelain', '--untracked-files=no') !== '';
const current: Checkout = { label: `this checkout (${git('rev-parse', '--short', 'HEAD')}${dirty ? ', modified' : ''})`, dir: ROOT };
const earlier = against.map(prepare);
build(ROOT);
const checkouts = [current, ...earlier];
const runs = new Map<Checkout, Figures[]>(checkouts.map((checkout) => [checkout, []]));
const started = Date.now();
try {
  for (let r = 0; r < rounds; r++) {
    const order = r % 2 === 0 ? checkouts : [...checkouts].reverse();
    for (const checkout of order) {
      const figures = runBench(checkout);
      runs.get(checkout)!.push(figures);
      console.error(`round ${r + 1}/${rounds}, ${checkout.label}: ${JSON.stringify(figures)}`);
    }
  }
} finally {
  if (!keep) for (const checkout of earlier) spawnSync('git', ['worktree', 'remove', '--force', checkout.dir], { cwd: ROOT, stdio: 'ignore' });
}

const names = (Object.keys(HIGHER_IS_BETTER) as (keyof Figures)[]).filter((name) => runs.get(current)!.some((figures) => figures[name] !== undefined));
const summary = (checkout: Checkout, name: keyof Figures) => {
  const values = runs.get(checkout)!.flatMap((figures) => (figures[name] === undefined ? [] : [figures[name]]));
  return { median: median(values), min: Math.min(...values), max: Math.max(...values) };
};
const header = ['Figure', ...checkouts.map((checkout) => checkout.label), ...earlier.map((checkout) => `this ÷ ${checkout.label}`)];
const rows = names.map((name) => {
  const mine = summary(current, name);
  return [
    name,
    ...checkouts.map((checkout) => {
      const { median: m, min, max } = summary(checkout, name);
      return `${round(m)} (${round(min)}–${round(max)})`;
    }),
    ...earlier.map((checkout) => {
      const ratio = mine.median / summary(checkout, name).median;
      const better = HIGHER_IS_BETTER[name] ? ratio >= 1 : ratio <= 1;
      return `${ratio.toFixed(2)}× ${Math.abs(ratio - 1) < 0.005 ? '' : better ? '(better)' : '(worse)'}`.trim();
    }),
  ];
});
const widths = header.map((_, c) => Math.max(...[header, ...rows].map((row) => row[c]!.length)));
const line = (row: string[]) => `| ${row.map((cell, c) => cell.padEnd(widths[c]!)).join(' | ')} |`;
console.log(
  `\nnpm run bench:compare — ${rounds} round${rounds === 1 ? '' : 's'}, bench ${benchArgs.join(' ')}, Node ${process.version}, ${os.cpus().length} cores, ${Math.round((Date.now() - started) / 1000)} s`,
);
console.log('median (range) of the rounds\n');
console.log(line(header));
console.log(`|${widths.map((w) => '-'.repeat(w + 2)).join('|')}|`);
for (const row of rows) console.log(line(row));

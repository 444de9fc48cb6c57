// `npm run check`: the fast inner loop, for what this branch changed. In order:
//
//   1. types     tsc --noEmit, incremental (its state in .cache/, gitignored)
//   2. layers    dependency-cruiser from the changed modules (the rules of npm run lint:layers)
//   3. eslint    ESLint on the changed .ts/.tsx/.js/.mjs/.cjs files
//   4. prettier  Prettier --check on the changed files it formats
//   5. tests     the tests of the changed areas (scripts/related-tests.mjs says which):
//                changed tests, tests named after a changed file, the tests nearest a
//                changed module in the import graph, tests that name a changed doc or config
//   6. commits   commit subjects at most 72 characters (scripts/check-commits.mjs)
//
// "Changed" is every file that differs from the merge base with main, committed or not, plus
// untracked files; on main itself (or without a main branch), what is staged, unstaged or
// untracked; with --base <commit>, what differs from that commit. Every step runs even when one
// before it fails, so one run lists every problem. The whole `npm run lint` (layers, ESLint and
// Prettier over the tree) and the whole suite stay in CI.
//
//   node scripts/check.mjs                 every step
//   node scripts/check.mjs --no-tests      without step 5
//   node scripts/check.mjs --base HEAD     only what is not committed yet
//   node scripts/check.mjs --list          print the changed files and the tests, and stop
import { execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { relatedTests } from './related-tests.mjs';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

function git(args, cwd) {
  return execFileSync('git', args, { cwd, encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
}

function tryGit(args, cwd) {
  try {
    return git(args, cwd).trim();
  } catch {
    return undefined;
  }
}

const lines = (text) => text.split('\n').filter(Boolean);

/** The commit the branch forked from main (or origin/main in a CI clone); undefined on main itself. */
function branchBase(cwd) {
  const branch = tryGit(['symbolic-ref', '--quiet', '--short', 'HEAD'], cwd);
  if (branch === 'main') return undefined;
  for (const main of ['main', 'origin/main']) {
    const base = tryGit(['merge-base', 'HEAD', main], cwd);
    if (base) return base;
  }
  return undefined;
}

/** The files this branch or working tree changed that still exist, relative to the repository root. */
function changedFiles(cwd, chosenBase) {
  const root = git(['rev-parse', '--show-toplevel'], cwd).trim();
  const base = chosenBase ?? branchBase(root) ?? 'HEAD';
  // `git diff <commit>` compares the commit with the working tree: staged and unstaged edits alike.
  const tracked = tryGit(['rev-parse', '--verify', '--quiet', 'HEAD'], root) ? lines(git(['diff', '--name-only', base], root)) : [];
  const cached = lines(git(['diff', '--name-only', '--cached'], root));
  const untracked = lines(git(['ls-files', '--others', '--exclude-standard'], root));
  const files = [...new Set([...tracked, ...cached, ...untracked])].filter((file) => fs.existsSync(path.join(root, file)));
  return { root, base, files: files.sort() };
}

const bin = (name) => path.join(projectRoot, 'node_modules', '.bin', name);

const MODULE = /\.(ts|tsx|js|mjs|cjs)$/;

/**
 * Runs one step; answers whether it passed and how long it took. `shown` steps write as they
 * go; the others are run side by side, so their output is held and written whole at the end.
 */
function step(name, command, args, shown = false) {
  const started = performance.now();
  if (shown) console.log(`\n── ${name}`);
  const child = spawn(command, args, { cwd: projectRoot, stdio: shown ? 'inherit' : ['ignore', 'pipe', 'pipe'] });
  const output = [];
  child.stdout?.on('data', (chunk) => output.push(chunk));
  child.stderr?.on('data', (chunk) => output.push(chunk));
  return new Promise((resolve) => {
    child.on('close', (code) => {
      if (!shown) process.stdout.write(`\n── ${name}\n${Buffer.concat(output).toString()}`);
      resolve({ name, ok: code === 0, seconds: (performance.now() - started) / 1000 });
    });
  });
}

async function main(argv) {
  const started = performance.now();
  const baseAt = argv.indexOf('--base');
  const { root, base, files } = changedFiles(process.cwd(), baseAt === -1 ? undefined : argv[baseAt + 1]);
  const { tests, notes } = relatedTests(root, files);
  if (argv.includes('--list')) {
    for (const file of files) console.log(`changed ${file}`);
    for (const test of tests) console.log(`test ${test}`);
    return 0;
  }
  const against = base === 'HEAD' ? 'HEAD' : `${base.slice(0, 7)} (the merge base with main)`;
  console.log(`${files.length} file(s) changed against ${argv.includes('--base') ? base : against}`);
  const absolute = (list) => list.map((file) => path.join(root, file));
  const lintable = files.filter((file) => MODULE.test(file));
  const cruised = lintable.filter((file) => /^(src|test|scripts|packages)\//.test(file));

  // Types, layers, ESLint and Prettier side by side: on a busy machine, waiting on one another
  // costs more than sharing the cores. The type-checker is incremental: after a small change it
  // re-checks little, but still parses every declaration file (~6 s of CPU).
  const buildInfo = path.join(projectRoot, '.cache', 'tsconfig.tsbuildinfo');
  const results = await Promise.all([
    step('types', bin('tsc'), ['-p', 'tsconfig.json', '--noEmit', '--incremental', '--tsBuildInfoFile', buildInfo]),
    ...(cruised.length > 0 ? [step('layers', bin('depcruise'), [...cruised, '--config', '.dependency-cruiser.cjs'])] : []),
    ...(lintable.length > 0 ? [step('eslint', bin('eslint'), ['--no-warn-ignored', ...absolute(lintable)])] : []),
    ...(files.length > 0 ? [step('prettier', bin('prettier'), ['--check', '--ignore-unknown', ...absolute(files)])] : []),
  ]);
  for (const note of notes) console.log(`\n${note}`);
  if (!argv.includes('--no-tests') && tests.length > 0) results.push(await step('tests', bin('vitest'), ['run', ...absolute(tests)], true));
  results.push(await step('commits', process.execPath, [path.join(projectRoot, 'scripts', 'check-commits.mjs')], true));

  console.log('\n── check');
  for (const r of results) console.log(`${r.ok ? 'ok  ' : 'FAIL'} ${r.name.padEnd(9)} ${r.seconds.toFixed(1)} s`);
  const total = ((performance.now() - started) / 1000).toFixed(1);
  const failed = results.filter((r) => !r.ok).length;
  console.log(failed === 0 ? `passed in ${total} s` : `${failed} step(s) failed (${total} s)`);
  return failed === 0 ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));

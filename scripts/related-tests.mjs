// Which test files `npm run check` runs for a set of changed files: the tests of the changed
// areas, not every test that reaches a changed file. Nearly every server test imports
// src/domain/registry.ts through test/helpers/server.ts, so "every test that imports it,
// however indirectly" (`vitest related`) is most of the suite for most changes. Instead:
//
//   - a changed test file;
//   - the tests named after a changed file: src/domain/grants.ts → test/rest/grants.test.ts,
//     test/hostile/stale-grants.test.ts (the file's name as a whole dash-separated part);
//   - the tests nearest a changed module in the import graph: those at the fewest imports from
//     it (src/domain/account.ts → the tests importing src/domain/registry.ts), unless more than
//     NEAREST_MAX are that near (a test helper, a console screen): then the tests named after
//     its folder (src/console/… → test/console/ and test/*/console-*.test.ts), and the run says
//     what it left out;
//   - the tests that name a changed file that is not a module by its path (test/docs/readme.test.ts
//     reads README.md), and test/store/store.test.ts for a migration.
import fs from 'node:fs';
import path from 'node:path';

const NEAREST_MAX = 10;
const SOURCE = /\.(ts|tsx)$/;
const TEST = /\.test\.ts$/;
const SPECIFIER = /(?:^|\s)(?:import|export)\s(?:[^'";]*?\sfrom\s)?['"]([^'"]+)['"]|import\(\s*['"]([^'"]+)['"]\s*\)/g;
/** The workspace package the tests import by name (tsconfig.json `paths`). */
const PACKAGES = { '@dfc/device': 'packages/device-sdk/src/index.ts' };

function sourceFiles(root) {
  const files = [];
  for (const dir of ['src', 'test', 'scripts', 'packages/device-sdk/src']) {
    if (!fs.existsSync(path.join(root, dir))) continue;
    for (const entry of fs.readdirSync(path.join(root, dir), { recursive: true })) {
      const file = path.posix.join(dir, String(entry).split(path.sep).join('/'));
      if (SOURCE.test(file)) files.push(file);
    }
  }
  return files;
}

/** The file a relative specifier names: `./x.js` is `./x.ts` or `./x.tsx` in the source tree. */
function resolve(root, from, specifier) {
  if (PACKAGES[specifier]) return PACKAGES[specifier];
  if (!specifier.startsWith('.')) return undefined;
  const target = path.posix.normalize(path.posix.join(path.posix.dirname(from), specifier));
  const stem = target.replace(/\.(js|jsx|ts|tsx)$/, '');
  return [`${stem}.ts`, `${stem}.tsx`, target].find((file) => fs.existsSync(path.join(root, file)));
}

/** For each file, the files that import it. */
function importers(root, files) {
  const byTarget = new Map();
  for (const file of files) {
    const text = fs.readFileSync(path.join(root, file), 'utf8');
    for (const match of text.matchAll(SPECIFIER)) {
      const target = resolve(root, file, match[1] ?? match[2]);
      if (!target) continue;
      if (!byTarget.has(target)) byTarget.set(target, new Set());
      byTarget.get(target).add(file);
    }
  }
  return byTarget;
}

/** The test files at the fewest imports from `changed` (breadth first, against the imports). */
function nearestTests(byTarget, changed) {
  let frontier = [changed];
  const seen = new Set(frontier);
  while (frontier.length > 0) {
    const next = [];
    for (const file of frontier) {
      for (const importer of byTarget.get(file) ?? []) {
        if (seen.has(importer)) continue;
        seen.add(importer);
        next.push(importer);
      }
    }
    const tests = next.filter((file) => TEST.test(file));
    if (tests.length > 0) return tests;
    frontier = next;
  }
  return [];
}

const namedAfter = (test, file) => {
  const stem = path.basename(file).replace(/\.[^.]+$/, '');
  const name = path.basename(test).replace(TEST, '');
  return `-${name}-`.includes(`-${stem}-`);
};

/**
 * The tests in the test folder of that name, or named after it, for the nearest folder of `file`
 * that has any: src/console/screens/grants.tsx → test/console/ and test/hostile/console-*.test.ts.
 */
function namedAfterFolder(tests, file) {
  for (let dir = path.posix.dirname(file); dir !== '.' && dir !== 'src' && dir !== 'test'; dir = path.posix.dirname(dir)) {
    const inFolder = (test) => path.posix.basename(path.posix.dirname(test)) === path.posix.basename(dir);
    const named = tests.filter((test) => inFolder(test) || namedAfter(test, dir));
    if (named.length > 0) return named;
  }
  return [];
}

/** The test files to run for `changed` (paths relative to `root`), and a note for each tier left out. */
export function relatedTests(root, changed) {
  const files = sourceFiles(root);
  const tests = files.filter((file) => TEST.test(file));
  const chosen = new Set(changed.filter((file) => TEST.test(file)));
  const notes = [];
  const byTarget = importers(root, files);
  for (const file of changed) {
    for (const test of tests) if (namedAfter(test, file)) chosen.add(test);
    if (SOURCE.test(file) && !TEST.test(file)) {
      const nearest = nearestTests(byTarget, file);
      if (nearest.length <= NEAREST_MAX) for (const test of nearest) chosen.add(test);
      else {
        for (const test of namedAfterFolder(tests, file)) chosen.add(test);
        notes.push(`left to CI: the ${nearest.length} tests that import ${file} as closely (npx vitest related ${file} --run)`);
      }
    } else if (!SOURCE.test(file)) {
      for (const test of tests) if (fs.readFileSync(path.join(root, test), 'utf8').includes(file)) chosen.add(test);
      if (file.startsWith('src/store/migrations/')) chosen.add('test/store/store.test.ts');
    }
  }
  return { tests: [...chosen].filter((test) => fs.existsSync(path.join(root, test))).sort(), notes };
}

import { spawnSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { routes } from '../../src/rest/routes.js';
import config, { ISOLATED_FILES } from '../../vitest.config.js';
import { DURATIONS_FILE, longestFirst, LongestFirstSequencer, readDurations } from '../helpers/longest-first.js';
import { FUZZ_FILES, fuzzedRoutes, RUNS_PER_ROUTE, TOTAL_CASES } from '../helpers/route-fuzz.js';

/**
 * How the suite runs (CONTRIBUTING.md "Tests"): which files get a worker of their own, and that
 * no test is ever run again to make it pass.
 */
const root = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => fs.readFileSync(path.join(root, file), 'utf8');

function testFiles(dir = 'test'): string[] {
  return fs
    .readdirSync(path.join(root, dir), { withFileTypes: true })
    .flatMap((entry) => (entry.isDirectory() ? testFiles(`${dir}/${entry.name}`) : entry.name.endsWith('.test.ts') ? [`${dir}/${entry.name}`] : []))
    .sort();
}

/** What makes a file leave something behind in its worker, by the rule of CONTRIBUTING.md "Tests". */
const NEEDS_ISOLATION: [string, RegExp][] = [
  // A process that runs beside the tests; a synchronous execFileSync or spawnSync has ended when it returns.
  ['starts a process', /import\s*\{[^}]*\b(?:spawn|exec|execFile|fork)\b(?!Sync)[^}]*\}\s*from 'node:child_process'/],
  ['fake timers', /\bvi\.useFakeTimers\(/],
  ['a process handler', /\bprocess\.(?:on|once|addListener|prependListener)\(/],
  ['a browser', /\bfrom 'playwright(?:-core)?'/],
  ['replaces a global', /\bglobalThis\.\w+\s*=[^=]/],
];

/** The reasons a file needs a worker of its own: its own source, and the test helpers and scripts it imports. */
function isolationReasons(file: string, seen = new Set<string>()): string[] {
  if (seen.has(file)) return [];
  seen.add(file);
  const text = read(file);
  const own = NEEDS_ISOLATION.filter(([, pattern]) => pattern.test(text)).map(([reason]) => `${reason} (${file})`);
  const imported = [...text.matchAll(/\bfrom '(\.{1,2}\/[^']+)'/g)]
    .map((match) => path.posix.join(path.posix.dirname(file), match[1]!))
    .flatMap((spec) => [spec.replace(/\.js$/, '.ts'), spec])
    .filter((dep) => /^(test|scripts)\//.test(dep) && fs.existsSync(path.join(root, dep)));
  return [...own, ...[...new Set(imported)].flatMap((dep) => isolationReasons(dep, seen))];
}

describe('The isolated project', () => {
  it('is every file that starts a process, fakes timers, handles process events, drives a browser or replaces a global, and no other', () => {
    const expected = testFiles().filter((file) => isolationReasons(file).length > 0);
    expect([...ISOLATED_FILES].sort()).toEqual(expected);
  });

  it('runs those files in workers of their own, and every other file in shared ones', () => {
    const projects = config.test!.projects as { test: { name: string; include: string[]; exclude?: string[]; isolate: boolean } }[];
    expect(projects.map(({ test }) => [test.name, test.isolate])).toEqual([
      ['shared', false],
      ['isolated', true],
    ]);
    const [shared, isolated] = projects.map(({ test }) => test);
    expect(shared!.include).toEqual(['test/**/*.test.ts']);
    expect(shared!.exclude).toEqual(ISOLATED_FILES);
    expect(isolated!.include).toEqual(ISOLATED_FILES);
  });
});

describe('The order files start in', () => {
  it('is the longest first across both projects, by the table of durations', () => {
    expect(config.test!.sequence?.sequencer).toBe(LongestFirstSequencer);
    const durations = { 'test/a.test.ts': 3, 'test/b.test.ts': 40, 'test/c.test.ts': 12 };
    const files = ['test/a.test.ts', 'test/new.test.ts', 'test/b.test.ts', 'test/other-new.test.ts', 'test/c.test.ts'];
    // A file the table does not know may be long: it starts before every known one.
    expect(longestFirst(files, (file) => file, durations)).toEqual([
      'test/new.test.ts',
      'test/other-new.test.ts',
      'test/b.test.ts',
      'test/c.test.ts',
      'test/a.test.ts',
    ]);
  });

  it(`reads its table (${DURATIONS_FILE}) as seconds per test file`, () => {
    // A figure of a file since renamed or deleted is never looked up: it costs nothing until
    // npm run test:durations drops it, so a rename need not touch the table.
    const durations = readDurations(root);
    const files = new Set(testFiles());
    expect(Object.keys(durations).filter((file) => files.has(file)).length).toBeGreaterThan(files.size / 2);
    for (const seconds of Object.values(durations)) expect(seconds).toBeGreaterThanOrEqual(0);
  });
});

describe('Waiting for a state', () => {
  it("gives expect.poll as long as a loaded machine needs, not vitest's 1 s default", () => {
    expect(config.test!.expect?.poll?.timeout).toBeGreaterThanOrEqual(10_000);
  });
});

describe('No retries', () => {
  it('are configured, asked for by a test file or passed to vitest by a script', () => {
    expect(config.test!.retry).toBe(0);
    expect(config.test!.setupFiles).toContain('test/helpers/no-retry.ts');
    // This file plants a test that asks for one below.
    for (const file of testFiles().filter((name) => name !== 'test/tooling/test-projects.test.ts'))
      expect(read(file), file).not.toMatch(/\bretry\s*:|\.retry\(/);
    const scripts = Object.values((JSON.parse(read('package.json')) as { scripts: Record<string, string> }).scripts);
    for (const command of [...scripts, read('.ci/run')]) expect(command).not.toMatch(/--retry/);
  });

  describe('a test that asks for one fails before it runs', { timeout: 60_000 }, () => {
    // Inside the repository, so the planted file resolves vitest; .cache/ is ignored by git and by the suite.
    fs.mkdirSync(path.join(root, '.cache'), { recursive: true });
    const dir = fs.mkdtempSync(path.join(root, '.cache', 'no-retry-'));
    fs.writeFileSync(
      path.join(dir, 'vitest.config.mjs'),
      `export default { test: { include: ['*.test.ts'], setupFiles: [${JSON.stringify(path.join(root, 'test/helpers/no-retry.ts'))}] } };\n`,
    );
    fs.writeFileSync(
      path.join(dir, 'planted.test.ts'),
      [
        "import { it } from 'vitest';",
        'let runs = 0;',
        "it('passes on its second run', { retry: 1 }, () => { runs += 1; if (runs === 1) throw new Error('first run'); });",
        "it('passes on its first run', () => {});",
        '',
      ].join('\n'),
    );
    const run = (...args: string[]) =>
      spawnSync(
        process.execPath,
        [path.join(root, 'node_modules/vitest/vitest.mjs'), 'run', '--root', dir, '--config', path.join(dir, 'vitest.config.mjs'), ...args],
        {
          cwd: dir,
          encoding: 'utf8',
          env: { ...process.env, CI: 'true', NO_COLOR: '1' },
        },
      );

    it('by its own options', () => {
      const result = run();
      expect(result.status).toBe(1);
      expect(result.stdout + result.stderr).toContain('"passes on its second run" asks for 1 retries');
      expect(result.stdout).toMatch(/Tests\s+1 failed \| 1 passed/);
    });

    it('from the command line', () => {
      const result = run('--retry=2');
      expect(result.status).toBe(1);
      expect(result.stdout + result.stderr).toContain('"passes on its first run" asks for 2 retries');
      expect(result.stdout).toMatch(/Tests\s+2 failed/);
    });

    afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  });
});

describe('The route fuzz', () => {
  const files = testFiles('test/hostile').filter((file) => /\/fuzz-\d+\.test\.ts$/.test(file));

  it('is dealt across its files, each fuzzing the routes of its own number', () => {
    expect(files).toEqual(Array.from({ length: FUZZ_FILES }, (_, i) => `test/hostile/fuzz-${i + 1}.test.ts`));
    for (const [i, file] of files.entries()) expect(read(file)).toMatch(new RegExp(`^fuzzRoutes\\(${i + 1}\\);$`, 'm'));
  });

  it('fuzzes every route of the table in exactly one file, at least 10,200 cases in all', () => {
    const dealt = files.flatMap((_, i) => fuzzedRoutes(i + 1));
    expect(dealt).toHaveLength(routes.length);
    expect(new Set(dealt)).toEqual(new Set(routes));
    expect(TOTAL_CASES).toBe(10_200);
    expect(RUNS_PER_ROUTE * routes.length).toBeGreaterThanOrEqual(TOTAL_CASES);
  });

  it('gives no file more than its share of the cases', () => {
    for (const [i] of files.entries()) expect(fuzzedRoutes(i + 1).length).toBeLessThanOrEqual(Math.ceil(routes.length / FUZZ_FILES));
  });
});

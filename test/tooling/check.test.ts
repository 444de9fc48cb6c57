import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isolatedGitEnv } from '../helpers/git.js';

/**
 * What `npm run check` (scripts/check.mjs) takes as changed, and which tests it picks for them
 * (scripts/related-tests.mjs), read with `--list` in temporary git repositories.
 */
const script = path.resolve(import.meta.dirname, '../..', 'scripts', 'check.mjs');
const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-check-'));
afterAll(() => fs.rmSync(temp, { recursive: true, force: true }));

const env = isolatedGitEnv(temp);

let repos = 0;
function repo(files: Record<string, string>) {
  const dir = path.join(temp, `repo-${++repos}`);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, env, encoding: 'utf8' }).trim();
  const write = (file: string, text: string) => {
    fs.mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    fs.writeFileSync(path.join(dir, file), text);
  };
  fs.mkdirSync(dir);
  git('init', '-q', '-b', 'main');
  for (const [file, text] of Object.entries(files)) write(file, text);
  git('add', '-A');
  git('commit', '-q', '-m', 'Start');
  /** The changed files and the tests, as `--list` prints them. */
  const list = () => {
    const out = execFileSync(process.execPath, [script, '--list'], { cwd: dir, env, encoding: 'utf8' });
    const lines = out.split('\n').filter(Boolean);
    return {
      changed: lines.filter((l) => l.startsWith('changed ')).map((l) => l.slice(8)),
      tests: lines.filter((l) => l.startsWith('test ')).map((l) => l.slice(5)),
    };
  };
  return { dir, git, write, list };
}

describe('changed files on a branch: everything since the merge base with main', () => {
  it('counts committed, staged, unstaged and untracked changes, not deleted files nor what main changed after the fork', () => {
    const r = repo({ 'a.md': 'a\n', 'b.md': 'b\n', 'c.md': 'c\n', 'gone.md': 'gone\n', 'main-only.md': '1\n' });
    r.git('switch', '-q', '-c', 'feature');
    r.write('a.md', 'a, committed on the branch\n');
    r.git('rm', '-q', 'gone.md');
    r.git('commit', '-q', '-am', 'Branch work');
    r.git('switch', '-q', 'main');
    r.write('main-only.md', '2\n');
    r.git('commit', '-q', '-am', 'Main moves on');
    r.git('switch', '-q', 'feature');
    r.write('b.md', 'b, staged\n');
    r.git('add', 'b.md');
    r.write('c.md', 'c, unstaged\n');
    r.write('new.md', 'untracked\n');
    expect(r.list().changed).toEqual(['a.md', 'b.md', 'c.md', 'new.md']);
  });
});

describe('changed files on main: only what is not committed', () => {
  it('counts staged, unstaged and untracked changes, not the last commit', () => {
    const r = repo({ 'a.md': 'a\n', 'b.md': 'b\n', 'c.md': 'c\n' });
    r.write('a.md', 'a, committed\n');
    r.git('commit', '-q', '-am', 'On main');
    r.write('b.md', 'b, staged\n');
    r.git('add', 'b.md');
    r.write('c.md', 'c, unstaged\n');
    r.write('d.md', 'untracked\n');
    expect(r.list().changed).toEqual(['b.md', 'c.md', 'd.md']);
  });
});

describe('the tests of the changed areas', () => {
  const tree = {
    'src/domain/grants.ts': 'export const grant = 1;\n',
    'src/domain/account.ts': 'export const account = 1;\n',
    'src/domain/registry.ts': "import { grant } from './grants.js';\nimport { account } from './account.js';\nexport const all = [grant, account];\n",
    'src/console/screens/devices.tsx': "import { all } from '../../domain/registry.js';\nexport const page = all;\n",
    'test/helpers/server.ts': "import { page } from '../../src/console/screens/devices.js';\nexport const start = page;\n",
    'test/registry.test.ts': "import { all } from '../src/domain/registry.js';\nexport const t = all;\n",
    'test/grants.test.ts': "import { start } from './helpers/server.js';\nexport const t = start;\n",
    'test/stale-grants.test.ts': "import { start } from './helpers/server.js';\nexport const t = start;\n",
    'test/console-pages.test.ts': "import { start } from './helpers/server.js';\nexport const t = start;\n",
    'test/readme.test.ts': "const readme = 'README.md';\nexport const t = readme;\n",
    'test/store/store.test.ts': 'export const t = 1;\n',
    'README.md': '# Readme\n',
  };
  // Twelve more tests behind the server helper, so that its importers are more than check runs.
  const many = Object.fromEntries(
    Array.from({ length: 12 }, (_, i) => [`test/area-${i}.test.ts`, "import { start } from './helpers/server.js';\nexport const t = start;\n"]),
  );

  it('runs the tests named after a changed file and the tests nearest it in the import graph', () => {
    const r = repo({ ...tree, ...many });
    r.write('src/domain/grants.ts', 'export const grant = 2;\n');
    expect(r.list().tests).toEqual(['test/grants.test.ts', 'test/registry.test.ts', 'test/stale-grants.test.ts']);
  });

  it('runs a changed test, the tests that name a changed doc, and the store tests for a migration', () => {
    const r = repo({ ...tree, ...many });
    r.write('test/area-3.test.ts', 'export const t = 3;\n');
    r.write('README.md', '# Readme, changed\n');
    r.write('src/store/migrations/0099_new.sql', 'SELECT 1;\n');
    expect(r.list().tests).toEqual(['test/area-3.test.ts', 'test/readme.test.ts', 'test/store/store.test.ts']);
  });

  it('leaves a file most tests reach to CI and runs the tests named after its folder instead', () => {
    const r = repo({ ...tree, ...many });
    r.write('src/console/screens/devices.tsx', "import { all } from '../../domain/registry.js';\nexport const page = [all];\n");
    expect(r.list().tests).toEqual(['test/console-pages.test.ts']);
  });

  it('runs the tests in the test folder of that name as well', () => {
    const r = repo({ ...tree, ...many, 'test/console/inbox.test.ts': "import { start } from '../helpers/server.js';\nexport const t = start;\n" });
    r.write('src/console/screens/devices.tsx', "import { all } from '../../domain/registry.js';\nexport const page = [all];\n");
    expect(r.list().tests).toEqual(['test/console-pages.test.ts', 'test/console/inbox.test.ts']);
  });
});

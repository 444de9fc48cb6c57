import { execFileSync, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isolatedGitEnv } from '../helpers/git.js';

/**
 * scripts/check-commits.mjs (`npm run check:commits`, run by `npm run check` and CI) and the
 * commit-msg hook scripts/install-hooks.mjs installs (`npm run hooks`), run for real against
 * temporary git repositories.
 */
const script = path.resolve(import.meta.dirname, '../..', 'scripts', 'check-commits.mjs');
const installer = path.resolve(import.meta.dirname, '../..', 'scripts', 'install-hooks.mjs');
const temp = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-check-commits-'));
afterAll(() => fs.rmSync(temp, { recursive: true, force: true }));

const env = isolatedGitEnv(temp);

let repos = 0;
function repo(): { dir: string; git: (...args: string[]) => string; commit: (subject: string) => string } {
  const dir = path.join(temp, `repo-${++repos}`);
  fs.mkdirSync(dir);
  const git = (...args: string[]) => execFileSync('git', args, { cwd: dir, env, encoding: 'utf8' }).trim();
  git('init', '-q', '-b', 'main');
  const commit = (subject: string) => {
    git('commit', '-q', '--allow-empty', '-m', subject);
    return git('rev-parse', '--short', 'HEAD');
  };
  return { dir, git, commit };
}

function check(dir: string, ...args: string[]): { status: number | null; out: string } {
  const result = spawnSync(process.execPath, [script, ...args], { cwd: dir, env, encoding: 'utf8' });
  return { status: result.status, out: result.stdout + result.stderr };
}

const long = (n: number, word = 'Subject') => `${word} ${'x'.repeat(n - word.length - 1)}`;

describe('commit subjects after the base are at most 72 characters', () => {
  it('passes when each is 72 characters or fewer, counting characters, not bytes', () => {
    const { dir, commit } = repo();
    const base = commit(long(100));
    commit(long(72));
    commit(`Journal → owner stream: ${'é'.repeat(72 - 24)}`);
    const { status, out } = check(dir, '--base', base);
    expect(status).toBe(0);
    expect(out).toContain(`2 checked after ${base}`);
  });

  it('fails listing every subject over 72 characters, with its hash and length; the base and older are not checked', () => {
    const { dir, commit } = repo();
    commit(long(120, 'Older'));
    const base = commit(long(90, 'Base'));
    const first = commit(long(73));
    commit('Short and fine');
    const second = commit(long(200));
    const { status, out } = check(dir, '--base', base);
    expect(status).toBe(1);
    expect(out).toContain('2 of 3 commit subjects');
    expect(out).toContain(`${first} (73) ${long(73)}`);
    expect(out).toContain(`${second} (200) ${long(200)}`);
    expect(out).not.toMatch(/Older|Base/);
  });
});

describe('a clone without the base in its history (shallow CI clones)', () => {
  it('checks every commit it has and says the base is missing', () => {
    const origin = repo();
    origin.commit(long(120));
    for (let i = 0; i < 3; i++) origin.commit(`Step ${i}`);
    const shallow = path.join(temp, 'shallow');
    execFileSync('git', ['clone', '-q', '--depth', '2', `file://${origin.dir}`, shallow], { env });
    // Without --base the script uses the project's rule base, which this history does not hold.
    const passing = check(shallow);
    expect(passing.status).toBe(0);
    expect(passing.out).toMatch(/2 checked in this shallow clone \(base \w+ is not in its history\)/);

    const failing = check(origin.dir);
    expect(failing.status).toBe(1);
    expect(failing.out).toContain('1 of 4 commit subjects in this clone (base');
  });
});

describe('one message about to be committed (--message-file, the commit-msg hook)', () => {
  const message = (text: string) => {
    const file = path.join(temp, `message-${++repos}`);
    fs.writeFileSync(file, text);
    return file;
  };

  it('accepts a 72-character subject with a long body, and ignores comment lines', () => {
    const file = message(`# Please enter the commit message\n${long(72)}\n\n${'A body line may be long. '.repeat(10)}\n`);
    expect(check(temp, '--message-file', file).status).toBe(0);
  });

  it('refuses a 73-character subject and says how long it is', () => {
    const { status, out } = check(temp, '--message-file', message(`${long(73)}\r\n\r\nbody\r\n`));
    expect(status).toBe(1);
    expect(out).toContain('commit subject is 73 characters; at most 72');
  });
});

describe('npm run hooks', () => {
  it('installs a commit-msg hook that refuses a long subject and lets a short one through', () => {
    const { dir, git } = repo();
    execFileSync(process.execPath, [installer], { cwd: dir, env });
    // The hook runs scripts/check-commits.mjs from the repository it is in.
    fs.mkdirSync(path.join(dir, 'scripts'));
    fs.copyFileSync(script, path.join(dir, 'scripts', 'check-commits.mjs'));
    expect(() => git('commit', '-q', '--allow-empty', '-m', long(80))).toThrow(/80 characters/);
    git('commit', '-q', '--allow-empty', '-m', 'A short subject');
    expect(git('log', '--format=%s')).toBe('A short subject');
  });

  it('never replaces a commit-msg hook it did not write', () => {
    const { dir } = repo();
    const hook = path.join(dir, '.git', 'hooks', 'commit-msg');
    fs.mkdirSync(path.dirname(hook), { recursive: true });
    fs.writeFileSync(hook, '#!/bin/sh\nexit 0\n', { mode: 0o755 });
    const result = spawnSync(process.execPath, [installer], { cwd: dir, env, encoding: 'utf8' });
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('was not written by npm run hooks');
    expect(fs.readFileSync(hook, 'utf8')).toBe('#!/bin/sh\nexit 0\n');
  });
});

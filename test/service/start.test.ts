import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * `npm start` (scripts/start.mjs) on a copy of the project: it builds when there is no build
 * or an input of the build changed, and otherwise starts dist/main.js as it is.
 */

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const BUILDING = /npm start: .*building/;

let copy: string;

/** The build's inputs and the start script, with node_modules linked entry by entry so @dfc/device is this copy's SDK. */
function copyProject(): string {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-start-'));
  for (const entry of [
    'src',
    'vendor',
    'scripts/start.mjs',
    'scripts/build-if-changed.mjs',
    'package.json',
    'package-lock.json',
    'packages/device-sdk/src',
    'packages/device-sdk/package.json',
  ]) {
    fs.cpSync(path.join(ROOT, entry), path.join(dir, entry), { recursive: true });
  }
  for (const name of fs.readdirSync(ROOT).filter((n) => /^tsconfig.*\.json$/.test(n))) fs.copyFileSync(path.join(ROOT, name), path.join(dir, name));
  fs.copyFileSync(path.join(ROOT, 'packages/device-sdk/tsconfig.json'), path.join(dir, 'packages/device-sdk/tsconfig.json'));
  fs.mkdirSync(path.join(dir, 'node_modules/@dfc'), { recursive: true });
  fs.symlinkSync('../../packages/device-sdk', path.join(dir, 'node_modules/@dfc/device'));
  for (const name of fs.readdirSync(path.join(ROOT, 'node_modules')).filter((n) => n !== '@dfc')) {
    fs.symlinkSync(path.join(ROOT, 'node_modules', name), path.join(dir, 'node_modules', name));
  }
  return dir;
}

/** Runs the start script until the service logs that it listens, then stops it; resolves with its output. */
function start(): Promise<string> {
  const child = spawn(process.execPath, ['scripts/start.mjs'], {
    cwd: copy,
    env: { ...process.env, HOST: '127.0.0.1', PORT: '0', LOG_LEVEL: 'info', DATABASE_URL: `file:${path.join(copy, 'service.db')}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  return new Promise((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      output += String(chunk);
      if (output.includes('"msg":"listening"')) child.kill('SIGTERM');
    };
    child.stdout.on('data', onData);
    child.stderr.on('data', onData);
    child.on('exit', () =>
      output.includes('"msg":"listening"') ? resolve(output) : reject(new Error(`start script exited before listening:\n${output.slice(-2000)}`)),
    );
  });
}

const mtime = (file: string): number => fs.statSync(path.join(copy, file)).mtimeMs;

beforeAll(() => {
  copy = copyProject();
});

afterAll(() => {
  if (copy) fs.rmSync(copy, { recursive: true, force: true });
});

describe('npm start builds only when an input of the build changed', () => {
  it('builds a tree that has no build yet, then starts it', { timeout: 240_000 }, async () => {
    expect(await start()).toMatch(BUILDING);
    expect(fs.existsSync(path.join(copy, 'dist/main.js'))).toBe(true);
  });

  it('starts an untouched tree without building', { timeout: 60_000 }, async () => {
    const before = { service: mtime('dist/main.js'), sdk: mtime('packages/device-sdk/dist/index.js') };
    expect(await start()).not.toMatch(BUILDING);
    expect({ service: mtime('dist/main.js'), sdk: mtime('packages/device-sdk/dist/index.js') }).toEqual(before);
  });

  it('rebuilds after a source file changed, and runs the new build', { timeout: 240_000 }, async () => {
    fs.appendFileSync(path.join(copy, 'src/main.ts'), '\n// changed after the first build\n');
    expect(await start()).toMatch(BUILDING);
    expect(fs.readFileSync(path.join(copy, 'dist/main.js'), 'utf8')).toContain('// changed after the first build');
  });

  it('rebuilds after a tsconfig changed, without a source change', { timeout: 240_000 }, async () => {
    fs.appendFileSync(path.join(copy, 'tsconfig.build.json'), '\n');
    expect(await start()).toMatch(BUILDING);
    expect(await start()).not.toMatch(BUILDING);
  });
});

import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

/**
 * The Python device SDK (packages/device-sdk-python, `dfc-device`) as real child processes:
 * its pytest suite against the live service (the shared scenario table included), mypy
 * --strict, and the wheel and sdist a device maker installs, each into a fresh venv outside
 * the repository, where the thermostat example runs. Debian's python3 with python3-venv,
 * python3-websockets, python3-pytest, python3-pytest-asyncio, python3-build,
 * python3-hatchling and python3-mypy (`npm run setup:test` installs them); DFC_PYTHON names
 * another interpreter.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const PACKAGE = path.join(ROOT, 'packages/device-sdk-python');
const PYTHON = process.env.DFC_PYTHON ?? '/usr/bin/python3';

interface Run {
  code: number | null;
  output: string;
}

/**
 * Runs a command to its end; resolves with its exit code and everything it printed. A run past
 * its test's timeout is killed (the service a pytest run started dies with it).
 */
function run(command: string, args: string[], options: { cwd: string; env?: Record<string, string> }): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      // No bytecode caches written into the repository; the service the tests start runs on this Node.
      env: { ...process.env, PYTHONDONTWRITEBYTECODE: '1', DFC_NODE: process.execPath, ...options.env },
      stdio: ['ignore', 'pipe', 'pipe'],
      timeout: 110_000,
    });
    let output = '';
    child.stdout.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.stderr.on('data', (chunk: Buffer) => (output += String(chunk)));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, output }));
  });
}

let dir: string;

beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-device-python-'));
});

afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

describe('The Python device SDK (dfc-device)', () => {
  it('passes its pytest suite against the live service, the shared scenario table included', { timeout: 120_000 }, async () => {
    const pytest = await run(PYTHON, ['-m', 'pytest', '-q'], { cwd: PACKAGE });
    expect(pytest.code, pytest.output).toBe(0);
    expect(pytest.output).toMatch(/\d+ passed/);
  });

  it('type-checks under mypy --strict, the example included', { timeout: 60_000 }, async () => {
    const mypy = await run(PYTHON, ['-m', 'mypy', '--strict', '--cache-dir', path.join(dir, 'mypy-cache'), 'src', 'examples'], { cwd: PACKAGE });
    expect(mypy.code, mypy.output).toBe(0);
  });

  it('builds a wheel and an sdist that each install into a fresh venv outside the repository, where the example runs', { timeout: 120_000 }, async () => {
    const dist = path.join(dir, 'dist');
    // --no-isolation: the build backend is Debian's hatchling, not one fetched from PyPI.
    const build = await run(PYTHON, ['-m', 'build', '--no-isolation', '--skip-dependency-check', '--outdir', dist, PACKAGE], { cwd: dir });
    expect(build.code, build.output).toBe(0);
    const wheel = path.join(dist, 'dfc_device-0.1.0-py3-none-any.whl');
    const sdist = path.join(dist, 'dfc_device-0.1.0.tar.gz');

    const listing = await run(
      PYTHON,
      [
        '-c',
        'import json, sys, zipfile; w = zipfile.ZipFile(sys.argv[1]); ' +
          'meta = w.read("dfc_device-0.1.0.dist-info/METADATA").decode(); ' +
          'print(json.dumps({"files": w.namelist(), "requires": [l for l in meta.splitlines() if l.startswith(("Requires-Dist", "Requires-Python"))]}))',
        wheel,
      ],
      { cwd: dir },
    );
    expect(listing.code, listing.output).toBe(0);
    const { files, requires } = JSON.parse(listing.output) as { files: string[]; requires: string[] };
    expect(files).toEqual(expect.arrayContaining(['dfc_device/__init__.py', 'dfc_device/device.py', 'dfc_device/wake.py', 'dfc_device/py.typed']));
    expect(files.filter((f) => !/^dfc_device(-0\.1\.0\.dist-info)?\/[a-z_]+(\.py|\.typed)?$|^dfc_device-0\.1\.0\.dist-info\/[A-Z]+$/.test(f))).toEqual([]);
    expect(requires.sort()).toEqual(['Requires-Dist: websockets>=10.4', 'Requires-Python: >=3.10']);

    // Fresh venvs that see Debian's websockets; pip installs from the files only, never an index.
    for (const [name, file, extra] of [
      ['wheel-venv', wheel, []],
      ['sdist-venv', sdist, ['--no-build-isolation']],
    ] as const) {
      const venv = path.join(dir, name);
      const made = await run(PYTHON, ['-m', 'venv', '--system-site-packages', '--without-pip', venv], { cwd: dir });
      expect(made.code, made.output).toBe(0);
      const installed = await run(path.join(venv, 'bin/python'), ['-m', 'pip', 'install', '--no-index', '--quiet', ...extra, file], { cwd: dir });
      expect(installed.code, installed.output).toBe(0);
      const imported = await run(path.join(venv, 'bin/python'), ['-c', 'import dfc_device; print(dfc_device.__file__)'], { cwd: dir });
      expect(imported.output.trim()).toBe(path.join(venv, 'lib', fs.readdirSync(path.join(venv, 'lib'))[0]!, 'site-packages/dfc_device/__init__.py'));
    }

    // The example as the sdist ships it, in a folder of its own, run by the wheel's venv.
    const unpacked = await run('tar', ['xzf', sdist, '-C', dir], { cwd: dir });
    expect(unpacked.code, unpacked.output).toBe(0);
    const project = path.join(dir, 'thermostat');
    fs.mkdirSync(project);
    fs.copyFileSync(path.join(dir, 'dfc_device-0.1.0/examples/thermostat.py'), path.join(project, 'thermostat.py'));
    const example = await run(PYTHON, ['-m', 'pytest', '-q', 'tests/test_example.py'], {
      cwd: PACKAGE,
      env: { DFC_EXAMPLE_PYTHON: path.join(dir, 'wheel-venv/bin/python'), DFC_EXAMPLE_DIR: project },
    });
    expect(example.code, example.output).toBe(0);
  });
});

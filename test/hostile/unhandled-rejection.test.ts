import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { expect, it } from 'vitest';
import { SERVICE_MAIN } from '../helpers/entry-point.js';
import { useTestServer } from '../helpers/server.js';

/**
 * The last line of defence src/main.ts installs for unhandled rejections: it must be loud
 * (an error log line with the stack, a metric) and the service must keep serving.
 */

const METRICS_TOKEN = 'metrics-secret-for-unhandled-rejections-0123';

const server = useTestServer({ env: { METRICS_TOKEN } });

async function unhandledCount(): Promise<number> {
  const res = await fetch(`${server.url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
  return Number(/^dfc_unhandled_rejections_total (\d+)$/m.exec(await res.text())![1]);
}

it('logs an unhandled rejection with its stack at error level, counts it, and keeps serving', async () => {
  expect(await unhandledCount()).toBe(0);
  server.service.reportUnhandledRejection(new Error('planted bug'));
  server.service.reportUnhandledRejection('a bare string');
  expect(await unhandledCount()).toBe(2);
  const lines = server.logs.map((line) => JSON.parse(line)).filter((line) => line.msg === 'unhandled rejection');
  expect(lines).toEqual([
    expect.objectContaining({ level: 'error', error: expect.stringMatching(/^Error: planted bug\n\s+at /) }),
    expect.objectContaining({ level: 'error', error: 'a bare string' }),
  ]);
  expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
});

/**
 * An uncaught exception still ends the process (docs/operators/security.md "Hostile input, isolation and
 * faults"), but not silently: the real entry point, in its own process, writes one error
 * line with the stack to its JSON log, after every line buffered before it, and exits 1. The
 * planted bug is a SIGUSR2 handler that throws, preloaded into the service's process.
 */
it('logs an uncaught exception at error level on stdout, after the lines before it, and exits 1', { timeout: 60_000 }, async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-uncaught-'));
  const plant = path.join(dir, 'plant.mjs');
  fs.writeFileSync(plant, "process.on('SIGUSR2', () => { throw new Error('planted crash'); });\n");
  const child = spawn(process.execPath, ['--import', pathToFileURL(plant).href, SERVICE_MAIN], {
    cwd: path.resolve(import.meta.dirname, '../..'),
    env: { PATH: process.env.PATH ?? '', HOST: '127.0.0.1', PORT: '0', DATABASE_URL: `file:${path.join(dir, 'service.db')}` },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const url = new Promise<string>((resolve) =>
    child.stdout.on('data', (chunk: Buffer) => {
      stdout += String(chunk);
      const listening = /"msg":"listening","url":"([^"]+)"/.exec(stdout);
      if (listening) resolve(listening[1]!);
    }),
  );
  const base = await url;
  for (let i = 0; i < 50; i++) expect((await fetch(`${base}/healthz`)).status).toBe(200);
  child.kill('SIGUSR2');
  expect(await exited).toBe(1);
  fs.rmSync(dir, { recursive: true, force: true });

  const lines = stdout
    .trimEnd()
    .split('\n')
    .map((line) => JSON.parse(line) as Record<string, unknown>);
  expect(lines.filter((line) => line.msg === 'request')).toHaveLength(50);
  expect(lines.at(-1)).toEqual(
    expect.objectContaining({ level: 'error', msg: 'uncaught exception', error: expect.stringMatching(/^Error: planted crash\n\s+at /) }),
  );
});

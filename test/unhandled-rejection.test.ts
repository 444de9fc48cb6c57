import { afterAll, beforeAll, expect, it } from 'vitest';
import { startTestServer, type TestServer } from './helpers/server.js';

/**
 * The last line of defence src/main.ts installs for unhandled rejections: it must be loud
 * (an error log line with the stack, a metric) and the service must keep serving.
 */

const METRICS_TOKEN = 'metrics-secret-for-unhandled-rejections-0123';
let server: TestServer;

beforeAll(async () => {
  server = await startTestServer({ env: { METRICS_TOKEN } });
});
afterAll(() => server.close());

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

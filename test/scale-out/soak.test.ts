import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The short run of `npm run soak` (docs/operators/soak.md): three instances of the service on one sqld
 * and one Redis, agents over REST and MCP, devices on sockets and polling, webhooks to
 * receivers that sometimes fail or hang, while an instance is SIGKILLed and restarted and
 * Redis and sqld are restarted. The script's own checks decide; this holds it to them and
 * to the breakage it promises: sixty seconds of load, about two minutes of wall time.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const TIMEOUT_MS = 300_000;

function runSoak(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // Stopped (SIGTERM: it cleans up after itself) if it outlives the test.
  const child = spawn(process.execPath, ['--import', 'tsx', 'scripts/soak.ts', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    signal: AbortSignal.timeout(TIMEOUT_MS - 10_000),
    killSignal: 'SIGTERM',
  });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (chunk: Buffer) => (stdout += String(chunk)));
  child.stderr.on('data', (chunk: Buffer) => (stderr += String(chunk)));
  child.on('error', () => undefined); // the abort above; its exit follows
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, stdout, stderr })));
}

describe('npm run soak: three instances on one sqld and one Redis, under load and breakage', () => {
  it(
    "ends every acknowledged action once, hands none out twice, delivers every webhook event and keeps each instance's memory bounded",
    async () => {
      const out = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-soak-test-')), 'report.json');
      const run = await runSoak(['--duration', '60s', '--ttl', '5', '--json', out]);
      const report = JSON.parse(fs.readFileSync(out, 'utf8'));
      expect({ code: run.code, checks: report.checks }, run.stderr).toMatchObject({
        code: 0,
        checks: {
          everyAcknowledgedActionTerminal: { ok: true },
          noActionWithTwoTerminalStates: { ok: true },
          noActionHandedOutTwice: { ok: true },
          everyWebhookEventDelivered: { ok: true },
          ownerStreamNeverReset: { ok: true },
          rssBounded: { ok: true },
        },
      });
      expect(report.ok).toBe(true);
      expect(new Set(report.chaos.map((c: { what: string }) => c.what.replace(/-\d+$/, '')))).toEqual(
        new Set(['kill-instance', 'restart-redis', 'restart-sqld']),
      );
      expect(report.actions.viaRest).toBeGreaterThan(0);
      expect(report.actions.viaMcp).toBeGreaterThan(0);
      expect(report.rss.length).toBeGreaterThan(3);
      for (const webhook of report.webhooks) expect(webhook.owed).toBeGreaterThan(0);
    },
    TIMEOUT_MS,
  );
});

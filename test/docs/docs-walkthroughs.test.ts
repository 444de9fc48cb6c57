import { execFile } from 'node:child_process';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startChildService, type ChildService } from '../helpers/child-service.js';

/**
 * Every walk-through in the docs (a ```sh block marked `<!-- walkthrough: name -->`) runs with
 * bash against a fresh server, twice in a row, every step succeeding both times: what a reader
 * pastes works, and works again when pasted again.
 */
const run = promisify(execFile);
const root = path.resolve(import.meta.dirname, '../..');

interface Walkthrough {
  page: string;
  name: string;
  script: string;
}

const pages = execFileSync('git', ['ls-files', '--cached', '--others', '--exclude-standard', 'README.md', 'docs', 'packages/*/README.md'], {
  cwd: root,
  encoding: 'utf8',
})
  .split('\n')
  .filter((file) => file.endsWith('.md') && fs.existsSync(path.join(root, file)));

const walkthroughs: Walkthrough[] = pages.flatMap((page) =>
  [...fs.readFileSync(path.join(root, page), 'utf8').matchAll(/<!-- walkthrough: ([a-z0-9-]+) -->\n+```sh\n([\s\S]*?)\n```\n/g)].map((m) => ({
    page,
    name: m[1]!,
    script: m[2]!,
  })),
);

describe('walk-throughs in the docs', () => {
  it('are marked where the docs have them', () => {
    expect(walkthroughs.map((w) => `${w.page}: ${w.name}`)).toEqual(
      expect.arrayContaining(['docs/getting-started.md: attach-grant-revoke', 'docs/agents/actions.md: grant-action-result']),
    );
  });

  describe.each(walkthroughs.map((w) => [`${w.page}: ${w.name}`, w] as const))('%s', (_label, walkthrough) => {
    let dir: string;
    let service: ChildService;

    beforeAll(async () => {
      dir = fs.mkdtempSync(path.join(os.tmpdir(), 'dfc-walkthrough-'));
      service = await startChildService({ PORT: '0', DATABASE_URL: `file:${dir}/service.db` });
    }, 60_000);

    afterAll(async () => {
      service?.process.kill('SIGTERM');
      await service?.exited;
      fs.rmSync(dir, { recursive: true, force: true });
    });

    /** The block as pasted, with bash stopping at the first step that fails. */
    async function paste(): Promise<string> {
      const { stdout } = await run('bash', ['-c', `set -euo pipefail\n${walkthrough.script}`], {
        cwd: root,
        env: { ...process.env, BASE: service.url, DATABASE_URL: `file:${dir}/service.db` },
        maxBuffer: 16 * 1024 * 1024,
      });
      return stdout;
    }

    it('runs against a fresh server, every step succeeding', { timeout: 120_000 }, async () => {
      expect(await paste()).not.toBe('');
    });

    it('runs again when pasted a second time', { timeout: 120_000 }, async () => {
      const output = await paste();
      expect(output).not.toContain('idempotency_key_reused');
      expect(output).not.toMatch(/^null$/m);
    });
  });
});

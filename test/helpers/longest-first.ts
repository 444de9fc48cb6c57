import fs from 'node:fs';
import path from 'node:path';
import type { TestSequencer, TestSpecification, Vitest } from 'vitest/node';

/**
 * The order the run starts its files in (vitest.config.ts `sequence.sequencer`): the longest
 * first, whichever project holds them, by the seconds test/durations.json records for each
 * file on Node 24. With two workers a run lasts at least as long as its longest file, and a
 * long file started last ends after every other: started first, the short ones fill in
 * beside it. vitest's own order runs one project after the other and, without the results of
 * an earlier run on the machine (a fresh clone in CI has none), the larger files first.
 *
 * A file the table does not know yet runs first, as vitest runs an unknown file first: it may
 * be long. `npm run test:durations` writes the table from a run's JSON report; the order is
 * the only thing it decides, so a stale figure makes a run slower, never wrong.
 */
export const DURATIONS_FILE = 'test/durations.json';

/** Seconds per test file, relative to the repository root. */
export function readDurations(root: string): Record<string, number> {
  const file = path.join(root, DURATIONS_FILE);
  return fs.existsSync(file) ? (JSON.parse(fs.readFileSync(file, 'utf8')) as Record<string, number>) : {};
}

/** `files` (paths relative to the root) longest first; unknown ones before every known one, in the order given. */
export function longestFirst<T>(files: readonly T[], name: (file: T) => string, durations: Record<string, number>): T[] {
  const seconds = (file: T) => durations[name(file)] ?? Number.POSITIVE_INFINITY;
  // Array.prototype.sort is stable: files of equal duration (the unknown ones) keep their order.
  return [...files].sort((a, b) => {
    const [sa, sb] = [seconds(a), seconds(b)];
    return sa === sb ? 0 : sb > sa ? 1 : -1;
  });
}

/**
 * vitest's sequencer interface, written out rather than extending its `BaseSequencer`, so that
 * the config (which test/tooling/test-projects.test.ts imports) loads no vitest internals in a
 * test worker; sharding is vitest's own.
 */
export class LongestFirstSequencer implements TestSequencer {
  constructor(private readonly ctx: Vitest) {}

  async shard(files: TestSpecification[]): Promise<TestSpecification[]> {
    const { BaseSequencer } = await import('vitest/node');
    return new BaseSequencer(this.ctx).shard(files);
  }

  sort(files: TestSpecification[]): TestSpecification[] {
    const root = this.ctx.config.root;
    const name = (spec: TestSpecification) => path.relative(root, spec.moduleId).split(path.sep).join('/');
    // Unknown files in the order of their paths, so that two runs start them alike.
    const byPath = [...files].sort((a, b) => (name(a) < name(b) ? -1 : name(a) > name(b) ? 1 : 0));
    return longestFirst(byPath, name, readDurations(root));
  }
}

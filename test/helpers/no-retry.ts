import { beforeEach } from 'vitest';

/**
 * Every file's setup (vitest.config.ts): a test that fails is a fault to explain and fix, never
 * one to run again until it passes, so a retry from the command line (`--retry`), a config or a
 * test's own options fails the test before it runs.
 */
beforeEach(({ task }) => {
  const retry = typeof task.retry === 'object' ? (task.retry.count ?? 0) : (task.retry ?? 0);
  if (retry !== 0) throw new Error(`"${task.name}" asks for ${String(retry)} retries: the suite runs each test once (CONTRIBUTING.md "Tests")`);
});

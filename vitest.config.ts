import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';
import { LongestFirstSequencer } from './test/helpers/longest-first.js';

/**
 * The test files that run in a worker of their own (CONTRIBUTING.md "Tests"): each starts a
 * process that runs beside its tests, installs fake timers or a process handler, drives a
 * browser or replaces a global, directly or through a helper it imports.
 * test/tooling/test-projects.test.ts scans every file and fails when this list and the rule part.
 * Every other file shares its worker's module cache with the files before it (`isolate: false`),
 * which saves each file the ~2 s of CPU a fresh worker spends importing the service.
 */
export const ISOLATED_FILES = [
  'test/console/console-activity-browser.test.ts',
  'test/console/console-approvals-browser.test.ts',
  'test/console/console-browser.test.ts',
  'test/console/console-conditions-browser.test.ts',
  'test/console/console-device-browser.test.ts',
  'test/console/console-gateway-browser.test.ts',
  'test/console/console-inbox.test.ts',
  'test/console/console-agent-configs-browser.test.ts',
  'test/console/console-rename-browser.test.ts',
  'test/console/console-screens.test.ts',
  'test/console/first-contact.test.ts',
  'test/console/inspector-ui.test.ts',
  'test/console/sign-in-code.test.ts',
  'test/devices/device-micropython.test.ts',
  'test/devices/device-package.test.ts',
  'test/devices/device-sdk-python.test.ts',
  'test/devices/device-sdk.test.ts',
  'test/docs/docs-agent-clients.test.ts',
  'test/docs/docs-browser.test.ts',
  'test/docs/docs-walkthroughs.test.ts',
  'test/events/event-ids.test.ts',
  'test/events/journal-ids.test.ts',
  'test/events/webhooks.test.ts',
  'test/hostile/action-request-hostile.test.ts',
  'test/hostile/crash-safety.test.ts',
  'test/hostile/database-locked.test.ts',
  'test/hostile/database-outage.test.ts',
  'test/hostile/graceful-shutdown.test.ts',
  'test/hostile/identity-provider.test.ts',
  'test/hostile/logs.test.ts',
  'test/hostile/scale-out-hostile.test.ts',
  'test/hostile/startup-errors.test.ts',
  'test/hostile/unhandled-rejection.test.ts',
  'test/hostile/webhook-fairness.test.ts',
  'test/mcp/mcp-apps-browser.test.ts',
  'test/mcp/mcp-conformance.test.ts',
  'test/oauth/dev-identity.test.ts',
  'test/oauth/oauth-client-credentials.test.ts',
  'test/oauth/oauth-conformance.test.ts',
  'test/oauth/oauth-consent-browser.test.ts',
  'test/oauth/oauth-consent-grants-browser.test.ts',
  'test/rest/openapi-client.test.ts',
  'test/rest/storage-budgets.test.ts',
  'test/scale-out/grant-budget-instances.test.ts',
  'test/scale-out/mcp-sessions-scale-out.test.ts',
  'test/scale-out/mcp-tasks-scale-out.test.ts',
  'test/scale-out/remote-driver.test.ts',
  'test/scale-out/remote-group-commit.test.ts',
  'test/scale-out/remote-read-groups.test.ts',
  'test/scale-out/remote-streams.test.ts',
  'test/scale-out/remote-writer-stats.test.ts',
  'test/scale-out/scale-out-bus.test.ts',
  'test/scale-out/scheduled-actions-instances.test.ts',
  'test/scale-out/shared-database.test.ts',
  'test/scale-out/state-scale-out.test.ts',
  'test/scale-out/soak.test.ts',
  'test/service/start.test.ts',
  'test/store/backup.test.ts',
  'test/store/write-lock.test.ts',
];

export default defineConfig({
  // The device SDK's source, as tsconfig.json's `paths` maps it: tests need no build of packages/device-sdk.
  resolve: { alias: { '@dfc/device': fileURLToPath(new URL('./packages/device-sdk/src/index.ts', import.meta.url)) } },
  test: {
    // Each test file starts its own server on a loopback port with its own temp database,
    // so files can run in parallel. Three workers on CI's two cores: many files spend their time
    // waiting on a service process, a browser or a socket, and with two workers the cores sat
    // half idle (CONTRIBUTING.md "Tests").
    pool: 'forks',
    maxWorkers: 3,
    testTimeout: 20_000,
    hookTimeout: 20_000,
    // `expect.poll` waits for a state, and its bound only decides how soon a state that never
    // comes is reported: vitest's 1 s default failed tests on a loaded machine whose state came later.
    expect: { poll: { timeout: 10_000 } },
    // dist/ built once per run, for the tests that start the service as a process.
    globalSetup: ['test/helpers/build.ts'],
    // A test that fails is a fault to explain and fix, never to run again until it passes:
    // test/helpers/no-retry.ts fails a test that asks for a retry, however it asks.
    retry: 0,
    setupFiles: ['test/helpers/no-retry.ts'],
    // The longest files first, across both projects, by test/durations.json: the workers finish
    // together instead of one running the last long file alone (test/helpers/longest-first.ts).
    sequence: { sequencer: LongestFirstSequencer },
    projects: [
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: ISOLATED_FILES, isolate: false } },
      { extends: true, test: { name: 'isolated', include: ISOLATED_FILES, isolate: true } },
    ],
  },
});

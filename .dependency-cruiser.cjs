/**
 * The layers of src/, as dependency-cruiser rules: `npm run lint:layers` (part of `npm run lint`)
 * fails on any import that crosses a layer the wrong way. Read it bottom-up:
 *
 *   store           all SQL; imports no other layer
 *   domain          the rules of the service; imports only store
 *   auth            who is calling; imports domain, store, and the Config type
 *   bus             what instances share through Redis (REDIS_URL): the event hub and rate limiter behind
 *                   domain's interfaces; imports only domain (and ioredis)
 *   http            what every surface shares (request id, bearer, body limit, error envelope, log line);
 *                   imports domain and the Db type
 *   rest, mcp,      the surfaces; import http, auth, domain, config.ts and the Db type,
 *   oauth, console, never another surface and never the store itself
 *   device-channel
 *   packages/device-sdk  the device SDK shipped to device makers (@dfc/device); imports nothing from
 *                   the server, and the server (but for the CLI) imports nothing of it
 *   cli, app.ts, service.ts, main.ts, metrics.ts: composition roots, may import anything (only they use bus);
 *   config.ts, logger.ts: roots too, but they only name domain types.
 *
 * test/ and scripts/ may import anything; they are cruised for cycles and unresolvable imports.
 * test/tooling/layers.test.ts checks that these rules fail on a planted forbidden import.
 *
 * dependency-cruiser 17, not 18: 18 needs Node 22, and the service runs on Node 20.
 */

/** The folders under src/ that are surfaces: each answers one kind of client. */
const SURFACES = '(rest|mcp|oauth|console|device-channel)';

/** @type {import('dependency-cruiser').IConfiguration} */
module.exports = {
  forbidden: [
    {
      name: 'store-imports-no-layer',
      severity: 'error',
      comment:
        'src/store is the bottom layer (all SQL): it imports nothing else from src/, except the data-only ' +
        'src/domain/action-states.ts, which names the action states the store writes.',
      from: { path: '^src/store/' },
      to: { path: '^src/', pathNot: ['^src/store/', '^src/domain/action-states[.]ts$'] },
    },
    {
      name: 'action-states-imports-nothing',
      severity: 'error',
      comment: 'src/domain/action-states.ts is data only, which is why the store may import it; it imports nothing.',
      from: { path: '^src/domain/action-states[.]ts$' },
      to: {},
    },
    {
      name: 'domain-imports-only-store',
      severity: 'error',
      comment:
        'src/domain holds the rules of the service and may use the store; it knows nothing of HTTP, a surface, ' +
        'auth, the device SDK, the CLI or the composition roots (app, service, config, metrics, logger).',
      from: { path: '^src/domain/' },
      to: { path: '^src/', pathNot: ['^src/domain/', '^src/store/'] },
    },
    {
      name: 'auth-imports-no-surface',
      severity: 'error',
      comment: 'src/auth may use domain and store, and the Config type; never http or a surface.',
      from: { path: '^src/auth/' },
      to: { path: '^src/', pathNot: ['^src/auth/', '^src/domain/', '^src/store/', '^src/config[.]ts$'] },
    },
    {
      name: 'auth-imports-config-types-only',
      severity: 'error',
      comment: 'src/auth is handed a parsed Config; it imports only its type (import type), never the parser.',
      from: { path: '^src/auth/' },
      to: { path: '^src/config[.]ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'bus-imports-only-domain',
      severity: 'error',
      comment:
        'src/bus puts Redis behind interfaces src/domain declares (EventHub, RateLimiter, DependencyCheck); it ' +
        'imports domain and nothing else from src/, so it cannot learn what a surface is.',
      from: { path: '^src/bus/' },
      to: { path: '^src/', pathNot: ['^src/bus/', '^src/domain/'] },
    },
    {
      name: 'only-roots-import-bus',
      severity: 'error',
      comment: 'The shared bus is chosen once, by the composition root (src/service.ts); every other layer sees only the domain interfaces.',
      from: { path: '^src/', pathNot: ['^src/bus/', '^src/(app|service|main|metrics)[.]ts$'] },
      to: { path: '^src/bus/' },
    },
    {
      name: 'http-imports-only-domain',
      severity: 'error',
      comment: 'src/http is what every surface shares; it may use domain and the Db type, never the store itself, ' + 'auth or a surface.',
      from: { path: '^src/http/' },
      to: { path: '^src/', pathNot: ['^src/http/', '^src/domain/', '^src/store/driver[.]ts$'] },
    },
    {
      name: 'surface-imports-no-other-surface',
      severity: 'error',
      comment:
        'A surface (rest, mcp, oauth, console, device-channel) never imports another: what two surfaces share belongs ' +
        'in src/http (protocol) or src/domain (rules).',
      from: { path: `^src/${SURFACES}/` },
      to: { path: `^src/${SURFACES}/`, pathNot: '^src/$1/' },
    },
    {
      name: 'surface-imports-only-shared-layers',
      severity: 'error',
      comment:
        'A surface may use http, auth, domain, config.ts and the Db type; not the store itself (go through ' +
        'domain), nor a composition root such as metrics.ts or app.ts, nor the CLI or the device SDK.',
      from: { path: `^src/${SURFACES}/` },
      to: {
        path: '^src/',
        pathNot: [`^src/${SURFACES}/`, '^src/http/', '^src/auth/', '^src/domain/', '^src/store/driver[.]ts$', '^src/config[.]ts$'],
      },
    },
    {
      name: 'db-type-only-above-domain',
      severity: 'error',
      comment: 'Above domain and auth, src/store/driver.ts is imported for the Db type only (import type).',
      from: { path: `^src/(http|${SURFACES})/` },
      to: { path: '^src/store/driver[.]ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'device-sdk-imports-no-server',
      severity: 'error',
      comment:
        'packages/device-sdk is the SDK shipped to device makers (the workspace package @dfc/device): it imports only ' +
        'itself and npm packages, never server code.',
      from: { path: '^packages/device-sdk/' },
      to: { path: '^(src|test|scripts|tools)/' },
    },
    {
      name: 'server-imports-no-device-sdk',
      severity: 'error',
      comment:
        'The service runs without the device SDK: only the CLI (simulated devices, the demo) uses it, as any ' +
        'device maker would, through the package name @dfc/device.',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^packages/device-sdk/' },
    },
    {
      name: 'config-and-logger-import-domain-types-only',
      severity: 'error',
      comment: 'config.ts and logger.ts are read by every layer; they name domain types (import type) and nothing else.',
      from: { path: '^src/(config|logger)[.]ts$' },
      to: { path: '^src/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'config-and-logger-import-only-domain',
      severity: 'error',
      comment: 'config.ts and logger.ts import types from src/domain only.',
      from: { path: '^src/(config|logger)[.]ts$' },
      to: { path: '^src/', pathNot: '^src/domain/' },
    },
    {
      name: 'no-unknown-layer',
      severity: 'error',
      comment:
        'Every file under src/ belongs to a layer these rules name; a new folder is given its place here ' +
        "(and in the README's layer table) before it imports anything.",
      from: {
        path: '^src/',
        pathNot: ['^src/(store|domain|auth|bus|http|rest|mcp|oauth|console|device-channel|cli)/', '^src/(app|service|main|metrics|logger|config)[.]ts$'],
      },
      to: {},
    },
    {
      name: 'npm-packages-per-layer',
      severity: 'error',
      comment:
        'The lower layers use only the packages of their job: domain validates (zod, ajv, and re2js, the ' +
        'linear-time engine device schemas\' patterns run on, docs/reference/rules.md "Devices"), the store talks ' +
        'libSQL, the device SDK speaks WebSocket (ws). HTTP, MCP, JWT and metrics packages belong higher up.',
      from: { path: '^src/domain/' },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'],
        pathNot: 'node_modules/(zod|ajv|ajv-formats|re2js)/',
      },
    },
    {
      name: 'npm-packages-of-the-store',
      severity: 'error',
      comment:
        'src/store uses the libSQL drivers (and the Hrana client and URL parsing under @libsql/client, for streams kept open) and nothing else from npm.',
      from: { path: '^src/store/' },
      to: {
        dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'],
        pathNot: 'node_modules/(libsql|@libsql/client|@libsql/core|@libsql/hrana-client)/',
      },
    },
    {
      name: 'npm-packages-of-the-bus',
      severity: 'error',
      comment: 'src/bus talks to Redis with ioredis and uses nothing else from npm.',
      from: { path: '^src/bus/' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'], pathNot: 'node_modules/ioredis/' },
    },
    {
      name: 'npm-packages-of-the-device-sdk',
      severity: 'error',
      comment: 'packages/device-sdk ships to device makers with ws as its only dependency.',
      from: { path: '^packages/device-sdk/' },
      to: { dependencyTypes: ['npm', 'npm-dev', 'npm-optional', 'npm-peer', 'npm-no-pkg', 'npm-unknown'], pathNot: 'node_modules/ws/' },
    },
    {
      name: 'no-circular',
      severity: 'error',
      comment: 'An import cycle makes load order matter and layers meaningless; break it by moving the shared part down.',
      from: {},
      to: { circular: true },
    },
    {
      name: 'not-to-unresolvable',
      severity: 'error',
      comment: 'An import that resolves to nothing: a typo, or a package missing from package.json.',
      from: {},
      to: { couldNotResolve: true },
    },
    {
      name: 'src-not-to-dev-dependency',
      severity: 'error',
      comment:
        'src/ is what `npm start` and the package exports run; a devDependency is not installed there. ' +
        'Type-only imports vanish at compile time and are fine.',
      from: { path: '^src/' },
      to: { dependencyTypes: ['npm-dev'], dependencyTypesNot: ['type-only'] },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    // See `import type` imports too: a layer must not lean on another even for a type, and the
    // type-only rules above need to tell them apart.
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: {
      exportsFields: ['exports'],
      conditionNames: ['import', 'require', 'node', 'default', 'types'],
      mainFields: ['module', 'main', 'types', 'typings'],
    },
    reporterOptions: {
      text: { highlightFocused: true },
    },
  },
};

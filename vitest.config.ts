import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  // The device SDK's source, as tsconfig.json's `paths` maps it: tests need no build of packages/device-sdk.
  resolve: { alias: { '@dfc/device': fileURLToPath(new URL('./packages/device-sdk/src/index.ts', import.meta.url)) } },
  test: {
    include: ['test/**/*.test.ts'],
    // Each test file starts its own server on a loopback port with its own temp database,
    // so files can run in parallel; the machine has two cores.
    pool: 'forks',
    maxWorkers: 2,
    testTimeout: 20_000,
    hookTimeout: 20_000,
  },
});

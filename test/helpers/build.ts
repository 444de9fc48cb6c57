import { buildIfChanged } from '../../scripts/build-if-changed.mjs';

/**
 * The run's global setup (vitest.config.ts): dist/ built once, before the first file, unless it
 * already is the build of the current sources. The tests that start the service as a process
 * run `dist/main.js` (`SERVICE_MAIN`, test/helpers/entry-point.ts), which starts in about half
 * the CPU that compiling `src/main.ts` through tsx costs on every start.
 */
export function setup(): void {
  buildIfChanged('test run');
}

/**
 * The entry point a test starts as a process, relative to the repository root: the build of
 * `src/main.ts` that the run's global setup (test/helpers/build.ts) keeps current, which starts
 * in about half the CPU that compiling the sources through tsx costs on every start.
 */
export const SERVICE_MAIN = 'dist/main.js';

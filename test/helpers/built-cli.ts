/**
 * A command of `src/cli/` as a test starts it in a process of its own: its build in `dist/cli/`,
 * which the run's global setup (test/helpers/build.ts) keeps current with the sources, run on
 * `process.execPath`. Starting the build costs about half the CPU of compiling the command's
 * imports through tsx on every start. Relative to the repository root.
 */
export const builtCli = (name: 'backup' | 'owner-token') => `dist/cli/${name}.js`;

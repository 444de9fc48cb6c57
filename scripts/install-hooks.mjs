// `npm run hooks`: installs a commit-msg hook that refuses a commit whose subject is over 72
// characters, the same check `npm run check:commits` makes of the history. Optional: the check
// runs in `npm run check` and in CI either way; the hook only says it sooner. It goes where git
// looks for hooks (`git rev-parse --git-path hooks`, shared by every worktree of the clone), and
// never replaces a hook it did not write.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

const MARK = '# installed by npm run hooks (scripts/install-hooks.mjs)';
const hook = `#!/bin/sh
${MARK}
exec node "$(git rev-parse --show-toplevel)/scripts/check-commits.mjs" --message-file "$1"
`;

const git = (args) => execFileSync('git', args, { encoding: 'utf8' }).trim();
// Relative to the working directory when git answers a relative path.
const hooks = path.resolve(git(['rev-parse', '--git-path', 'hooks']));
const file = path.join(hooks, 'commit-msg');
if (fs.existsSync(file) && !fs.readFileSync(file, 'utf8').includes(MARK)) {
  console.error(`${file} exists and was not written by npm run hooks: left as it is.`);
  process.exit(1);
}
fs.mkdirSync(hooks, { recursive: true });
fs.writeFileSync(file, hook, { mode: 0o755 });
console.log(`commit-msg hook installed: ${file}`);

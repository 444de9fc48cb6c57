// Builds dist/ (`npm run build`) only when an input of the build changed since the last build,
// by content, not time: `npm start` (scripts/start.mjs) before it runs dist/main.js, and the test
// run once before its first file (test/helpers/build.ts), so the services the tests start as
// processes run the built JavaScript instead of compiling the sources each time.
import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const stampFile = path.join(root, 'dist', '.start-fingerprint');
/** What the build reads: a change to any of these (content, not time) makes the next start rebuild. */
const INPUT_DIRS = ['src', 'packages/device-sdk/src'];
const INPUT_FILES = ['package.json', 'package-lock.json', 'packages/device-sdk/package.json', 'packages/device-sdk/tsconfig.json'];
/** What starting needs from a build. */
const OUTPUTS = ['dist/main.js', 'packages/device-sdk/dist/index.js'];

function filesUnder(dir) {
  const absolute = path.join(root, dir);
  if (!fs.existsSync(absolute)) return [];
  return fs
    .readdirSync(absolute, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => path.relative(root, path.join(entry.parentPath, entry.name)));
}

function fingerprint() {
  const tsconfigs = fs.readdirSync(root).filter((name) => /^tsconfig.*\.json$/.test(name));
  const files = [...INPUT_DIRS.flatMap(filesUnder), ...INPUT_FILES, ...tsconfigs].filter((file) => fs.existsSync(path.join(root, file))).sort();
  const hash = createHash('sha256');
  for (const file of files)
    hash
      .update(`${file}\0`)
      .update(fs.readFileSync(path.join(root, file)))
      .update('\0');
  return hash.digest('hex');
}

function readStamp() {
  try {
    return fs.readFileSync(stampFile, 'utf8').trim();
  } catch {
    return undefined;
  }
}

/** A build that could not run or failed; `status` is the exit status to end with. */
export class BuildFailed extends Error {
  constructor(message, status) {
    super(message);
    this.status = status;
  }
}

/**
 * Builds unless dist/ is the build of the current inputs. `who` names the caller in its lines
 * on stderr; throws `BuildFailed` when the build cannot run or fails.
 */
export function buildIfChanged(who) {
  const current = fingerprint();
  const built = OUTPUTS.every((file) => fs.existsSync(path.join(root, file)));
  if (built && readStamp() === current) return;
  if (!fs.existsSync(path.join(root, 'node_modules', 'typescript'))) {
    throw new BuildFailed(
      `${who}: the sources changed since the last build (or there is none), and building needs the development install (\`npm ci\`, not \`npm ci --omit=dev\`). ` +
        'Build where TypeScript is installed and run `node dist/main.js` (docs/operators/install.md).',
      1,
    );
  }
  console.error(built ? `${who}: sources changed since the last build: building` : `${who}: no build yet: building`);
  // Under an npm script npm names its own CLI; run directly, the npm on PATH.
  const npm = process.env.npm_execpath ? [process.execPath, process.env.npm_execpath] : ['npm'];
  const build = spawnSync(npm[0], [...npm.slice(1), 'run', '-s', 'build'], { cwd: root, stdio: 'inherit' });
  if (build.status !== 0) throw new BuildFailed(`${who}: npm run build failed (exit ${String(build.status ?? build.signal)})`, build.status ?? 1);
  fs.writeFileSync(stampFile, `${current}\n`);
}
